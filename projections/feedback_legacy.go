package projections

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// The legacy feedback.jsonl protocol, the projector's side (doc.go, "The
// legacy feedback protocol", draws the round trip): writing our lines
// where other programs may append theirs (writeFeedback, insertFeedback),
// reading theirs past the end the log accounts for (ForeignFeedback,
// TakeAdopted), classifying them (ClassifyForeign) and setting aside the
// ones that may not be ingested (SetAsideForeign).

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

// FeedbackDamaged reports whether Open found feedback.jsonl non-empty but
// not vouched for by the checkpoint: shorter than it, different from its
// tail or whole-view CRC, or with no readable checkpoint at all. Writing
// such a file from empty would meet bytes that are neither this log's
// output nor lines another program appended after it (doc.go, "Legacy
// writers"); the engine regenerates the views instead (Regenerate), which
// sorts every line of the old file.
func (p *Projector) FeedbackDamaged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.feedbackDamaged
}

// FeedbackEnd is the byte size of feedback.jsonl that the log accounts for.
func (p *Projector) FeedbackEnd() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sizes[FeedbackView]
}

// feedbackWritten accounts for b, written into feedback.jsonl at end with
// WriteAt (past the view's buffered writer): the whole-view CRC, the size,
// and the fsync the next checkpoint owes.
func (p *Projector) feedbackWritten(end int64, b []byte) {
	p.extendCRC(FeedbackView, end, b)
	p.sizes[FeedbackView] = end + int64(len(b))
	p.unsync[FeedbackView] = true
}

// writeFeedback appends one line to feedback.jsonl in a home that other
// programs may append to (doc.go, "Legacy writers"). ingestAt is the
// recorded offset of a feedback.ingested line, else -1.
func (p *Projector) writeFeedback(line []byte, ingestAt int64) error {
	vf, end, err := p.flushedFeedback()
	if err != nil {
		return err
	}
	fi, err := vf.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < end {
		// Cut under us by someone else: append at the real end rather than
		// leave a hole of zeros.
		p.damaged[FeedbackView] = true
		end = size
	}
	if ingestAt >= 0 && p.adopted[ingestAt] {
		// A line adopted earlier (see below) and ingested now: it is
		// already inside the accounted bytes.
		delete(p.adopted, ingestAt)
		return nil
	}
	if ingestAt >= 0 && ingestAt < end && size == end {
		// The file is being written anew past what it held (a replay from
		// empty, or a catch-up rebuilding a cut feedback.jsonl): place the
		// line where the live projector adopted it, as Rebuild does.
		return p.insertFeedback(line, ingestAt)
	}
	for size > end {
		n := min(int64(len(line)), size-end)
		got := make([]byte, n)
		if _, err := vf.f.ReadAt(got, end); err != nil {
			return err
		}
		if bytes.Equal(got, line[:n]) {
			// Our own output from before a crash (or the ingested line
			// itself): keep what is there, add what is missing.
			if n < int64(len(line)) {
				if _, err := vf.f.WriteAt(line[n:], size); err != nil {
					return err
				}
			}
			p.feedbackWritten(end, line)
			return nil
		}
		if exp, ok := p.expected[end]; ok && end+int64(len(exp)) <= size {
			// A foreign line the log ingests later (the live projector
			// adopted it here): step over it; its event will be a no-op.
			got := make([]byte, len(exp))
			if _, err := vf.f.ReadAt(got, end); err != nil {
				return err
			}
			if bytes.Equal(got, exp) {
				delete(p.expected, end)
				p.adopted[end] = true
				p.extendCRC(FeedbackView, end, exp)
				end += int64(len(exp))
				p.sizes[FeedbackView] = end
				continue
			}
		}
		// Foreign bytes where our line belongs. Complete lines are adopted
		// (kept in place, reported for ingestion); an unfinished last line
		// can be neither moved nor written after.
		region := make([]byte, size-end)
		if _, err := vf.f.ReadAt(region, end); err != nil {
			return err
		}
		lines, rest := splitLines(region, end)
		if p.held != nil {
			for _, l := range lines {
				if _, reason := ClassifyForeign(l.Raw, p.held); reason != "" {
					return fmt.Errorf("%w: the line at %d is %s", ErrFeedbackDamaged, l.Offset, reason)
				}
			}
		}
		if len(rest) > 0 {
			return fmt.Errorf("%w (at offset %d)", ErrFeedbackPartial, size-int64(len(rest)))
		}
		p.foreign = append(p.foreign, lines...)
		for _, l := range lines {
			p.adopted[l.Offset] = true
		}
		p.extendCRC(FeedbackView, end, region)
		end = size
	}
	if _, err := vf.f.WriteAt(line, end); err != nil {
		return err
	}
	p.feedbackWritten(end, line)
	return nil
}

