package projections

import (
	"bytes"
	"fmt"
	"os"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// FeedbackIDs returns the ids of the lines ev writes to feedback.jsonl:
// a feedback.submitted entry's, each entry of an experiment.submitted, an
// ingested line's own "id" (none when it has none). Events whose payload
// cannot be decoded project nothing and give none.
func FeedbackIDs(ev *events.Event) []string {
	switch ev.Type {
	case events.TypeFeedbackSubmitted:
		if p, err := events.DecodeAs[*events.FeedbackSubmitted](ev); err == nil {
			return []string{p.Entry.ID}
		}
	case events.TypeExperimentSubmitted:
		if p, err := events.DecodeAs[*events.ExperimentSubmitted](ev); err == nil {
			ids := make([]string, 0, len(p.Feedback))
			for _, e := range p.Feedback {
				ids = append(ids, e.ID)
			}
			return ids
		}
	case events.TypeFeedbackIngested:
		if p, err := events.DecodeAs[*events.FeedbackIngested](ev); err == nil {
			if id, ok := feedbackLineID(p.Raw); ok && id != "" {
				return []string{id}
			}
		}
	}
	return nil
}

// ClassifyForeign says whether a complete line another program appended
// to feedback.jsonl (raw, without its '\n') may be ingested: reason "" when
// it may (a blank line — spaces only — always may: it is one set aside
// already, or empty), SetAsideCorrupt when it is not a JSON object with a string id
// (or none), SetAsideDuplicate when held reports its id as one the log
// already holds. id is the line's id ("" without one).
func ClassifyForeign(raw []byte, held func(id string) bool) (id, reason string) {
	if IsBlank(raw) {
		return "", "" // set aside already, or empty: kept as it is
	}
	id, ok := feedbackLineID(raw)
	switch {
	case !ok:
		return "", SetAsideCorrupt
	case id != "" && held(id):
		return id, SetAsideDuplicate
	}
	return id, ""
}

// SetAsideForeign sets aside the given foreign lines of feedback.jsonl (as
// ForeignFeedback returned them, all past the end the log accounts for):
// each line's bytes are copied to a file of quarantine/ named after its
// offset and reason, then blanked in place (spaces, its '\n' kept). No
// byte moves: a cursor a poll handed out past or before the line stays on
// the same boundary (seed 000 rule 1; SPEC §4: foreign lines are never
// cut). The engine then ingests the blank line (ClassifyForeign takes it)
// with the reason, so the log records the set-aside and a rebuild
// reproduces the file. It fails, changing nothing, when the file no longer
// holds a line where it was.
func (p *Projector) SetAsideForeign(lines []ForeignLine, reasons []string) ([]SetAside, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	vf, err := p.file(FeedbackView)
	if err != nil {
		return nil, err
	}
	if err := vf.w.Flush(); err != nil {
		return nil, err
	}
	end := p.sizes[FeedbackView]
	for _, l := range lines {
		got := make([]byte, len(l.Raw)+1)
		if l.Offset < end {
			return nil, fmt.Errorf("projections: the set-aside line at %d lies inside what the log accounts for (%d)", l.Offset, end)
		}
		if _, err := vf.f.ReadAt(got, l.Offset); err != nil || !bytes.Equal(got[:len(l.Raw)], l.Raw) || got[len(l.Raw)] != '\n' {
			return nil, fmt.Errorf("projections: feedback.jsonl changed under the set-aside of the line at %d", l.Offset)
		}
	}
	out := make([]SetAside, 0, len(lines))
	for i, l := range lines {
		name, err := quarantineUnique(p.opts.Home, fmt.Sprintf("feedback.jsonl-foreign-at-%d.%s", l.Offset, reasons[i]), append(bytes.Clone(l.Raw), '\n'), p.opts.NoSync)
		if err != nil {
			return nil, err
		}
		// Only once the copy is durable is the line blanked.
		if _, err := vf.f.WriteAt(bytes.Repeat([]byte{' '}, len(l.Raw)), l.Offset); err != nil {
			return nil, err
		}
		out = append(out, SetAside{Offset: l.Offset, Reason: reasons[i], Quarantine: "quarantine/" + name})
	}
	if !p.opts.NoSync {
		if err := vf.f.Sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// IsBlank reports whether raw (a line without its '\n') is spaces only:
// a line SetAsideForeign blanked (or an empty one), ingested as it is.
func IsBlank(raw []byte) bool {
	for _, c := range raw {
		if c != ' ' {
			return false
		}
	}
	return true
}

// quarantineUnique writes b to a new file of quarantine/ named name, or
// name-1, name-2… when taken; it returns the name used.
func quarantineUnique(h home.Home, name string, b []byte, noSync bool) (string, error) {
	if err := os.MkdirAll(h.QuarantineDir(), home.DirPerm); err != nil {
		return "", err
	}
	return home.WriteNew(h.QuarantineDir(), func(i int) string {
		if i == 0 {
			return name
		}
		return fmt.Sprintf("%s-%d", name, i)
	}, b, noSync)
}
