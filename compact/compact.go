package compact

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/wal"
)

// DefaultResumeWindow is the auto-resume window of start-up recovery
// (cmlab serve --lookback), whose events stay in the log.
const DefaultResumeWindow = 2 * time.Hour

// ErrOptions is wrapped by errors about invalid Options.
var ErrOptions = errors.New("compact: invalid options")

// Options configure Plan and Run. The zero value compacts everything no
// holder needs, deleting it (which the read-models holder refuses today).
type Options struct {
	Home home.Home
	// KeepDays keeps every segment holding an event newer than this many
	// days (0: no age limit).
	KeepDays int
	// KeepBytes removes the oldest segments while the log holds more than
	// this many bytes (0: no size limit). Exclusive with KeepDays.
	KeepBytes int64
	// Archive moves removed segments to this directory; empty deletes them.
	Archive string
	// DryRun plans and removes nothing.
	DryRun bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// ResumeWindow is the auto-resume window kept; default DefaultResumeWindow.
	ResumeWindow time.Duration
	// Holders are retention holders besides the built-in ones (see the
	// package doc), e.g. a shipping cursor.
	Holders []RetentionHolder
	// ReadModels are the read models a daemon restarts from a snapshot
	// (the daemon's table, daemon.ReadModels): the read-models holder
	// keeps the log after the oldest seq their snapshots cover. Empty:
	// the whole log is kept (nothing tells what a restart needs).
	ReadModels []ReadModel
	// Model is the retention model of the log (the daemon's live one);
	// nil: its snapshot in Home and the log after it (LoadModel).
	Model *retention.Model
	// SkipWaived does not ask the holders an archive waives (status's
	// reclaimable bytes: their answer would not count).
	SkipWaived bool
	// IndexCovered returns the seq the request-id index covers (the
	// read-models holder); nil: unknown, the holder keeps the whole log.
	IndexCovered func(ctx context.Context) (uint64, error)
	// Segments are the log's segments as wal.Segments lists them, when the
	// caller has just listed them (status: one stat of each instead of
	// two); nil: Plan lists them.
	Segments []wal.SegmentInfo
	// Checkpoint is the views' checkpoint seq when the caller has just
	// read it (status: a terminal home's checkpoint lists a view per
	// block, megabytes read and summed once instead of again here);
	// nil: the checkpoint holder reads it.
	Checkpoint *KnownCheckpoint
}