// ExpectIngested tells a catch-up which feedback.ingested lines the events
// it is about to re-apply contain (Raw without '\n', Offset): where one of
// them sits in feedback.jsonl before output that comes earlier in the log
// (a line adopted in place), verification steps over it instead of taking
// it for a new foreign line. nil clears the set.
func (p *Projector) ExpectIngested(lines []ForeignLine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = nil
	for _, l := range lines {
		if p.expected == nil {
			p.expected = map[int64][]byte{}
		}
		p.expected[l.Offset] = append(bytes.Clone(l.Raw), '\n')
	}
}

// StrictForeign makes Apply refuse, with ErrFeedbackDamaged, to adopt
// foreign lines of feedback.jsonl when one of them is corrupt or has an id
// for which held is true (an id the log holds): a catch-up sets it, so
// that its own damaged output past the checkpoint is never taken for
// another program's line and ingested again. nil clears it.
func (p *Projector) StrictForeign(held func(id string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = held
}

// flushedFeedback is feedback.jsonl with its buffered lines written, and
// the size of it the log accounts for.
func (p *Projector) flushedFeedback() (*viewFile, int64, error) {
	vf, err := p.file(FeedbackView)
	if err != nil {
		return nil, 0, err
	}
	if err := vf.w.Flush(); err != nil {
		return nil, 0, err
	}
	return vf, p.sizes[FeedbackView], nil
}

// insertFeedback places an ingested line at offset, before lines projected
// earlier: a rebuild meeting a line that the live projector adopted in
// place (doc.go, "Legacy writers") reproduces the live layout. It only
// runs where those bytes are being written anew (a rebuild, a replay, a
// catch-up of a cut file), never over bytes a reader has already seen.
func (p *Projector) insertFeedback(line []byte, offset int64) error {
	vf, end, err := p.flushedFeedback()
	if err != nil {
		return err
	}
	tail := make([]byte, end-offset)
	if _, err := vf.f.ReadAt(tail, offset); err != nil {
		return err
	}
	if _, err := vf.f.WriteAt(line, offset); err != nil {
		return err
	}
	if _, err := vf.f.WriteAt(tail, offset+int64(len(line))); err != nil {
		return err
	}
	end += int64(len(line))
	if _, err := vf.f.Seek(end, io.SeekStart); err != nil {
		return err
	}
	delete(p.crcs, FeedbackView) // bytes moved: the next checkpoint reads it back
	p.sizes[FeedbackView] = end
	p.unsync[FeedbackView] = true
	return nil
}

// splitLines splits b, which starts at offset base, into complete lines and
// an unfinished rest.
func splitLines(b []byte, base int64) (lines []ForeignLine, rest []byte) {
	off := base
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return lines, b
		}
		lines = append(lines, ForeignLine{Raw: bytes.Clone(b[:i]), Offset: off})
		off += int64(i + 1)
		b = b[i+1:]
	}
}

// TakeAdopted returns, and forgets, the complete foreign feedback lines
// that Apply found where its own output belonged and kept in place. The
// engine appends them as feedback.ingested events.
func (p *Projector) TakeAdopted() []ForeignLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.foreign
	p.foreign = nil
	return out
}

// ForeignFeedback reads feedback.jsonl past the end the log accounts for:
// the complete lines another program appended there, in order, and whether
// an unfinished line follows them.
func (p *Projector) ForeignFeedback() (lines []ForeignLine, partial bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, ErrClosed
	}
	if p.failed != nil {
		// The end the log accounts for is unknown after a failed apply.
		return nil, false, p.failed
	}
	end := p.sizes[FeedbackView]
	if vf, ok := p.open[FeedbackView]; ok {
		if err := vf.w.Flush(); err != nil {
			return nil, false, err
		}
	}
	// Nothing foreign is the common case, checked before every feedback
	// group: one lstat by name (a symlink goes the long way, and is refused).
	if fi, err := os.Lstat(p.path(FeedbackView)); err == nil && fi.Mode().IsRegular() && fi.Size() <= end {
		return nil, false, nil
	}
	f, err := p.opts.OpenFile(p.path(FeedbackView), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if fi.Size() <= end {
		return nil, false, nil
	}
	region := make([]byte, fi.Size()-end)
	if _, err := f.ReadAt(region, end); err != nil {
		return nil, false, err
	}
	lines, rest := splitLines(region, end)
	return lines, len(rest) > 0, nil
}
