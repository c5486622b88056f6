package engine

// The legacy feedback.jsonl protocol, the engine's side (SPEC §4; the
// round trip is drawn once in projections/doc.go, "The legacy feedback
// protocol"): other programs append lines to feedback/feedback.jsonl as
// content-machine's Lab did; an append that writes feedback.jsonl first
// ingests their complete lines (feedback.ingested events, in the same
// commit group) or waits for an unfinished one, concurrent feedback
// appends are combined into one log append (feedback_combine.go), lines that may
// not be ingested are set aside in quarantine/, and the ids the log
// already holds are known (heldIDs) so that no line is ingested twice.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// heldIDs returns a test for "the log holds this feedback id", building
// the set from the whole log the first time.
func (e *Engine) heldIDs() (func(string) bool, error) {
	e.idMu.Lock()
	built := e.ids != nil
	if !built {
		e.ids = map[string]bool{}
	}
	e.idMu.Unlock()
	if !built {
		// apply adds what is committed from now on; the scan what was.
		if err := e.scanIDs(1); errors.Is(err, wal.ErrCompacted) {
			// A compacted log: the retained entries, and for the archived
			// ones the lines of feedback.jsonl the log accounts for (its
			// projection, checked against the checkpoint's CRC at open).
			err = e.scanIDs(e.log.FirstSeq())
			if err == nil {
				err = e.viewIDs()
			}
			if err != nil {
				e.idMu.Lock()
				e.ids = nil
				e.idMu.Unlock()
				return nil, fmt.Errorf("engine: feedback ids of the log: %w", err)
			}
		} else if err != nil {
			e.idMu.Lock()
			e.ids = nil
			e.idMu.Unlock()
			return nil, fmt.Errorf("engine: feedback ids of the log: %w", err)
		}
	}
	return func(id string) bool {
		e.idMu.Lock()
		defer e.idMu.Unlock()
		return e.ids[id]
	}, nil
}

// scanIDs adds the feedback ids of the log's events from seq on.
func (e *Engine) scanIDs(from uint64) error {
	for ev, err := range e.log.Events(from) {
		if err != nil {
			return err
		}
		e.addIDs(ev)
	}
	return nil
}

// viewIDs adds the ids of the lines of feedback.jsonl the log accounts for.
func (e *Engine) viewIDs() error {
	end := e.proj.FeedbackEnd()
	f, err := os.Open(e.opts.Home.FeedbackFile())
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, end)
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	e.idMu.Lock()
	defer e.idMu.Unlock()
	for line := range bytes.Lines(b) {
		if id, reason := projections.ClassifyForeign(bytes.TrimSuffix(line, []byte("\n")), func(string) bool { return false }); reason == "" && id != "" {
			e.ids[id] = true
		}
	}
	return nil
}

// addIDs records the feedback ids ev writes, once the set is built.
func (e *Engine) addIDs(ev *events.Event) {
	if !touchesFeedback([]*events.Event{ev}) {
		return
	}
	// Until heldIDs builds the set there is nothing to keep up to date:
	// do not decode the event (apply calls this for every feedback event
	// after the fsync, before the acknowledgement). heldIDs runs under
	// fbMu, which every append writing feedback holds through its apply,
	// so an event it scans past is not missed here.
	e.idMu.Lock()
	held := e.ids != nil
	e.idMu.Unlock()
	if !held {
		return
	}
	ids := projections.FeedbackIDs(ev)
	e.idMu.Lock()
	defer e.idMu.Unlock()
	if e.ids == nil {
		return
	}
	for _, id := range ids {
		e.ids[id] = true
	}
}

// FeedbackSetAside lists the lines other programs appended to
// feedback.jsonl that were moved to quarantine/ instead of being ingested
// (corrupt, or an id the log holds), since Open.
func (e *Engine) FeedbackSetAside() []projections.SetAside {
	e.lockFeedback()
	defer e.fbMu.Unlock()
	return append([]projections.SetAside(nil), e.setAside...)
}

// touchesFeedback reports whether any event writes to feedback.jsonl.
func touchesFeedback(evs []*events.Event) bool {
	for _, ev := range evs {
		switch ev.Type {
		case events.TypeFeedbackSubmitted, events.TypeExperimentSubmitted, events.TypeFeedbackIngested:
			return true
		}
	}
	return false
}