func (o *Options) check() error {
	switch {
	case o.KeepDays < 0 || o.KeepBytes < 0:
		return fmt.Errorf("%w: --keep-days and --keep-bytes must not be negative", ErrOptions)
	case o.KeepDays > 0 && o.KeepBytes > 0:
		return fmt.Errorf("%w: --keep-days and --keep-bytes are exclusive", ErrOptions)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ResumeWindow <= 0 {
		o.ResumeWindow = DefaultResumeWindow
	}
	return nil
}

// Hold is one holder's answer in a Report.
type Hold struct {
	Name string `json:"name"`
	// Seq is the oldest seq the holder needs (0: nothing).
	Seq uint64 `json:"seq"`
	// Waived: the holder reads archived segments back, and this
	// compaction archives (see RetentionHolder.ReadsArchive).
	Waived bool `json:"waived,omitempty"`
}

// Report is what a compaction planned and did.
type Report struct {
	Dir      string `json:"dir"`
	FirstSeq uint64 `json:"first_seq"` // first retained seq before
	LastSeq  uint64 `json:"last_seq"`
	LogBytes int64  `json:"log_bytes"` // retained segments before
	// Needed is the oldest seq still needed: the minimum over the holders
	// not waived (LastSeq+1 when none needs anything).
	Needed  uint64 `json:"oldest_needed_seq"`
	HeldBy  string `json:"held_by,omitempty"` // the holder that set Needed
	Holders []Hold `json:"holders"`
	// Policy describes the keep policy; PolicySeq is the first seq it
	// keeps (LastSeq+1 without a policy).
	Policy    string `json:"policy"`
	PolicySeq uint64 `json:"policy_seq"`
	// Before = min(Needed, PolicySeq): segments wholly before it go.
	Before      uint64            `json:"before"`
	NewFirstSeq uint64            `json:"new_first_seq"`
	Segments    []wal.SegmentInfo `json:"segments"` // removed (or, dry, removable)
	Bytes       int64             `json:"bytes"`    // their size
	Archive     string            `json:"archive,omitempty"`
	DryRun      bool              `json:"dry_run,omitempty"`
}

// Source is the log a plan reads: an open *wal.Log, or a wal.Reader of a
// log a daemon holds (ReaderSource).
type Source interface {
	Dir() string
	FirstSeq() uint64
	LastSeq() uint64
	Events(from uint64) iter.Seq2[*events.Event, error]
}

// ReaderSource adapts a wal.Reader of dir to Source (a dry run beside a
// running daemon).
func ReaderSource(dir string) (Source, error) {
	r, err := wal.OpenReader(dir)
	if err != nil {
		return nil, err
	}
	first, err := r.FirstSeq()
	if err != nil {
		return nil, err
	}
	last, err := r.LastSeq()
	if err != nil {
		return nil, err
	}
	return readerSource{r: r, dir: dir, first: first, last: last}, nil
}

// ReaderSourceAt adapts r, a wal.Reader of dir, to Source with the first
// and last seq already read (status reads them once).
func ReaderSourceAt(r *wal.Reader, dir string, first, last uint64) Source {
	return readerSource{r: r, dir: dir, first: first, last: last}
}

type readerSource struct {
	r           *wal.Reader
	dir         string
	first, last uint64
}

func (s readerSource) Dir() string      { return s.dir }
func (s readerSource) FirstSeq() uint64 { return s.first }
func (s readerSource) LastSeq() uint64  { return s.last }
func (s readerSource) Events(from uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		for ev, err := range s.r.Events(from) {
			if err != nil {
				yield(nil, err)
				return
			}
			if ev.Seq > s.last || !yield(ev, nil) {
				return
			}
		}
	}
}

// Plan works out what a compaction with o would remove from src.
func Plan(ctx context.Context, src Source, o Options) (Report, error) {
	if err := o.check(); err != nil {
		return Report{}, err
	}
	rep := Report{Dir: src.Dir(), FirstSeq: src.FirstSeq(), LastSeq: src.LastSeq(), Archive: o.Archive, DryRun: o.DryRun, Segments: []wal.SegmentInfo{}, Holders: []Hold{}}
	segs := o.Segments
	var err error
	if segs == nil {
		if segs, err = wal.Segments(src.Dir()); err != nil {
			return rep, err
		}
	}
	for _, s := range segs {
		rep.LogBytes += s.Size
	}
	now := o.Now()
	m := o.Model
	if m == nil {
		if o.Home.Dir != "" {
			m, _, err = LoadModel(ctx, o.Home, src)
		}
		if m == nil || err != nil {
			m = retention.New()
		}
	}
	sc, err := ScanModel(ctx, src, m, now.Add(-o.ResumeWindow), keepDaysCutoff(o, now))
	if err != nil {
		return rep, fmt.Errorf("compact: scan the log: %w", err)
	}
	holders := append(DefaultHolders(o.Home, sc, o.ReadModels, o.IndexCovered), o.Holders...)
	if k := o.Checkpoint; k != nil { // holders[0]: DefaultHolders' checkpoint holder
		holders[0].OldestNeededSeq = func(context.Context) (uint64, error) { return checkpointNeed(k.Seq, k.Present, k.Err) }
	}
	rep.Needed = rep.LastSeq + 1
	for _, h := range holders {
		if o.SkipWaived && h.ReadsArchive && o.Archive != "" {
			rep.Holders = append(rep.Holders, Hold{Name: h.Name, Waived: true})
			continue
		}
		seq, err := h.OldestNeededSeq(ctx)
		if err != nil {
			return rep, fmt.Errorf("compact: holder %q: %w", h.Name, err)
		}
		hold := Hold{Name: h.Name, Seq: seq, Waived: h.ReadsArchive && o.Archive != ""}
		rep.Holders = append(rep.Holders, hold)
		if seq != 0 && !hold.Waived && (seq < rep.Needed || seq == rep.Needed && rep.HeldBy == "") {
			rep.Needed, rep.HeldBy = seq, h.Name
		}
	}
	rep.Policy, rep.PolicySeq = "none: everything no holder needs", rep.LastSeq+1
	switch {
	case o.KeepDays > 0:
		rep.Policy = fmt.Sprintf("keep %d days (events since %s)", o.KeepDays, keepDaysCutoff(o, now).UTC().Format(time.RFC3339))
		rep.PolicySeq = sc.FirstSince
	case o.KeepBytes > 0:
		rep.Policy = fmt.Sprintf("keep at most %d bytes", o.KeepBytes)
		rep.PolicySeq = keepBytesSeq(segs, o.KeepBytes)
	}
	rep.Before = min(rep.Needed, rep.PolicySeq)
	n := wal.Removable(segs, rep.Before)
	rep.Segments = append(rep.Segments, segs[:n]...)
	for _, s := range rep.Segments {
		rep.Bytes += s.Size
	}
	rep.NewFirstSeq = rep.FirstSeq
	if n > 0 {
		rep.NewFirstSeq = segs[n].First
	}
	return rep, nil
}

