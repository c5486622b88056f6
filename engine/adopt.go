package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// Adoption of a content-machine home (issue 28 A1).
//
// content-machine and cmlab both default to ~/.cm and share
// lab/runs.jsonl, lab/experiments.jsonl, lab/sessions/<s>/*.jsonl and
// feedback/feedback.jsonl. A home their Lab wrote holds those files and no
// checkpoint of ours. The first open takes every line of them into the log
// before the views are opened: each line becomes one event carrying its
// bytes (run.adopted, experiment.adopted, session.adopted,
// feedback.ingested), in file order, so the views the log then projects
// are the files as they were, byte for byte, except for the lines adoption
// could not read, which are copied to quarantine/ (named by file and
// offset) and leave the views. The views are then regenerated from the log
// (projections.Regenerate), which writes the first checkpoint.
//
// Exactly once: nothing is written to the views until every line is in
// the log, so a crash (SIGKILL between any two appends) leaves the files
// as content-machine wrote them and no checkpoint: the next open adopts
// again and skips each line the log already holds (by its bytes, per
// file: the lines adopted before the crash, in order), so every line is
// appended once. A line whose id the log holds from cmlab's own events
// (a home whose checkpoint was lost) is the log's own output: left to the
// regeneration, never appended again.

// AdoptReportFile is the home-relative path of the adoption report.
const AdoptReportFile = "state/adopted.json"

// Reasons a line was not adopted but copied to quarantine/.
const (
	AdoptUnreadable = "unreadable"   // not a record of its file (not a JSON object, no id)
	AdoptDuplicate  = "duplicate_id" // an id an earlier line of the file (or the log) holds
	AdoptUnfinished = "unfinished"   // a last line without its '\n' (feedback.jsonl excepted)
)

// AdoptReport says what adoption took from a content-machine home and
// from where: state/adopted.json, the daemon's log, `cmlab status`.
type AdoptReport struct {
	Version int    `json:"version"`
	At      string `json:"at"` // when the pass that finished it ran (RFC 3339)
	Home    string `json:"home"`
	// Resumed: an earlier pass was interrupted (its lines are counted
	// under Earlier) and this one finished it.
	Resumed bool          `json:"resumed,omitempty"`
	Files   []AdoptedFile `json:"files"`
	// SetAside lists every line copied to quarantine/ instead.
	SetAside []AdoptSetAside `json:"setAside,omitempty"`
	// Events is how many events this pass appended.
	Events int `json:"events"`
	// Late: lines another program appended to an adopted home's runs or
	// experiments past the checkpoint (adoptLate); Previous is the report
	// this one replaced.
	Late     bool         `json:"late,omitempty"`
	Previous *AdoptReport `json:"previous,omitempty"`
}

// AdoptedFile is what adoption did with one file.
type AdoptedFile struct {
	File string `json:"file"` // home-relative
	// Kind: runs, experiments, session, feedback.
	Kind  string `json:"kind"`
	Bytes int64  `json:"bytes"`
	Lines int    `json:"lines"` // complete lines read
	// Adopted lines are in the log (Earlier of them appended by an
	// interrupted earlier pass).
	Adopted int `json:"adopted"`
	Earlier int `json:"earlier,omitempty"`
	// InLog: lines whose id the log already held from cmlab's own events.
	InLog    int `json:"inLog,omitempty"`
	SetAside int `json:"setAside,omitempty"`
	// Records: distinct run or experiment ids adopted.
	Records int `json:"records,omitempty"`
	// UnfinishedAt: feedback.jsonl ends with a line another program has
	// not finished; it is left in place (ingested once it ends).
	UnfinishedAt *int64 `json:"unfinishedAt,omitempty"`
	// Skipped says why the file was left alone (not a regular file).
	Skipped string `json:"skipped,omitempty"`
}

// AdoptSetAside is one line copied to quarantine/ instead of adopted.
type AdoptSetAside struct {
	File       string `json:"file"`
	Offset     int64  `json:"offset"`
	Line       int    `json:"line"`
	Reason     string `json:"reason"`
	Quarantine string `json:"quarantine"`
}