// IngestFeedback appends a feedback.ingested event for every complete line
// other programs appended to feedback.jsonl past what the log accounts
// for. An unfinished last line is left alone. The daemon may call it on a
// timer; Open and every append that writes feedback call it too.
func (e *Engine) IngestFeedback(ctx context.Context) error {
	if e.opts.ReadOnly {
		return ErrReadOnly
	}
	e.lockFeedback()
	defer e.fbMu.Unlock()
	if err := e.viewsCurrent(); err != nil {
		return err
	}
	pre, err := e.foreignEvents(ctx, false)
	if err != nil {
		return err
	}
	if len(pre) > 0 {
		if _, err := e.log.Append(ctx, pre...); err != nil {
			return fmt.Errorf("engine: ingest feedback: %w", err)
		}
	}
	e.ingestAdopted(ctx)
	return nil
}

// foreignEvents builds feedback.ingested events for the foreign lines past
// the projector's end of feedback.jsonl; fbMu is held. With waitPartial an
// unfinished last line is waited for (it must end before we write).
func (e *Engine) foreignEvents(ctx context.Context, waitPartial bool) ([]*events.Event, error) {
	deadline := time.Now().Add(e.opts.FeedbackWait)
	aside := map[int64]projections.SetAside{} // blanked by this call, by offset
	for {
		lines, partial, err := e.proj.ForeignFeedback()
		if err != nil {
			return nil, fmt.Errorf("engine: read feedback.jsonl: %w", err)
		}
		if moved, err := e.setAsideForeign(lines); err != nil {
			return nil, err
		} else if len(moved) > 0 {
			for _, a := range moved {
				aside[a.Offset] = a
			}
			continue // read the blanked lines back
		}
		if !partial || !waitPartial {
			out := make([]*events.Event, 0, len(lines))
			for i := range lines {
				in := events.FeedbackIngested{Raw: lines[i].Raw, Offset: lines[i].Offset}
				if a, ok := aside[in.Offset]; ok && projections.IsBlank(in.Raw) {
					in.SetAside, in.Quarantine = a.Reason, a.Quarantine
				}
				ev, err := events.New("feedback", &in)
				if err != nil {
					return nil, err
				}
				out = append(out, ev)
			}
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, ErrFeedbackBusy
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// setAsideForeign moves to quarantine/ the foreign lines that may not be
// ingested (SPEC §4 legacy writers, as issue 14 narrows it): corrupt ones,
// and ones whose id the log — or an earlier line of this batch — holds.
// It returns the lines it set aside (blanked in place, copied to
// quarantine/: projections.SetAsideForeign); fbMu is held.
func (e *Engine) setAsideForeign(lines []projections.ForeignLine) ([]projections.SetAside, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	held, err := e.heldIDs()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	heldOrSeen := func(id string) bool { return seen[id] || held(id) }
	var aside []projections.ForeignLine
	var reasons []string
	for _, l := range lines {
		id, reason := projections.ClassifyForeign(l.Raw, heldOrSeen)
		if reason != "" {
			aside = append(aside, l)
			reasons = append(reasons, reason)
			continue
		}
		if id != "" {
			seen[id] = true
		}
	}
	if len(aside) == 0 {
		return nil, nil
	}
	out, err := e.proj.SetAsideForeign(aside, reasons)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.setAside = append(e.setAside, out...)
	return out, nil
}

// ingestAdopted appends the foreign lines the projector found in place of
// its own output (a foreign write that raced the commit) as
// feedback.ingested events; fbMu is held. Best effort: a failure leaves
// them for the next catch-up, which finds them again.
func (e *Engine) ingestAdopted(ctx context.Context) {
	lines := e.proj.TakeAdopted()
	if len(lines) == 0 {
		return
	}
	evs := make([]*events.Event, 0, len(lines))
	for i := range lines {
		ev, err := events.New("feedback", &lines[i])
		if err != nil {
			return
		}
		evs = append(evs, ev)
	}
	e.log.Append(ctx, evs...)
}
