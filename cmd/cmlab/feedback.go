package main

import (
	"encoding/json"
	"fmt"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// newFeedbackCmd builds 'cmlab feedback add|poll'.
func newFeedbackCmd(g *globalOpts) *cobra.Command {
	return commandGroup(&cobra.Command{
		Use:   "feedback",
		Short: "Record human feedback on runs, or poll new feedback with a byte cursor",
	}, newFeedbackAddCmd(g), newFeedbackPollCmd(g))
}

func newFeedbackAddCmd(g *globalOpts) *cobra.Command {
	var runID, expID, variantID, notes, topic, reqID string
	var ratings, tags []string
	c := &cobra.Command{
		Use:   "add",
		Short: "Append one feedback entry (POST /api/feedback)",
		Long: `Append one feedback entry through the running daemon (or the home directly
when no daemon runs). Ratings are integers 0–100 over overall, hook, pacing,
script, visuals, motion, captions and sync. --request-id makes a retry safe:
the same id returns the first answer and appends nothing.`,
		Example: `  cmlab feedback add --run run_… --rating overall=80 --rating hook=65 --notes "strong open"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if runID != "" {
				body["runId"] = runID
			}
			if expID != "" {
				body["experimentId"] = expID
			}
			if variantID != "" {
				body["variantId"] = variantID
			}
			if topic != "" {
				body["topic"] = topic
			}
			if notes != "" {
				body["notes"] = notes
			}
			if len(tags) > 0 {
				body["tags"] = tags
			}
			if len(ratings) > 0 {
				rm := map[string]json.Number{}
				for _, kv := range ratings {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return &usageError{"--rating wants KEY=VALUE, got " + strconv.Quote(kv)}
					}
					v = strings.TrimSpace(v)
					if _, err := strconv.Atoi(v); err != nil {
						return &usageError{"--rating " + kv + ": VALUE must be an integer 0–100"}
					}
					rm[strings.TrimSpace(k)] = json.Number(v)
				}
				body["ratings"] = rm
			}
			var out struct {
				FeedbackID string `json:"feedbackId"`
			}
			if err := labCall(cmd.Context(), g, "POST", "/api/feedback", reqID, body, &out); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, out)
			}
			_, err := fmt.Fprintln(g.stdout, out.FeedbackID)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&runID, "run", "", "run id the feedback is about")
	f.StringVar(&expID, "experiment", "", "experiment id")
	f.StringVar(&variantID, "variant", "", "variant id (\"baseline\" or var_…)")
	f.StringArrayVar(&ratings, "rating", nil, "KEY=VALUE rating, integer 0–100 (repeatable)")
	f.StringVar(&notes, "notes", "", "free-text notes")
	f.StringArrayVar(&tags, "tag", nil, "tag (repeatable)")
	f.StringVar(&topic, "topic", "", "topic (when no run is given)")
	f.StringVar(&reqID, "request-id", "", "idempotency key (default: a fresh UUID)")
	return c
}

func newFeedbackPollCmd(g *globalOpts) *cobra.Command {
	var since, session string
	var limit int
	var follow bool
	c := &cobra.Command{
		Use:   "poll",
		Short: "Read feedback after a byte cursor (GET /api/feedback)",
		Long: `Read the feedback entries appended after --since, a byte offset into
feedback/feedback.jsonl. Pass the printed next cursor to the next poll to see
each entry exactly once. --session filters entries without stalling the
cursor; --limit (at most 500) stops early with a cursor that loses nothing.

--follow keeps going: it prints each entry (one JSON line) as it arrives,
waiting on the daemon for the next one (a long poll, GET
/api/feedback?wait=), until interrupted. When the daemon stops or
restarts, --follow waits for it and resumes from its cursor: no entry is
missed or printed twice.`,
		Example: `  cmlab feedback poll --since 0 --json
  cmlab feedback poll --since 1834 --session lab_… --limit 50
  cmlab feedback poll --follow              # every entry, then each new one as it comes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if follow {
				return feedbackFollow(cmd.Context(), g, since, session, limit)
			}
			q := url.Values{}
			q.Set("since", since)
			if session != "" {
				q.Set("sessionId", session)
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			var page struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor string            `json:"nextCursor"`
			}
			done, err := readLocal(g, func(h home.Home) (any, error) {
				return labapi.ReadFeedbackPage(h, since, session, q.Get("limit"))
			}, &page)
			if !done {
				err = labCall(cmd.Context(), g, "GET", "/api/feedback?"+q.Encode(), "", nil, &page)
			}
			if err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, page)
			}
			for _, it := range page.Items {
				fmt.Fprintln(g.stdout, string(it))
			}
			fmt.Fprintf(g.stderr, "next cursor: %s (%d entries)\n", page.NextCursor, len(page.Items))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&since, "since", "0", "byte cursor: the nextCursor of the previous poll")
	f.StringVar(&session, "session", "", "only entries of this Lab session")
	f.IntVar(&limit, "limit", 0, "at most this many entries (≤ 500; 0: up to 500)")
	f.BoolVar(&follow, "follow", false, "keep printing entries as they arrive (across daemon restarts)")
	return c
}