func (s AdoptSetAside) String() string {
	return fmt.Sprintf("%s line %d (byte %d): %s, copied to %s", s.File, s.Line, s.Offset, s.Reason, s.Quarantine)
}

// Summary is the report in one line.
func (r *AdoptReport) Summary() string {
	var parts []string
	for _, f := range r.Files {
		if f.Skipped != "" {
			parts = append(parts, fmt.Sprintf("%s left alone (%s)", f.File, f.Skipped))
			continue
		}
		s := fmt.Sprintf("%d line(s) of %s", f.Adopted, f.File)
		if f.Records > 0 {
			noun := "run(s)"
			if f.Kind == "experiments" {
				noun = "experiment(s)"
			}
			s = fmt.Sprintf("%d %s (%s)", f.Records, noun, s)
		}
		parts = append(parts, s)
	}
	what := "adopted a content-machine home: "
	if r.Late {
		what = "adopted lines another program appended past the checkpoint: "
	}
	out := what + strings.Join(parts, ", ")
	if len(parts) == 0 {
		out = what + "nothing to take"
	}
	if n := len(r.SetAside); n > 0 {
		out += fmt.Sprintf("; %d line(s) it could not read set aside in quarantine/", n)
	}
	if r.Resumed {
		out += " (finishing an interrupted adoption)"
	}
	return out + " (" + AdoptReportFile + ")"
}

