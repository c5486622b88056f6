package projections

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

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
// it may, SetAsideCorrupt when it is not a JSON object with a string id
// (or none), SetAsideDuplicate when held reports its id as one the log
// already holds. id is the line's id ("" without one).
func ClassifyForeign(raw []byte, held func(id string) bool) (id, reason string) {
	id, ok := feedbackLineID(raw)
	switch {
	case !ok:
		return "", SetAsideCorrupt
	case id != "" && held(id):
		return id, SetAsideDuplicate
	}
	return id, ""
}

// SetAsideForeign moves the given foreign lines of feedback.jsonl (as
// ForeignFeedback returned them, all past the end the log accounts for)
// to quarantine/, each with its reason, and removes them from the file:
// the lines after them move up. It fails, changing nothing, when the file
// no longer holds them where they were. Bytes another program appends
// while it runs are kept after the rest.
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
	fi, err := vf.f.Stat()
	if err != nil {
		return nil, err
	}
	region := make([]byte, max(0, fi.Size()-end))
	if _, err := vf.f.ReadAt(region, end); err != nil {
		return nil, err
	}
	drop := map[int64]bool{}
	for _, l := range lines {
		at := l.Offset - end
		if at < 0 || at+int64(len(l.Raw)) >= int64(len(region)) || !bytes.Equal(region[at:at+int64(len(l.Raw))], l.Raw) || region[at+int64(len(l.Raw))] != '\n' {
			return nil, fmt.Errorf("projections: feedback.jsonl changed under the set-aside of the line at %d", l.Offset)
		}
		drop[l.Offset] = true
	}
	var out []SetAside
	kept := make([]byte, 0, len(region))
	off := end
	for line := range bytes.Lines(region) {
		at := off
		off += int64(len(line))
		if !drop[at] {
			kept = append(kept, line...)
			continue
		}
		reason := ""
		for i, l := range lines {
			if l.Offset == at {
				reason = reasons[i]
			}
		}
		name, err := quarantineUnique(p.opts.Home, fmt.Sprintf("feedback.jsonl-foreign-at-%d.%s", at, reason), line, p.opts.NoSync)
		if err != nil {
			return nil, err
		}
		out = append(out, SetAside{Offset: at, Reason: reason, Quarantine: "quarantine/" + name})
	}
	// What was appended since the read goes after the rest.
	if fi2, err := vf.f.Stat(); err == nil && fi2.Size() > fi.Size() {
		extra := make([]byte, fi2.Size()-fi.Size())
		if _, err := vf.f.ReadAt(extra, fi.Size()); err != nil {
			return nil, err
		}
		kept = append(kept, extra...)
	}
	if _, err := vf.f.WriteAt(kept, end); err != nil {
		return nil, err
	}
	if err := vf.f.Truncate(end + int64(len(kept))); err != nil {
		return nil, err
	}
	if !p.opts.NoSync {
		if err := vf.f.Sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quarantineUnique writes b to a new file of quarantine/ named name, or
// name-1, name-2… when taken; it returns the name used.
func quarantineUnique(h home.Home, name string, b []byte, noSync bool) (string, error) {
	if err := os.MkdirAll(h.QuarantineDir(), home.DirPerm); err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s-%d", name, i)
		}
		f, err := os.OpenFile(filepath.Join(h.QuarantineDir(), n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, home.FilePerm)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return "", err
		}
		if !noSync {
			if err := f.Sync(); err != nil {
				f.Close()
				return "", err
			}
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		if noSync {
			return n, nil
		}
		return n, home.SyncDir(h.QuarantineDir())
	}
}
