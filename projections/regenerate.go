package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// Where Regenerate builds the new views and records a swap in progress,
// home-relative (under state/, which no view walk enters).
const (
	regenDir    = "state/regen"
	regenMarker = "state/regen.json"
	staleFlag   = "state/views-stale"
)

// MarkViewsStale records, durably, that the views of h no longer follow
// its log (a salvage is about to rewrite it): until a Regenerate finishes,
// every open regenerates them (ViewsStale), whatever the checkpoint says,
// so a crash between the salvage and the regeneration cannot leave the
// lost entries' lines in the views. The checkpoint is left alone: its
// feedback.jsonl size still tells the log's lines from other programs'.
func MarkViewsStale(h home.Home) error {
	return home.WriteFileAtomic(filepath.Join(h.Dir, filepath.FromSlash(staleFlag)), []byte("views do not follow the log: the next open regenerates them\n"))
}

// ViewsStale reports whether MarkViewsStale was called and no Regenerate
// has finished since.
func ViewsStale(h home.Home) bool {
	_, err := os.Stat(filepath.Join(h.Dir, filepath.FromSlash(staleFlag)))
	return err == nil
}

// Reasons a line of the old feedback.jsonl was moved to quarantine/.
const (
	// SetAsideReplaced: a line inside the bytes the checkpoint vouched for
	// (so this log's own output) that the log no longer produces: damaged
	// on disk, or the projection of an entry a salvage lost.
	SetAsideReplaced = "replaced"
	// SetAsideCorrupt: a line past those bytes that is not a JSON object
	// (with a string id, when it has one): never ingested.
	SetAsideCorrupt = "corrupt"
	// SetAsideDuplicate: a line past those bytes whose id the log already
	// holds: never appended to the log again.
	SetAsideDuplicate = "duplicate_id"
)

// RegenerateOptions configure Regenerate.
type RegenerateOptions struct {
	// UpTo is the last sequence to project; 0 means every event of src.
	UpTo uint64
	// NoSync skips every fsync: of the new views, the quarantined lines,
	// the marker and the directories of the swap (tests, throw-away homes;
	// a crash may then lose the swap's order).
	NoSync bool
	// AfterSwap, when set, is called after each view is renamed into
	// place (crash tests stop the process there).
	AfterSwap func(view string)
	// SetAside names lines of the old views, by view and offset, that
	// the caller has already copied to quarantine/ (adoption's unreadable
	// lines, engine/adopt.go): they leave the views without a second copy.
	SetAside map[string]map[int64]bool
}

// ViewChange says how one view file differs after a regeneration.
type ViewChange struct {
	View string `json:"view"`
	// Offset is where the first differing line starts in the old file: a
	// cursor (a byte offset) at or before it still points at the same
	// bytes; one past it is invalid.
	Offset int64 `json:"offset"`
	// FirstLine is that line's number (1-based).
	FirstLine int `json:"firstLine"`
	// Removed counts lines of the old file, from FirstLine on, that the
	// new one does not hold; Added the new lines the old one did not.
	Removed int   `json:"removed"`
	Added   int   `json:"added"`
	OldSize int64 `json:"oldSize"`
	NewSize int64 `json:"newSize"`
	// Quarantine names the file under quarantine/ holding the removed
	// lines (views other than feedback.jsonl; its lines are listed one by
	// one in RegenerateReport.SetAside).
	Quarantine string `json:"quarantine,omitempty"`
}

func (c ViewChange) String() string {
	return fmt.Sprintf("%s: %d line(s) removed, %d added, first at line %d (byte %d); cursors past byte %d are invalid",
		c.View, c.Removed, c.Added, c.FirstLine, c.Offset, c.Offset)
}

// SetAside is one line of the old feedback.jsonl moved to quarantine/.
type SetAside struct {
	Offset     int64  `json:"offset"` // where it started in the old file
	Line       int    `json:"line"`   // its line number there (1-based)
	Reason     string `json:"reason"` // SetAsideReplaced, SetAsideCorrupt, SetAsideDuplicate
	Quarantine string `json:"quarantine"`
}