// ReadAdoptReport reads state/adopted.json of h: nil, nil when there is none.
func ReadAdoptReport(h home.Home) (*AdoptReport, error) {
	b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(AdoptReportFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r AdoptReport
	if err := json.Unmarshal(b, &r); err != nil || r.Version != 1 {
		return nil, fmt.Errorf("%s is unreadable (%v); it is a report only, nothing depends on it", AdoptReportFile, err)
	}
	return &r, nil
}

// Adopted is the report of the adoption Open did, nil when none ran.
func (e *Engine) Adopted() *AdoptReport { return e.adopted }

// adoptBatch is how many events one append of adoption carries.
const adoptBatch = 512

// WantsAdoption reports whether the next open of h adopts it: a home
// content-machine's Lab wrote that cmlab never opened (commands that read
// a home without opening it open it instead, so that adoption runs).
func WantsAdoption(h home.Home) bool { return wantsAdoption(h) }

// wantsAdoption reports whether h looks like a home content-machine wrote
// and cmlab never opened: no checkpoint (cmlab writes one at its first
// open), no regeneration pending, and a non-empty Lab or feedback file.
func wantsAdoption(h home.Home) bool {
	if _, err := os.Lstat(h.CheckpointFile()); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if projections.ViewsStale(h) {
		return false
	}
	for _, f := range adoptSources(h) {
		if fi, err := os.Lstat(filepath.Join(h.Dir, filepath.FromSlash(f.file))); err == nil && fi.Size() > 0 {
			return true
		}
	}
	return false
}

type adoptSource struct {
	file, kind, session string
}

// adoptSources lists the files adoption reads, in the order it appends
// them: runs, experiments, each session's files (sorted), feedback.
func adoptSources(h home.Home) []adoptSource {
	out := []adoptSource{{projections.RunsView, "runs", ""}, {projections.ExperimentsView, "experiments", ""}}
	ents, _ := os.ReadDir(filepath.Join(h.Dir, "lab", "sessions"))
	for _, d := range ents {
		if !d.IsDir() || home.ValidateID(d.Name()) != nil {
			continue
		}
		for _, f := range events.SessionFiles {
			out = append(out, adoptSource{"lab/sessions/" + d.Name() + "/" + f, "session", d.Name()})
		}
	}
	return append(out, adoptSource{projections.FeedbackView, "feedback", ""})
}

// logHeld is what the log already holds, as adoption needs it.
type logHeld struct {
	runIDs, expIDs, fbIDs map[string]bool // from cmlab's own events
	streams               map[string]bool // Lab session streams of cmlab's own events
	adopted               map[string]map[string]int
	adoptedRunIDs         map[string]bool
	ingestedIDs           map[string]bool // feedback ids of ingested lines
}

func (e *Engine) scanHeld(from uint64) (*logHeld, error) {
	held := &logHeld{runIDs: map[string]bool{}, expIDs: map[string]bool{}, fbIDs: map[string]bool{}, streams: map[string]bool{},
		adopted: map[string]map[string]int{}, adoptedRunIDs: map[string]bool{}, ingestedIDs: map[string]bool{}}
	add := func(file string, raw []byte) {
		m := held.adopted[file]
		if m == nil {
			m = map[string]int{}
			held.adopted[file] = m
		}
		m[string(raw)]++
	}
	for ev, err := range e.log.Events(from) {
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(ev.Stream, "lab_") {
			held.streams[ev.Stream] = true
		}
		switch ev.Type {
		case events.TypeRunImported:
			if p, err := events.DecodeAs[*events.RunImported](ev); err == nil {
				held.runIDs[p.Run.RunID] = true
			}
		case events.TypeExperimentCreated, events.TypeExperimentSubmitted, events.TypeExperimentUpdated:
			if p, err := ev.Decode(); err == nil {
				switch p := p.(type) {
				case *events.ExperimentCreated:
					held.expIDs[p.Experiment.ExperimentID] = true
				case *events.ExperimentSubmitted:
					held.expIDs[p.Experiment.ExperimentID] = true
				case *events.ExperimentUpdated:
					held.expIDs[p.Experiment.ExperimentID] = true
				}
			}
			for _, id := range projections.FeedbackIDs(ev) {
				held.fbIDs[id] = true
			}
		case events.TypeFeedbackSubmitted:
			for _, id := range projections.FeedbackIDs(ev) {
				held.fbIDs[id] = true
			}
		case events.TypeFeedbackIngested:
			if p, err := events.DecodeAs[*events.FeedbackIngested](ev); err == nil {
				add(projections.FeedbackView, p.Raw)
				for _, id := range projections.FeedbackIDs(ev) {
					held.ingestedIDs[id] = true
				}
			}
		case events.TypeRunAdopted:
			if p, err := events.DecodeAs[*events.RunAdopted](ev); err == nil {
				add(projections.RunsView, p.Raw)
				if r, err := events.ParseRun(p.Raw); err == nil {
					held.adoptedRunIDs[r.RunID] = true
				}
			}
		case events.TypeExperimentAdopted:
			if p, err := events.DecodeAs[*events.ExperimentAdopted](ev); err == nil {
				add(projections.ExperimentsView, p.Raw)
			}
		case events.TypeSessionAdopted:
			if p, err := events.DecodeAs[*events.SessionAdopted](ev); err == nil {
				add("lab/sessions/"+p.Session+"/"+p.File, p.Raw)
			}
		}
	}
	return held, nil
}

// adopter appends the lines of one adoption pass.
type adopter struct {
	e       *Engine
	held    *logHeld
	rep     *AdoptReport
	aside   map[string]map[int64]bool
	batch   []*events.Event
	batches int
	size    int
	// late: lines past the checkpoint (adoptLate): a run id the log
	// holds, adopted or not, is a duplicate.
	late bool
}

func (e *Engine) newAdopter(held *logHeld) *adopter {
	a := &adopter{e: e, held: held, rep: &AdoptReport{Version: 1, Home: e.opts.Home.Dir, Files: []AdoptedFile{}},
		aside: map[string]map[int64]bool{}, size: adoptBatch}
	if e.opts.adoptBatch > 0 {
		a.size = e.opts.adoptBatch
	}
	return a
}

func (a *adopter) flush(ctx context.Context) error {
	if len(a.batch) == 0 {
		return nil
	}
	if _, err := a.e.log.Append(ctx, a.batch...); err != nil {
		return fmt.Errorf("engine: adopt: %w", err)
	}
	a.rep.Events += len(a.batch)
	a.batch = a.batch[:0]
	a.batches++
	if a.e.opts.adoptHook != nil {
		a.e.opts.adoptHook(a.batches)
	}
	return nil
}

// setAside copies line (found at off in src) to quarantine/.
func (a *adopter) setAside(src adoptSource, af *AdoptedFile, off int64, lineNo int, line []byte, reason string) error {
	h := a.e.opts.Home
	name := fmt.Sprintf("%s-adopted-at-%d.%s", strings.ReplaceAll(src.file, "/", "_"), off, reason)
	if err := os.MkdirAll(h.QuarantineDir(), home.DirPerm); err != nil {
		return err
	}
	if err := home.WriteDurable(filepath.Join(h.QuarantineDir(), name), home.WriteOptions{NoSync: a.e.opts.NoSync}, home.Bytes(line)); err != nil {
		return fmt.Errorf("engine: adopt: quarantine: %w", err)
	}
	if a.aside[src.file] == nil {
		a.aside[src.file] = map[int64]bool{}
	}
	a.aside[src.file][off] = true
	af.SetAside++
	a.rep.SetAside = append(a.rep.SetAside, AdoptSetAside{File: src.file, Offset: off, Line: lineNo, Reason: reason, Quarantine: "quarantine/" + name})
	return nil
}

// lines adopts the lines of data, which starts at byte base (line number
// firstLine) of src. earlier holds the lines the log already projects
// there, by bytes: each one met is consumed instead of appended.
func (a *adopter) lines(ctx context.Context, src adoptSource, af *AdoptedFile, data []byte, base int64, firstLine int, earlier map[string]int, torn func([]byte) bool) error {
	held := a.held
	seen := map[string]bool{}
	off := base
	lineNo := firstLine - 1
	for line := range bytes.Lines(data) {
		lineNo++
		at := off
		off += int64(len(line))
		if line[len(line)-1] != '\n' {
			if torn != nil && torn(line) {
				break // the start of a line the log projects: its own torn write
			}
			if src.kind == "feedback" {
				af.UnfinishedAt = &at // another program's line in progress: left in place
				break
			}
			if err := a.setAside(src, af, at, lineNo, line, AdoptUnfinished); err != nil {
				return err
			}
			break
		}
		af.Lines++
		raw := line[:len(line)-1]
		if earlier[string(raw)] > 0 {
			earlier[string(raw)]--
			if a.late {
				af.Lines-- // the log's own output, not a line to adopt
				continue
			}
			af.Adopted++
			af.Earlier++
			a.rep.Resumed = true
			noteRecord(src.kind, raw, seen, af)
			continue
		}
		var p events.Payload
		reason := ""
		switch src.kind {
		case "runs":
			if projections.IsBlank(raw) {
				p = &events.RunAdopted{Raw: raw, Offset: at}
				break
			}
			run, err := events.ParseRun(raw)
			switch {
			case err != nil:
				reason = AdoptUnreadable
			case held.runIDs[run.RunID] && !a.late:
				af.InLog++
				continue
			case seen[run.RunID] || held.adoptedRunIDs[run.RunID] || held.runIDs[run.RunID]:
				reason = AdoptDuplicate
			default:
				p = &events.RunAdopted{Raw: raw, Offset: at}
			}
		case "experiments":
			if projections.IsBlank(raw) {
				p = &events.ExperimentAdopted{Raw: raw, Offset: at}
				break
			}
			x, err := events.ParseExperiment(raw)
			switch {
			case err != nil:
				reason = AdoptUnreadable
			case held.expIDs[x.ExperimentID] && !a.late:
				af.InLog++
				continue
			default:
				p = &events.ExperimentAdopted{Raw: raw, Offset: at}
			}
		case "session":
			var obj map[string]json.RawMessage
			if !projections.IsBlank(raw) && (len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &obj) != nil) {
				reason = AdoptUnreadable
			} else {
				p = &events.SessionAdopted{Session: src.session, File: filepath.Base(src.file), Raw: raw, Offset: at}
			}
		case "feedback":
			id, why := projections.ClassifyForeign(raw, func(id string) bool {
				return held.fbIDs[id] || held.ingestedIDs[id] || seen[id]
			})
			switch {
			case why == projections.SetAsideCorrupt:
				reason = AdoptUnreadable
			case why == projections.SetAsideDuplicate && held.fbIDs[id]:
				af.InLog++
				continue
			case why == projections.SetAsideDuplicate:
				reason = AdoptDuplicate
			default:
				p = &events.FeedbackIngested{Raw: raw, Offset: at}
			}
		}
		if reason != "" {
			if err := a.setAside(src, af, at, lineNo, line, reason); err != nil {
				return err
			}
			continue
		}
		stream := events.AdoptStream
		if src.kind == "feedback" {
			stream = "feedback" // as every feedback.ingested
		}
		ev, err := events.New(stream, p)
		if err != nil {
			return fmt.Errorf("engine: adopt: %w", err)
		}
		a.batch = append(a.batch, ev)
		af.Adopted++
		noteRecord(src.kind, raw, seen, af)
		if len(a.batch) >= a.size {
			if err := a.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish appends what is left and writes the report; a report of lines
// past a checkpoint keeps the one before it (Previous).
func (a *adopter) finish(ctx context.Context) error {
	if err := a.flush(ctx); err != nil {
		return err
	}
	h := a.e.opts.Home
	rep := a.rep
	sort.SliceStable(rep.SetAside, func(i, j int) bool { return rep.SetAside[i].File < rep.SetAside[j].File })
	rep.At = time.Now().UTC().Format(time.RFC3339)
	if a.late {
		rep.Late = true
		if prev, err := ReadAdoptReport(h); err == nil && prev != nil {
			prev.Previous = nil // one level: the adoption before this one
			rep.Previous = prev
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := home.WriteDurable(filepath.Join(h.Dir, filepath.FromSlash(AdoptReportFile)), home.WriteOptions{NoSync: a.e.opts.NoSync}, home.Bytes(append(b, '\n'))); err != nil {
		return fmt.Errorf("engine: adopt: report: %w", err)
	}
	a.e.adopted = rep
	return nil
}

// adoptContentMachine adopts a content-machine home (see above) when h is
// one; it returns the lines it set aside, by view and offset, for the
// regeneration (nil when it did not run).
func (e *Engine) adoptContentMachine(ctx context.Context) (map[string]map[int64]bool, error) {
	h := e.opts.Home
	if !wantsAdoption(h) || e.log.FirstSeq() > 1 {
		return nil, nil
	}
	if e.opts.ReadOnly {
		// Adoption appends; without it the views would be regenerated
		// from an empty log, moving their files to quarantine/.
		return nil, fmt.Errorf("engine: %s is a content-machine home that cmlab has not adopted yet, and it is open read-only: %w\n  fix: open it once without --read-only (any command, or 'cmlab serve'), which adopts it; see docs/content-machine.md", h.Dir, ErrReadOnly)
	}
	held, err := e.scanHeld(1)
	if err != nil {
		return nil, fmt.Errorf("engine: adopt: read the log: %w", err)
	}
	a := e.newAdopter(held)
	for _, src := range adoptSources(h) {
		if src.kind == "session" && held.streams[src.session] {
			continue // a session of cmlab's own: the log's output
		}
		path := filepath.Join(h.Dir, filepath.FromSlash(src.file))
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: adopt: %w", err)
		}
		af := AdoptedFile{File: src.file, Kind: src.kind, Bytes: fi.Size()}
		if !fi.Mode().IsRegular() {
			af.Skipped = "not a regular file"
			a.rep.Files = append(a.rep.Files, af)
			continue
		}
		if fi.Size() == 0 {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("engine: adopt: %w", err)
		}
		if err := a.lines(ctx, src, &af, data, 0, 1, held.adopted[src.file], nil); err != nil {
			return nil, err
		}
		a.rep.Files = append(a.rep.Files, af)
	}
	if err := a.finish(ctx); err != nil {
		return nil, err
	}
	return a.aside, nil
}

// adoptLate takes in the lines another program (content-machine's own
// server, on a home cmlab adopted) appended to lab/runs.jsonl or
// lab/experiments.jsonl past the checkpoint: the projector would cut them
// (catch-up cuts a view back to its checkpointed size). Lines past the
// checkpoint that the log's events after it project are its own (a
// crash's unfinished output); every other line is adopted as at the first
// open, or set aside, and the catch-up then writes it after the log's own
// lines. A crash before the checkpoint finds the adopted lines among the
// log's own output at the next open: nothing is adopted twice. A view
// whose bytes the checkpoint does not vouch for (Checkpoint.Vouches) is
// left alone: the catch-up rebuilds it, and a lying size says nothing
// about where the log's lines end.
func (e *Engine) adoptLate(ctx context.Context) error {
	h := e.opts.Home
	if projections.ViewsStale(h) {
		return nil
	}
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil || cp.Seq > e.log.LastSeq() {
		return nil // the open regenerates or rebuilds the views
	}
	type tail struct {
		src  adoptSource
		data []byte
		base int64
		line int
	}
	var tails []tail
	for _, src := range adoptSources(h)[:2] { // runs, experiments
		path := filepath.Join(h.Dir, filepath.FromSlash(src.file))
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() <= cp.Views[src.file] {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil || int64(len(b)) <= cp.Views[src.file] {
			continue
		}
		if !cp.Vouches(src.file, b) {
			// A damaged or tampered size: the catch-up rebuilds the view
			// from the log, and the bytes past that size are its own.
			continue
		}
		base := cp.Views[src.file]
		tails = append(tails, tail{src, b[base:], base, bytes.Count(b[:base], []byte("\n")) + 1})
	}
	if len(tails) == 0 {
		return nil
	}
	// What the log projects there after the checkpoint.
	own := map[string]map[string]int{}
	var ownLines = map[string][][]byte{}
	for ev, err := range e.log.Events(cp.Seq + 1) {
		if err != nil {
			return nil // the catch-up reports it
		}
		for _, t := range tails {
			for _, l := range projections.LinesFor(ev, t.src.file) {
				if own[t.src.file] == nil {
					own[t.src.file] = map[string]int{}
				}
				own[t.src.file][string(bytes.TrimSuffix(l, []byte("\n")))]++
				ownLines[t.src.file] = append(ownLines[t.src.file], l)
			}
		}
	}
	foreign := false
	for _, t := range tails {
		m := map[string]int{}
		for k, v := range own[t.src.file] {
			m[k] = v
		}
		for line := range bytes.Lines(t.data) {
			if line[len(line)-1] != '\n' {
				if !isPrefixOfAny(line, ownLines[t.src.file]) {
					foreign = true
				}
				break
			}
			if m[string(line[:len(line)-1])] > 0 {
				m[string(line[:len(line)-1])]--
				continue
			}
			foreign = true
		}
	}
	if !foreign {
		return nil // the log's own output past the checkpoint (a crash)
	}
	if e.opts.ReadOnly {
		// The catch-up would cut them; adopting them appends.
		return fmt.Errorf("engine: %s holds lines another program appended to lab/runs.jsonl or lab/experiments.jsonl since cmlab's last checkpoint, and it is open read-only: %w\n  fix: open it once without --read-only, which adopts them; see docs/content-machine.md", h.Dir, ErrReadOnly)
	}
	held, err := e.scanHeld(1)
	if err != nil {
		return nil // a compacted log: left to the catch-up as before
	}
	a := e.newAdopter(held)
	a.late = true
	for _, t := range tails {
		af := AdoptedFile{File: t.src.file, Kind: t.src.kind, Bytes: t.base + int64(len(t.data))}
		lines := ownLines[t.src.file]
		if err := a.lines(ctx, t.src, &af, t.data, t.base, t.line, own[t.src.file], func(l []byte) bool { return isPrefixOfAny(l, lines) }); err != nil {
			return err
		}
		a.rep.Files = append(a.rep.Files, af)
	}
	return a.finish(ctx)
}

func isPrefixOfAny(b []byte, lines [][]byte) bool {
	for _, l := range lines {
		if bytes.HasPrefix(l, b) {
			return true
		}
	}
	return false
}

// noteRecord remembers the id of an adopted line (runs and feedback: for
// duplicates) and counts distinct records.
func noteRecord(kind string, raw []byte, seen map[string]bool, af *AdoptedFile) {
	var id string
	switch kind {
	case "runs":
		if r, err := events.ParseRun(raw); err == nil {
			id = r.RunID
		}
	case "experiments":
		if x, err := events.ParseExperiment(raw); err == nil {
			id = x.ExperimentID
		}
	case "feedback":
		id, _ = projections.ClassifyForeign(raw, func(string) bool { return false })
	}
	if id == "" || seen[id] {
		return
	}
	seen[id] = true
	if kind == "runs" || kind == "experiments" {
		af.Records++
	}
}
