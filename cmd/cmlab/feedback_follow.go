package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/cmlab/cmlab/labapi"
)

// feedbackFollowWait is how long one long poll of 'feedback poll
// --follow' waits on the daemon before asking again.
const feedbackFollowWait = 30 * time.Second

// feedbackNoDaemonPoll is how often --follow reads the home itself while
// no daemon runs (between a daemon's stop and the next one's start).
const feedbackNoDaemonPoll = 500 * time.Millisecond

// feedbackFollow prints the feedback entries after since as they arrive,
// one JSON line each, until the context ends (issue 25 §5). It long-polls
// the daemon (GET /api/feedback?wait=); the cursor moves only past a page
// it printed, so a daemon that stops or restarts between two pages costs
// neither a gap nor a duplicate: --follow waits for it (reading the home
// itself meanwhile) and resumes from its cursor. Errors of the cursor
// itself (INVALID_CURSOR) end it.
func feedbackFollow(ctx context.Context, g *globalOpts, since, session string, limit int) error {
	cur := since
	if cur == "" {
		cur = "0"
	}
	waiting := false
	for ctx.Err() == nil {
		page, err := feedbackFollowPage(ctx, g, cur, session, limit)
		if err != nil {
			var ae *labapi.APIError
			if errors.As(err, &ae) && ae.Code != labapi.CodeBusy && ae.Code != labapi.CodeDegraded {
				return err // the cursor itself is wrong: retrying cannot help
			}
			if !waiting {
				fmt.Fprintf(g.stderr, "cmlab: the daemon is not reachable (%v); waiting for it, resuming from cursor %s\n", err, cur)
				waiting = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(feedbackNoDaemonPoll):
			}
			continue
		}
		waiting = false
		for _, it := range page.Items {
			if _, err := fmt.Fprintln(g.stdout, string(it)); err != nil {
				return err
			}
		}
		if len(page.Items) > 0 || page.NextCursor != cur {
			fmt.Fprintf(g.stderr, "next cursor: %s (%d entries)\n", page.NextCursor, len(page.Items))
		}
		cur = page.NextCursor
	}
	return nil
}

// errNoDaemonNow: no daemon serves the home at the moment.
var errNoDaemonNow = errors.New("no daemon runs for the home")

// feedbackFollowPage is one page after cur: a long poll of the daemon, or,
// while none runs, a read of the home's view (without its lock, so a
// daemon can start meanwhile) after a short pause when it has nothing new.
func feedbackFollowPage(ctx context.Context, g *globalOpts, cur, session string, limit int) (*labapi.FeedbackPage, error) {
	h, err := g.Home()
	if err != nil {
		return nil, err
	}
	if _, err := labapi.ReadDaemonInfo(h); errors.Is(err, labapi.ErrNoDaemon) {
		ls := ""
		if limit > 0 {
			ls = strconv.Itoa(limit)
		}
		page, err := labapi.ReadFeedbackPage(h, cur, session, ls)
		if err != nil {
			if errors.Is(err, labapi.ErrViewsNotCurrent) {
				return nil, errNoDaemonNow
			}
			return nil, err
		}
		if len(page.Items) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(feedbackNoDaemonPoll):
			}
		}
		return page, nil
	} else if err != nil {
		return nil, err
	}
	c, closeFn, err := dialLab(ctx, g)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	if !c.Remote {
		return nil, errNoDaemonNow // it went away between the two looks
	}
	q := url.Values{"since": {cur}, "wait": {feedbackFollowWait.String()}}
	if session != "" {
		q.Set("sessionId", session)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var raw json.RawMessage
	if err := c.Do(ctx, "GET", "/api/feedback?"+q.Encode(), "", nil, &raw); err != nil {
		return nil, err
	}
	var page labapi.FeedbackPage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, fmt.Errorf("the daemon answered an unreadable feedback page: %w", err)
	}
	return &page, nil
}