func (s SetAside) String() string {
	return fmt.Sprintf("feedback/feedback.jsonl line %d (byte %d): %s, moved to %s", s.Line, s.Offset, s.Reason, s.Quarantine)
}

// RegenerateReport says what Regenerate did.
type RegenerateReport struct {
	Events  int    `json:"events"`
	LastSeq uint64 `json:"lastSeq"`
	Skipped uint64 `json:"skipped"`
	// Changes lists every view whose bytes changed, by name.
	Changes []ViewChange `json:"changes"`
	// SetAside lists the lines of feedback.jsonl moved to quarantine/.
	SetAside []SetAside `json:"setAside,omitempty"`
	// Foreign counts the complete lines other programs appended past the
	// log's end of feedback.jsonl that were kept (after the log's own
	// lines) for the engine to ingest.
	Foreign int `json:"foreign"`
	// Resumed: an interrupted swap of an earlier regeneration was
	// finished first.
	Resumed bool `json:"resumed,omitempty"`
}

// regenMarkerFile is state/regen.json: the swap that Regenerate is doing.
type regenMarkerFile struct {
	Version int      `json:"version"`
	Moves   []string `json:"moves"`   // views to rename from state/regen into the home
	Removes []string `json:"removes"` // views of the home the new set has not
}

// Regenerate replaces the views of h with a rebuild from src (the log of
// h, in order), for a home whose views cannot be trusted to be the log's
// projection: after a salvage changed the log, an in-place `cmlab
// rebuild`, or an Open that found feedback.jsonl damaged. The caller holds
// the log's lock and no projector of h is open.
//
//  1. An interrupted earlier swap is finished (FinishRegenerate).
//  2. Every view is rebuilt into state/regen inside the home.
//  3. feedback.jsonl: each line of the old file is sorted (see
//     reconcileFeedback). Lines the log produces are dropped (the new
//     file holds them); lines before the old checkpoint's size that it
//     does not produce, corrupt lines and lines whose id the log holds go
//     to quarantine/; complete lines other programs appended past that
//     size go after the log's lines, for the engine to ingest; an
//     unfinished last line of theirs stays last.
//  4. state/regen.json lists the swap; then each view is renamed into
//     place (directory fsynced), stale views removed, the new checkpoint
//     renamed last, the marker removed. A crash anywhere leaves either
//     the old views and checkpoint untouched (no marker) or a marker that
//     the next Open's FinishRegenerate rolls forward.
func Regenerate(ctx context.Context, src iter.Seq2[*events.Event, error], h home.Home, opts RegenerateOptions) (*RegenerateReport, error) {
	rep := &RegenerateReport{Changes: []ViewChange{}}
	resumed, err := FinishRegenerate(h)
	if err != nil {
		return nil, err
	}
	rep.Resumed = resumed
	tmp := home.Home{Dir: filepath.Join(h.Dir, filepath.FromSlash(regenDir))}
	if err := os.RemoveAll(tmp.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tmp.Dir, home.DirPerm); err != nil {
		return nil, err
	}
	res, err := Rebuild(ctx, src, tmp, RebuildOptions{UpTo: opts.UpTo, NoSync: opts.NoSync})
	if err != nil {
		os.RemoveAll(tmp.Dir)
		return nil, fmt.Errorf("projections: regenerate: %w", err)
	}
	rep.Events, rep.LastSeq, rep.Skipped = res.Events, res.LastSeq, res.Skipped

	// The old feedback.jsonl, kept open: a legacy writer appending to it
	// until the swap is caught up after the rename (swapFeedback).
	var end int64 // bytes of the old file the log accounted for
	if cp, err := ReadCheckpoint(h); err == nil && cp != nil {
		end = cp.Views[FeedbackView]
	}
	old, err := os.Open(filepath.Join(h.Dir, FeedbackView))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var oldFeedback []byte
	if old != nil {
		defer old.Close()
		if oldFeedback, err = io.ReadAll(old); err != nil {
			return nil, err
		}
	}
	newPath := filepath.Join(tmp.Dir, FeedbackView)
	rebuilt, err := os.ReadFile(newPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	rc := reconcileFeedback(oldFeedback, end, rebuilt)
	for _, a := range rc.aside {
		if opts.SetAside[FeedbackView][a.off] {
			continue
		}
		name := fmt.Sprintf("feedback.jsonl-seq%d-at-%d.%s", rep.LastSeq, a.off, a.reason)
		if err := writeQuarantine(h, name, a.line, opts.NoSync); err != nil {
			return nil, err
		}
		rep.SetAside = append(rep.SetAside, SetAside{Offset: a.off, Line: a.lineNo, Reason: a.reason, Quarantine: "quarantine/" + name})
	}
	rep.Foreign = rc.foreign
	if len(rc.keep) > 0 {
		if err := appendFile(newPath, rc.keep, opts.NoSync); err != nil {
			return nil, err
		}
	}

	// What changes, view by view (and the removed lines of views other
	// than feedback.jsonl, kept in quarantine/: after a salvage they may
	// be all that is left of a lost entry).
	oldViews, newViews, err := viewFilesOf(h, tmp)
	if err != nil {
		return nil, err
	}
	inNew := map[string]bool{}
	for _, v := range newViews {
		inNew[v] = true
	}
	var removes []string
	for _, v := range oldViews {
		if !inNew[v] {
			removes = append(removes, v)
		}
	}
	all := append(append([]string{}, newViews...), removes...)
	sort.Strings(all)
	for _, v := range all {
		c, removed, err := diffView(h, tmp, v, opts.SetAside[v])
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		if v != FeedbackView && len(removed) > 0 {
			name := fmt.Sprintf("%s-seq%d-at-%d.replaced", strings.ReplaceAll(v, "/", "_"), rep.LastSeq, c.Offset)
			if err := writeQuarantine(h, name, removed, opts.NoSync); err != nil {
				return nil, err
			}
			c.Quarantine = "quarantine/" + name
		}
		rep.Changes = append(rep.Changes, *c)
	}

	// The swap.
	mk := regenMarkerFile{Version: 1, Moves: newViews, Removes: removes}
	b, err := json.Marshal(&mk)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(h.Dir, filepath.FromSlash(regenMarker)), append(b, '\n'), opts.NoSync); err != nil {
		return nil, err
	}
	sw := swap{h: h, mk: &mk, noSync: opts.NoSync, afterSwap: opts.AfterSwap,
		afterFeedback: func() error { return catchUpOldFeedback(h, old, int64(len(oldFeedback))) }}
	if err := sw.run(); err != nil {
		return nil, fmt.Errorf("projections: regenerate: swap (state/regen.json finishes it at the next open): %w", err)
	}
	return rep, nil
}