// Run plans a compaction of l and, unless o.DryRun, performs it.
func Run(ctx context.Context, l *wal.Log, o Options) (Report, error) {
	rep, err := Plan(ctx, l, o)
	if err != nil || o.DryRun || len(rep.Segments) == 0 {
		return rep, err
	}
	var homeID string
	if o.Archive != "" && o.Home.Dir != "" {
		if homeID, err = HomeID(o.Home); err != nil {
			return rep, fmt.Errorf("compact: home id: %w", err)
		}
	}
	res, err := l.Compact(ctx, wal.CompactOptions{Before: rep.Before, Archive: o.Archive, Now: o.Now, HomeID: homeID})
	if err == nil && res.Archive != "" && o.Home.Dir != "" {
		if kerr := keepShipKey(o.Home, res.Archive); kerr != nil {
			err = fmt.Errorf("compact: copy the ship key to the archive: %w (the compaction itself is done)", kerr)
		}
	}
	rep.NewFirstSeq, rep.Archive = res.NewFirstSeq, res.Archive
	rep.Segments, rep.Bytes = rep.Segments[:0], res.Bytes
	for _, s := range res.Segments {
		rep.Segments = append(rep.Segments, wal.SegmentInfo{Name: s.Name, First: s.First, Size: s.Size})
	}
	return rep, err
}

// keepDaysCutoff is the oldest time KeepDays keeps (zero without it).
func keepDaysCutoff(o Options, now time.Time) time.Time {
	if o.KeepDays <= 0 {
		return time.Time{}
	}
	return now.Add(-time.Duration(o.KeepDays) * 24 * time.Hour)
}

// keepBytesSeq is the first seq of the oldest segment kept when the
// oldest segments go while the log holds more than limit bytes.
func keepBytesSeq(segs []wal.SegmentInfo, limit int64) uint64 {
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	i := 0
	for i+1 < len(segs) && total > limit {
		total -= segs[i].Size
		i++
	}
	if len(segs) == 0 {
		return 1
	}
	return segs[i].First
}

// Loop runs Run every interval until ctx ends: the daemon's compaction
// policy. Each outcome goes to report (when set); a failed run (ENOSPC
// included: it removes nothing) is simply tried again at the next tick.
// The caller owns the goroutine that calls Loop and waits for it.
func Loop(ctx context.Context, l *wal.Log, o Options, every time.Duration, report func(Report, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.Err() != nil {
			continue // a failed log compacts nothing; the operator restarts it
		}
		rep, err := Run(ctx, l, o)
		if report != nil && ctx.Err() == nil {
			report(rep, err)
		}
	}
}
