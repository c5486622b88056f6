package engine

// The feedback combiner. Every Append that writes feedback.jsonl goes
// through one goroutine (feedbackLoop): the foreign lines other programs
// appended there must be ingested ahead of our next write, so such appends
// cannot race each other into the log's committer. The combiner takes
// every append that is waiting, checks for foreign lines once and queues
// them all to the log as one append (wal.Log.Enqueue), and it does not
// wait for that append before it combines and queues the next: while the
// log fsyncs and projects group k, group k+1 is written behind it. At
// most maxFeedbackFlights combined appends are in the log at once.
//
// What keeps this equal to one append at a time:
//   - Order: the combiner alone enqueues, so the log gives the groups
//     ascending sequences in the order they were formed, and applies and
//     answers them in that order.
//   - Acknowledgement: each appender is answered from its group's
//     Pending.Wait, after the fsync and the projection of that group; a
//     write or fsync fault fails the group it hits and every group behind
//     it (the log acknowledges nothing once failed).
//   - Foreign lines: group k+1 is queued behind group k only when
//     feedback.jsonl holds nothing past the end the log accounts for
//     (read consistently with the projection of group k, under the
//     projector's lock). Anything there — a complete line, an unfinished
//     one, lines to set aside — first lets the groups in flight land, and
//     is then ingested, waited for or set aside exactly as before. A
//     foreign line written after that check is adopted in place by the
//     projection it lands under, as with one group at a time, and
//     ingested once that group has landed (ingestAdopted); its event
//     records its offset, so a later rebuild places it where it is. An
//     unfinished line written there leaves the views behind the log
//     (ViewsErr) from that group on, as it does for a single group: the
//     events are durable and acknowledged, and the views catch up once
//     the line is complete. The one difference: the group already queued
//     behind it is acknowledged too, where one group at a time would have
//     refused the next (ErrViewsBehind, nothing appended).
//   - fbMu is held from the moment a group is formed until no group is in
//     flight, so every append writing feedback.jsonl still holds it through
//     its apply (addIDs relies on that). Whoever else needs it
//     (lockFeedback) makes the combiner let its groups land and release it.

import (
	"context"
	"runtime"

	"github.com/cmlab/cmlab/events"
)

// feedbackAppend is one Append that writes feedback.jsonl, waiting for
// the feedback combiner.
type feedbackAppend struct {
	ctx  context.Context
	evs  []*events.Event
	done chan feedbackResult
}

type feedbackResult struct {
	seqs []uint64
	err  error
}

// maxFeedbackGroup caps the events one combined feedback append carries.
const maxFeedbackGroup = 4096

// maxFeedbackFlights is how many combined appends may be in the log at
// once: one being fsynced and projected, the next written behind it. A
// third would only split the appends waiting into smaller groups.
const maxFeedbackFlights = 2

// feedbackFlight is a combined append queued to the log and not yet landed.
type feedbackFlight struct {
	done chan struct{} // closed once the log answered and every appender was
}

// lockFeedback takes fbMu from outside the combiner: the combiner, which
// holds it while groups are in flight, sees the want and lets them land.
func (e *Engine) lockFeedback() {
	e.fbWant.Add(1)
	e.fbMu.Lock()
	e.fbWant.Add(-1)
}

func (e *Engine) feedbackLoop() {
	defer e.wg.Done()
	// The wait for an unfinished foreign line, the queueing and the
	// ingestion of adopted lines are bounded by the engine's life, not by
	// one caller's context.
	ctx, cancel := e.lifeContext()
	defer cancel()
	var flights []*feedbackFlight // oldest first; fbMu is held while any
	land := func() {
		<-flights[0].done
		flights = append(flights[:0], flights[1:]...)
		e.ingestAdopted(ctx)
		if len(flights) == 0 {
			e.fbMu.Unlock()
		}
	}
	landAll := func() {
		for len(flights) > 0 {
			land()
		}
	}
	for {
		var first *feedbackAppend
		var oldest chan struct{}
		if len(flights) > 0 {
			oldest = flights[0].done
		}
		select {
		case first = <-e.fbCh:
		case <-oldest:
			land()
			continue
		case <-e.stop:
			landAll()
			return
		}
		group := []*feedbackAppend{first}
		n := len(first.evs)
	collect:
		for n < maxFeedbackGroup {
			select {
			case r := <-e.fbCh:
				group = append(group, r)
				n += len(r.evs)
			default:
				break collect
			}
		}
		if len(flights) == maxFeedbackFlights {
			land()
		}
		clean := false
		if len(flights) > 0 {
			if clean = e.fbWant.Load() == 0 && e.noForeignFeedback(); !clean {
				landAll()
				runtime.Gosched() // let a lockFeedback waiting take fbMu first
			}
		}
		if len(flights) == 0 {
			e.fbMu.Lock()
		}
		if f := e.appendFeedbackGroup(ctx, group, clean); f != nil {
			flights = append(flights, f)
		} else if len(flights) == 0 {
			e.fbMu.Unlock()
		}
	}
}

// noForeignFeedback reports whether feedback.jsonl ends where the log's
// accounting does and the views are current: the check that lets a group
// be queued behind one in flight. fbMu is held.
func (e *Engine) noForeignFeedback() bool {
	if e.viewsCurrent() != nil {
		return false
	}
	lines, partial, err := e.proj.ForeignFeedback()
	return err == nil && len(lines) == 0 && !partial
}

// appendFeedbackGroup queues group to the log as one append, preceded by
// feedback.ingested events for the foreign lines feedback.jsonl holds
// (none when clean: noForeignFeedback just found none), and returns its
// flight, or nil when nothing was queued (every appender is then
// answered). fbMu is held.
func (e *Engine) appendFeedbackGroup(ctx context.Context, group []*feedbackAppend, clean bool) *feedbackFlight {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- feedbackResult{err: err} // never queued to the log
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	fail := func(err error) *feedbackFlight {
		for _, r := range live {
			r.done <- feedbackResult{err: err}
		}
		return nil
	}
	var pre []*events.Event
	if !clean {
		if err := e.viewsCurrent(); err != nil {
			return fail(err) // nothing appended: the client retries
		}
		var err error
		if pre, err = e.foreignEvents(ctx, true); err != nil {
			return fail(err)
		}
	}
	all := pre
	for _, r := range live {
		all = append(all, r.evs...)
	}
	p, err := e.log.Enqueue(ctx, all...)
	if err != nil {
		return fail(err)
	}
	if e.opts.feedbackQueued != nil {
		e.opts.feedbackQueued(len(live))
	}
	f := &feedbackFlight{done: make(chan struct{})}
	go func(skip int) {
		defer close(f.done)
		seqs, err := p.Wait()
		if err != nil {
			fail(err)
			return
		}
		seqs = seqs[skip:]
		for _, r := range live {
			r.done <- feedbackResult{seqs: seqs[:len(r.evs):len(r.evs)]}
			seqs = seqs[len(r.evs):]
		}
	}(len(pre))
	return f
}