// FinishRegenerate completes a swap that Regenerate began and a crash
// interrupted (state/regen.json present): the views still in state/regen
// are renamed into place, the stale ones removed, the new checkpoint put
// last. Without a marker, a leftover state/regen (a rebuild that never
// reached the swap) is removed: the old views and checkpoint are intact.
// It reports whether a swap was finished. The engine calls it at every
// open, before reading the checkpoint.
func FinishRegenerate(h home.Home) (bool, error) {
	b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(regenMarker)))
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.RemoveAll(filepath.Join(h.Dir, filepath.FromSlash(regenDir))); err != nil {
			return false, err
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var mk regenMarkerFile
	if err := json.Unmarshal(b, &mk); err != nil || mk.Version != 1 {
		return false, fmt.Errorf("projections: %s is unreadable (%v): move it away and run `cmlab rebuild`", regenMarker, err)
	}
	for _, v := range append(append([]string{}, mk.Moves...), mk.Removes...) {
		if !validViewPath(v) {
			return false, fmt.Errorf("projections: %s names %q, not a view", regenMarker, v)
		}
	}
	if err := (&swap{h: h, mk: &mk}).run(); err != nil {
		return false, fmt.Errorf("projections: finish the interrupted regeneration: %w", err)
	}
	return true, nil
}

// swap renames each view of mk from state/regen into h (fsyncing the
// directory), removes the stale ones, renames the checkpoint last and
// removes the marker. A view already moved (absent from state/regen) is
// left alone, so it can run again after a crash. afterFeedback, when set,
// runs right after feedback.jsonl is in place.
type swap struct {
	h             home.Home
	mk            *regenMarkerFile
	noSync        bool
	afterSwap     func(string)
	afterFeedback func() error
}

