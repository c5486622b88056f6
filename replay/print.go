package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/events"
)

// Filter selects events. Zero fields select everything.
type Filter struct {
	// Types are exact types, or prefixes ending in "." or "*" ("pty.", "step.*").
	Types  []string
	Stream string
	Req    string
	From   uint64 // first sequence
	To     uint64 // last sequence
	Since  time.Time
	Until  time.Time
}

// Match reports whether ev passes f.
func (f Filter) Match(ev *events.Event) bool {
	if f.From != 0 && ev.Seq < f.From || f.To != 0 && ev.Seq > f.To {
		return false
	}
	if !f.Since.IsZero() && ev.TS < f.Since.UnixMilli() || !f.Until.IsZero() && ev.TS > f.Until.UnixMilli() {
		return false
	}
	if f.Stream != "" && ev.Stream != f.Stream || f.Req != "" && ev.Req != f.Req {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		p, wild := strings.CutSuffix(t, "*")
		if wild || strings.HasSuffix(t, ".") {
			if strings.HasPrefix(ev.Type, p) {
				return true
			}
		} else if ev.Type == t {
			return true
		}
	}
	return false
}

// Select returns the events of log that pass f, in order.
func Select(ctx context.Context, log *Log, f Filter) ([]*events.Event, error) {
	var out []*events.Event
	for ev, err := range log.Events(ctx, max(f.From, 1), f.To) {
		if err != nil {
			return out, err
		}
		if f.Match(ev) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// tableChunk is how many rows Print aligns at once: a table of a long log
// streams instead of being held in memory.
const tableChunk = 1000

// Print streams the events of log that pass f to w, as a table (chunks of
// tableChunk rows aligned together) or, with asJSON, one Rendered object per
// line. It returns how many events it printed.
func Print(ctx context.Context, log *Log, f Filter, w io.Writer, asJSON bool) (int, error) {
	n := 0
	var chunk []*events.Event
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var err error
		if asJSON {
			err = WriteJSON(w, chunk)
		} else {
			err = writeRows(w, chunk, n == len(chunk))
		}
		chunk = chunk[:0]
		return err
	}
	for ev, err := range log.Events(ctx, max(f.From, 1), f.To) {
		if err != nil {
			if ferr := flush(); ferr != nil {
				return n, ferr
			}
			return n, err
		}
		if !f.Match(ev) {
			continue
		}
		chunk = append(chunk, ev)
		n++
		if len(chunk) == tableChunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if n == 0 && !asJSON {
		return 0, writeRows(w, nil, true)
	}
	return n, flush()
}

// Rendered is the JSON form of an event (events.Rendered).
type Rendered = events.Rendered

// Render decodes ev's payload for display (events.Render).
func Render(ev *events.Event) Rendered { return events.Render(ev) }

// WriteJSON writes one Rendered JSON object per line.
func WriteJSON(w io.Writer, evs []*events.Event) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		if err := enc.Encode(Render(ev)); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes evs as an aligned table: seq, time, type, stream,
// request id and a one-line summary of the payload.
func WriteTable(w io.Writer, evs []*events.Event) error { return writeRows(w, evs, true) }

func writeRows(w io.Writer, evs []*events.Event, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tSTREAM\tREQ\tSUMMARY")
	}
	for _, ev := range evs {
		req := ev.Req
		if req == "" {
			req = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, ev.ISOTime(), ev.Type, ev.Stream, req, Summary(ev))
	}
	return tw.Flush()
}

// summaryMax caps the length of a one-line summary.
const summaryMax = 90

// Summary describes an event's payload in one short line.
func Summary(ev *events.Event) string {
	p, err := ev.Decode()
	if err != nil {
		return "UNDECODABLE: " + err.Error()
	}
	var s string
	switch p := p.(type) {
	case *events.LabSessionStarted:
		s = fmt.Sprintf("session %s pid %d", p.SessionID, p.Pid)
	case *events.FeedbackSubmitted:
		s = fmt.Sprintf("feedback %s run=%s", p.Entry.ID, p.Entry.RunID)
	case *events.FeedbackIngested:
		s = fmt.Sprintf("foreign line at offset %d (%d bytes)", p.Offset, len(p.Raw))
	case *events.RunImported:
		s = fmt.Sprintf("run %s %s", p.Run.RunID, p.Run.ArtifactsDir)
	case *events.ExperimentCreated:
		s = fmt.Sprintf("experiment %s %q status=%s", p.Experiment.ExperimentID, p.Experiment.Name, p.Experiment.Status)
	case *events.ExperimentSubmitted:
		ids := make([]string, len(p.Feedback))
		for i, f := range p.Feedback {
			ids[i] = f.ID
		}
		s = fmt.Sprintf("experiment %s status=%s feedback=[%s]", p.Experiment.ExperimentID, p.Experiment.Status, strings.Join(ids, " "))
	case *events.ExperimentUpdated:
		s = fmt.Sprintf("experiment %s status=%s", p.Experiment.ExperimentID, p.Experiment.Status)
	case *events.RunAdopted:
		s = fmt.Sprintf("content-machine run line at offset %d (%d bytes)", p.Offset, len(p.Raw))
		if r, err := events.ParseRun(p.Raw); err == nil {
			s = fmt.Sprintf("run %s %s (adopted from content-machine)", r.RunID, r.ArtifactsDir)
		}
	case *events.ExperimentAdopted:
		s = fmt.Sprintf("content-machine experiment line at offset %d (%d bytes)", p.Offset, len(p.Raw))
		if x, err := events.ParseExperiment(p.Raw); err == nil {
			s = fmt.Sprintf("experiment %s %q status=%s (adopted from content-machine)", x.ExperimentID, x.Name, x.Status)
		}
	case *events.SessionAdopted:
		s = fmt.Sprintf("content-machine lab/sessions/%s/%s line at offset %d (%d bytes)", p.Session, p.File, p.Offset, len(p.Raw))
	case *events.IdempotencyRecorded:
		s = fmt.Sprintf("%s → %s", p.Kind, p.EntityID)
	case *events.PtySessionStarted:
		s = fmt.Sprintf("shell %s pid %d cwd %s", p.ShellID, p.Pid, p.Cwd)
	case *events.PtyBlockBegin:
		s = fmt.Sprintf("block %s #%d %q", p.Block.BlockID, p.Block.Seq, p.Block.Cmd)
	case *events.PtyBlockEnd:
		s = fmt.Sprintf("block %s %s exit=%s %s", p.Block.BlockID, p.Block.Status, intOr(p.Block.ExitCode), p.Block.Reason)
	case *events.PtyOutput:
		s = fmt.Sprintf("%d bytes at %d %q", len(p.Data), p.SpoolOffset, p.Data)
	case *events.PtyPrompt:
		s = fmt.Sprintf("prompt exit=%s cwd %s", intOr(p.ExitCode), p.Cwd)
	case *events.PtyInput:
		s = fmt.Sprintf("%s %q", p.Source, p.Data)
	case *events.PtySessionReset:
		s = fmt.Sprintf("%s → %s (%s)", p.OldShellID, p.NewShellID, p.Reason)
	case *events.PtySessionEnded:
		s = fmt.Sprintf("shell %s %s", p.ShellID, p.Reason)
	case *events.StepPlanned:
		ids := make([]string, len(p.Steps))
		for i, st := range p.Steps {
			ids[i] = st.StepID
		}
		s = fmt.Sprintf("mandate %s plan [%s]", p.MandateID, strings.Join(ids, " "))
	case *events.StepExecuting:
		s = fmt.Sprintf("%s executing pre=%s", p.StepID, short(p.ObservedPreHash))
	case *events.StepCompleted:
		s = fmt.Sprintf("%s completed post=%s", p.StepID, short(p.PostHash))
		if p.Recovered {
			s += " (recovered)"
		}
	case *events.StepFailed:
		s = fmt.Sprintf("%s failed %s: %s", p.StepID, p.ErrorClass, p.ErrorMsg)
	case *events.StepNeedsReview:
		s = fmt.Sprintf("%s needs review: %s", p.StepID, p.Reason)
	case *events.StepReset:
		s = fmt.Sprintf("%s reset to pending: %s", p.StepID, p.Reason)
	case *events.WalRepaired:
		s = fmt.Sprintf("cut %d bytes of %s at %d (%s)", p.Length, p.Segment, p.Offset, p.Reason)
	case *events.WalSalvaged:
		s = fmt.Sprintf("lost seq %d (%s)", p.LostSeq, p.Reason)
	case *events.RecoveryApplied:
		s = fmt.Sprintf("%d decisions", len(p.Decisions))
	default:
		b, _ := json.Marshal(p)
		s = string(b)
	}
	if r := []rune(s); len(r) > summaryMax {
		s = string(r[:summaryMax-1]) + "…"
	}
	return s
}

func intOr(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// short abbreviates a "sha256-…" hash for tables.
func short(h string) string {
	if h == "" {
		return "-"
	}
	if len(h) > 19 {
		return h[:19] + "…"
	}
	return h
}