func (s *swap) syncDir(dir string) error {
	if s.noSync {
		return nil
	}
	return home.SyncDir(dir)
}

func (s *swap) run() error {
	h, mk, afterSwap, afterFeedback := s.h, s.mk, s.afterSwap, s.afterFeedback
	tmp := filepath.Join(h.Dir, filepath.FromSlash(regenDir))
	for _, v := range mk.Moves {
		from := filepath.Join(tmp, filepath.FromSlash(v))
		to := filepath.Join(h.Dir, filepath.FromSlash(v))
		if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
			continue // moved before a crash
		}
		if err := mkdirsSynced(h.Dir, filepath.Dir(to), s.noSync); err != nil {
			return err
		}
		if err := os.Rename(from, to); err != nil {
			return err
		}
		if err := s.syncDir(filepath.Dir(to)); err != nil {
			return err
		}
		if v == FeedbackView && afterFeedback != nil {
			if err := afterFeedback(); err != nil {
				return err
			}
		}
		if afterSwap != nil {
			afterSwap(v)
		}
	}
	for _, v := range mk.Removes {
		p := filepath.Join(h.Dir, filepath.FromSlash(v))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := s.syncDir(filepath.Dir(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	cpFrom := filepath.Join(tmp, "state", "checkpoint.json")
	if _, err := os.Stat(cpFrom); err == nil {
		if err := os.Rename(cpFrom, h.CheckpointFile()); err != nil {
			return err
		}
		if err := s.syncDir(h.StateDir()); err != nil {
			return err
		}
	}
	if afterSwap != nil {
		afterSwap("state/checkpoint.json")
	}
	for _, f := range []string{staleFlag, regenMarker} {
		if err := os.Remove(filepath.Join(h.Dir, filepath.FromSlash(f))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := s.syncDir(h.StateDir()); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// mkdirsSynced creates dir (under root) and its missing parents, fsyncing
// each parent whose entries changed.
func mkdirsSynced(root, dir string, noSync bool) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	var missing []string
	for d := dir; d != root && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, home.DirPerm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0 && !noSync; i-- {
		if err := home.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// catchUpOldFeedback copies to the new feedback.jsonl what a legacy writer
// appended to the old file (still open as old) after Regenerate read its
// first n bytes: such a writer's file descriptor points at the old file.
func catchUpOldFeedback(h home.Home, old *os.File, n int64) error {
	if old == nil {
		return nil
	}
	fi, err := old.Stat()
	if err != nil || fi.Size() <= n {
		return err
	}
	extra := make([]byte, fi.Size()-n)
	if _, err := old.ReadAt(extra, n); err != nil {
		return err
	}
	return appendFile(filepath.Join(h.Dir, FeedbackView), extra, false)
}

func appendFile(path string, b []byte, noSync bool) error {
	if err := os.MkdirAll(filepath.Dir(path), home.DirPerm); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|noFollow, home.FilePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func writeQuarantine(h home.Home, name string, b []byte, noSync bool) error {
	if err := os.MkdirAll(h.QuarantineDir(), home.DirPerm); err != nil {
		return err
	}
	return writeFile(filepath.Join(h.QuarantineDir(), name), b, noSync)
}

// writeFile replaces path atomically, durably unless noSync.
func writeFile(path string, b []byte, noSync bool) error {
	if err := os.MkdirAll(filepath.Dir(path), home.DirPerm); err != nil {
		return err
	}
	return home.WriteDurable(path, home.WriteOptions{NoSync: noSync}, home.Bytes(b))
}

// asideLine is a line of the old feedback.jsonl bound for quarantine/.
type asideLine struct {
	off    int64
	lineNo int
	reason string
	line   []byte
}

// feedbackReconcile is what reconcileFeedback decided.
type feedbackReconcile struct {
	aside   []asideLine
	keep    []byte // foreign complete lines, then a foreign unfinished line
	foreign int    // complete lines in keep
}

// reconcileFeedback sorts the lines of old, the feedback.jsonl on disk, of
// which the first end bytes were the log's output when last checkpointed,
// against rebuilt, what the log produces now:
//
//   - a line rebuilt holds (as many times as it holds it) is the log's
//     own: dropped, the new file has it;
//   - otherwise, a line starting before end was the log's output and is
//     not any more (damaged, or an entry a salvage lost): quarantined as
//     replaced;
//   - a line past end that is not a JSON object, or whose id is not a
//     string: quarantined as corrupt, never ingested;
//   - a line past end whose id rebuilt (or an earlier kept line) holds:
//     quarantined as duplicate_id, never appended to the log again;
//   - any other complete line past end: another program's, kept;
//   - an unfinished last line: dropped when it is the start of a line
//     rebuilt holds (the log's own torn write), quarantined as replaced
//     when it starts before end, else kept last, untouched.
func reconcileFeedback(old []byte, end int64, rebuilt []byte) feedbackReconcile {
	var rc feedbackReconcile
	have := map[string]int{}
	ids := map[string]bool{}
	for line := range bytes.Lines(rebuilt) {
		have[string(line)]++
		if id, ok := feedbackLineID(bytes.TrimSuffix(line, []byte("\n"))); ok && id != "" {
			ids[id] = true
		}
	}
	off := int64(0)
	lineNo := 0
	for line := range bytes.Lines(old) {
		lineNo++
		at := off
		off += int64(len(line))
		if line[len(line)-1] != '\n' {
			torn := false
			for l := range bytes.Lines(rebuilt) {
				if bytes.HasPrefix(l, line) {
					torn = true
					break
				}
			}
			switch {
			case torn:
			case at < end:
				rc.aside = append(rc.aside, asideLine{at, lineNo, SetAsideReplaced, line})
			default:
				rc.keep = append(rc.keep, line...)
			}
			break
		}
		if have[string(line)] > 0 {
			have[string(line)]--
			continue
		}
		if at < end {
			rc.aside = append(rc.aside, asideLine{at, lineNo, SetAsideReplaced, line})
			continue
		}
		id, ok := feedbackLineID(line[:len(line)-1])
		switch {
		case !ok:
			rc.aside = append(rc.aside, asideLine{at, lineNo, SetAsideCorrupt, line})
		case id != "" && ids[id]:
			rc.aside = append(rc.aside, asideLine{at, lineNo, SetAsideDuplicate, line})
		default:
			if id != "" {
				ids[id] = true
			}
			rc.keep = append(rc.keep, line...)
			rc.foreign++
		}
	}
	return rc
}

// feedbackLineID parses a feedback line (without its '\n'): ok when it is
// a JSON object whose "id", if present, is a string; id is "" without one.
func feedbackLineID(line []byte) (id string, ok bool) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return "", false
	}
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(t, &v); err != nil {
		return "", false
	}
	if v.ID == nil {
		return "", true
	}
	if err := json.Unmarshal(v.ID, &id); err != nil {
		return "", false
	}
	return id, true
}

// diffView compares view v of h (old) with that of tmp (new): nil when
// they are equal, else the change and the removed lines' bytes.
// Removed lines at an offset aside holds are counted, not returned.
func diffView(h, tmp home.Home, v string, aside map[int64]bool) (*ViewChange, []byte, error) {
	a, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(v)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	b, err := os.ReadFile(filepath.Join(tmp.Dir, filepath.FromSlash(v)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	if bytes.Equal(a, b) {
		return nil, nil, nil
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	start := bytes.LastIndexByte(a[:i], '\n') + 1
	c := &ViewChange{View: v, Offset: int64(start), FirstLine: bytes.Count(a[:start], []byte("\n")) + 1, OldSize: int64(len(a)), NewSize: int64(len(b))}
	have := map[string]int{}
	for line := range bytes.Lines(b[start:]) {
		have[string(line)]++
	}
	var removed []byte
	off := int64(start)
	for line := range bytes.Lines(a[start:]) {
		at := off
		off += int64(len(line))
		if have[string(line)] > 0 {
			have[string(line)]--
			continue
		}
		c.Removed++
		if !aside[at] {
			removed = append(removed, line...)
		}
	}
	for _, n := range have {
		c.Added += n
	}
	return c, removed, nil
}
