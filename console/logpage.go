package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// Log pages: the log newest first, read from its segment files backwards
// from a seq, one segment at a time (wal.FrameOffsets, wal.CheckFrame), never from
// its start. A filter that matches rarely could otherwise read the whole
// log for one page, so a page stops at its Budget of time and says where
// to go on (Next, Partial): every page answers in bounded time whatever
// the log's length.

// Defaults of LogQuery.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
	DefaultBudget   = 25 * time.Millisecond
)

// LogQuery selects one page.
type LogQuery struct {
	// Before: the page holds events with seq < Before (0: from the end).
	Before uint64
	Limit  int // default DefaultPageSize, at most MaxPageSize
	// Filters; empty ones match everything.
	TypePrefix string // event type starts with this ("pty.", "step.completed")
	// IDs: the event's id, stream or request id, or any string of its
	// payload or response snapshot, is one of these (a trace: an id and
	// the ids its request's response handed out).
	IDs []string
	// Step, with Mandate: only that step's events (a MANDATE/STEP trace).
	Step    string
	Req     string // request id
	Mandate string // step and mandate events of this mandate (their stream)
	Conv    string // terminal events of this conversation (their stream)
	FromTS  int64  // ms since the epoch, inclusive (0: none)
	ToTS    int64  // ms since the epoch, inclusive (0: none)
	// Budget bounds the time one page may read for (default DefaultBudget).
	Budget time.Duration
}

// LogEvent is one event of a page: the envelope, its payload as JSON and
// where it lies on disk.
type LogEvent struct {
	Rendered
	Size     int    `json:"size"`
	Segment  string `json:"segment"`
	Offset   int64  `json:"offset"`
	Checksum string `json:"checksum"` // "ok" or why the frame is damaged
}

// LogPage is a page, newest first.
type LogPage struct {
	Events []LogEvent `json:"events"`
	// Next is the Before of the next (older) page; 0 when the log's
	// retained start was reached.
	Next uint64 `json:"next"`
	// Partial: the page stopped at its time budget before filling; Next
	// goes on where it stopped.
	Partial  bool   `json:"partial"`
	Scanned  int    `json:"scanned"` // frames read
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
}

// Match reports whether ev passes q's filters.
func (q *LogQuery) Match(ev *events.Event) bool {
	var raw [][]byte
	for _, id := range q.IDs {
		raw = append(raw, []byte(id))
	}
	return q.match(ev, raw)
}

func (q *LogQuery) match(ev *events.Event, raw [][]byte) bool {
	if q.TypePrefix != "" && !strings.HasPrefix(ev.Type, q.TypePrefix) {
		return false
	}
	if q.Req != "" && ev.Req != q.Req {
		return false
	}
	if q.Mandate != "" && (ev.Stream != q.Mandate || !(strings.HasPrefix(ev.Type, "step.") || strings.HasPrefix(ev.Type, "mandate."))) {
		return false
	}
	if q.Conv != "" && (ev.Stream != q.Conv || !strings.HasPrefix(ev.Type, "pty.")) {
		return false
	}
	if q.FromTS != 0 && ev.TS < q.FromTS {
		return false
	}
	if q.ToTS != 0 && ev.TS > q.ToTS {
		return false
	}
	if q.Step != "" {
		if !bytes.Contains(ev.Data, []byte(q.Step)) {
			return false
		}
		quoted, _ := json.Marshal(q.Step)
		if !bytes.Contains(Render(ev).Data, quoted) {
			return false
		}
	}
	if len(q.IDs) > 0 {
		var data []byte
		for i, id := range q.IDs {
			if ev.ID == id || ev.Stream == id || ev.Req == id {
				return true
			}
			quoted, _ := json.Marshal(id)
			if bytes.Contains(ev.Resp, quoted) {
				return true
			}
			if !bytes.Contains(ev.Data, raw[i]) {
				continue
			}
			if data == nil {
				data = Render(ev).Data
			}
			if bytes.Contains(data, quoted) {
				return true
			}
		}
		return false
	}
	return true
}

// Rendered is an event as JSON, its payload decoded (events.Rendered).
type Rendered = events.Rendered

// Render decodes ev's payload for display (events.Render).
func Render(ev *events.Event) Rendered { return events.Render(ev) }

// entityPrefixes are the id prefixes a request's response hands out; a
// trace of the request follows them (as replay.Trace does).
var entityPrefixes = []string{"fb_", "run_", "exp_", "blk_", "lab_"}

// RelatedIDs returns the entity ids a response snapshot names, sorted.
func RelatedIDs(resp []byte) []string {
	var v any
	if json.Unmarshal(resp, &v) != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		case string:
			for _, p := range entityPrefixes {
				if strings.HasPrefix(t, p) && !seen[t] && len(out) < 64 {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
	}
	walk(v)
	slices.Sort(out)
	return out
}

// LogReader reads pages of one log directory. It keeps the segment
// buffers of finished pages for the next ones (a sync.Pool: at most what
// concurrent pages use, released by the garbage collector when idle), so a
// page does not allocate a segment's worth of memory, and the list of
// segment files (re-read when the directory changes).
type LogReader struct {
	dir  string
	bufs sync.Pool
	mu   sync.Mutex
	segs []wal.SegmentRef
	mod  time.Time   // the directory's mtime when segs was listed
	idx  []*segIndex // the frame offsets of the segments read last, newest use first (logindex.go)
}

// NewLogReader returns a reader of the log in dir.
func NewLogReader(dir string) *LogReader { return &LogReader{dir: dir} }

type segBuf struct {
	data []byte
}

// budgetEvery is how many frames a page reads between looks at its clock.
const budgetEvery = 64

// segmentOf returns the segment holding seq from the kept list, listed
// again when the directory changed or fresh is set.
func (lr *LogReader) segmentOf(seq uint64, fresh bool) (name string, first uint64, isLast, ok bool, err error) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	fi, err := os.Stat(lr.dir)
	if err != nil {
		return "", 0, false, false, err
	}
	if fresh || lr.segs == nil || !fi.ModTime().Equal(lr.mod) {
		segs, err := wal.SegmentList(lr.dir)
		if err != nil {
			return "", 0, false, false, err
		}
		lr.segs, lr.mod = segs, fi.ModTime()
	}
	i := sort.Search(len(lr.segs), func(i int) bool { return lr.segs[i].First > seq }) - 1
	if i < 0 {
		return "", 0, false, false, nil
	}
	return lr.segs[i].Name, lr.segs[i].First, i == len(lr.segs)-1, true, nil
}

// needles are byte strings an entry must hold to pass q: a filter's
// strings are stored as they are in the entry (msgpack keeps strings
// verbatim), so an entry without them is skipped without being decoded.
// all must each be there; one of any (the ids of a trace).
type needles struct {
	all [][]byte
	any [][]byte
}

func (q *LogQuery) needles() needles {
	var n needles
	for _, s := range []string{q.TypePrefix, q.Req, q.Mandate, q.Conv, q.Step} {
		if s != "" {
			n.all = append(n.all, []byte(s))
		}
	}
	for _, id := range q.IDs {
		n.any = append(n.any, []byte(id))
	}
	return n
}

func (n *needles) maybe(entry []byte) bool {
	for _, b := range n.all {
		if !bytes.Contains(entry, b) {
			return false
		}
	}
	if len(n.any) == 0 {
		return true
	}
	for _, b := range n.any {
		if bytes.Contains(entry, b) {
			return true
		}
	}
	return false
}

// scanResult is where a scan stopped.
type scanResult struct {
	next      uint64 // the Before of the next (older) read; 0 at the retained start
	partial   bool   // stopped by the budget
	scanned   int
	lastIndex *segIndex // the last segment's offsets
}

// scan visits, newest first from q.Before (or last), the frames of the
// log's retained events first..last that are damaged or whose event
// passes q, until visit returns false (next is then that frame's seq), the
// retained start is reached, or q.Budget runs out: segment by segment,
// each framed in memory and its entries checked, and decoded only when
// they may match, so a scan cut by its budget goes on exactly below the
// last frame it read.
func (lr *LogReader) scan(ctx context.Context, first, last uint64, q *LogQuery, visit func(f *wal.Frame) bool) (scanResult, error) {
	var res scanResult
	if q.Budget <= 0 {
		q.Budget = DefaultBudget
	}
	upper := last
	if q.Before != 0 && q.Before-1 < upper {
		upper = q.Before - 1
	}
	if upper < first || last == 0 {
		return res, nil
	}
	deadline := time.Now().Add(q.Budget)
	name, segFirst, isLast, ok, err := lr.segmentOf(upper, false)
	if err != nil || !ok {
		return res, err
	}
	sb, _ := lr.bufs.Get().(*segBuf)
	if sb == nil {
		sb = &segBuf{}
	}
	defer lr.bufs.Put(sb)
	raw := make([][]byte, len(q.IDs)) // the ids' bytes: a payload without them cannot name them
	for i, id := range q.IDs {
		raw[i] = []byte(id)
	}
	nd := q.needles()
	relisted := false
	for {
		f, err := os.Open(filepath.Join(lr.dir, name))
		if err != nil && !relisted && errors.Is(err, fs.ErrNotExist) {
			// Compacted away since the list was read: list again.
			relisted = true
			if name, segFirst, isLast, ok, err = lr.segmentOf(upper, true); err != nil || !ok {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, err
		}
		stop, err := lr.scanSegment(ctx, f, name, segFirst, first, upper, deadline, q, nd, raw, sb, &res, visit)
		f.Close()
		if err != nil || stop {
			return res, err
		}
		if x := res.lastIndex; isLast && upper > x.last() && x.tail == "" && !relisted {
			// A newer segment may exist that the kept list lacks.
			relisted = true
			if n, nf, l, ok, err := lr.segmentOf(upper, true); err == nil && ok && n != name {
				name, segFirst, isLast = n, nf, l
				continue
			}
		}
		if max(segFirst, first) <= first {
			res.next = 0 // the retained start: no older page
			return res, nil
		}
		res.next = segFirst
		if time.Now().After(deadline) || ctx.Err() != nil {
			res.partial = true
			return res, nil
		}
		upper = segFirst - 1
		relisted = false
		if name, segFirst, isLast, ok, err = lr.segmentOf(upper, false); err != nil || !ok {
			return res, err
		}
	}
}

// scanSegment is scan's look at one segment, open as f: its frames from
// upper down, read readWindow bytes at a time by their kept offsets.
// stop: the scan ends here (res says where).
func (lr *LogReader) scanSegment(ctx context.Context, f *os.File, name string, segFirst, first, upper uint64, deadline time.Time,
	q *LogQuery, nd needles, raw [][]byte, sb *segBuf, res *scanResult, visit func(f *wal.Frame) bool) (bool, error) {
	// A page frames the first segment it reads whole (so it always shows
	// something); a later one only within its budget.
	frameBy := time.Time{}
	if res.scanned > 0 {
		frameBy = deadline
	}
	x, buf, err := lr.index(f, name, segFirst, sb.data, frameBy)
	sb.data = buf
	if err != nil {
		return true, err
	}
	res.lastIndex = x
	if x.cut && upper > x.last() {
		// The page's time ran out while a later segment was being
		// framed (what was framed is kept): the next page goes on here,
		// and frames on from where this one stopped.
		res.partial, res.next = true, upper+1
		return true, nil
	}
	lo := max(segFirst, first)
	top := min(upper, x.last())
	if x.tail != "" && upper > x.last() {
		// Framing stopped at damage before upper: show where.
		fr := wal.Frame{Seq: x.last() + 1, Segment: name, Offset: x.end, Bad: x.tail}
		if !visit(&fr) {
			res.next = fr.Seq
			return true, nil
		}
	}
	for hi := top; hi >= lo && hi > 0; {
		// The frames [a, hi], at most readWindow bytes (at least one).
		endOff := x.frameEnd(hi)
		a := hi
		for a > lo && endOff-x.offs[a-1-segFirst] <= readWindow {
			a--
		}
		base := x.offs[a-segFirst]
		n := int(endOff - base)
		if cap(sb.data) < n {
			sb.data = make([]byte, n)
		}
		b := sb.data[:n]
		if got, err := f.ReadAt(b, base); err != nil && !(err == io.EOF && got == n) {
			return true, err
		}
		for seq := hi; seq >= a; seq-- {
			res.scanned++
			if res.scanned%budgetEvery == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
				res.partial, res.next = true, seq+1
				return true, nil
			}
			off := x.offs[seq-segFirst]
			fr, entry := wal.CheckFrame(b[off-base:x.frameEnd(seq)-base], seq, name, off)
			if fr.Bad == "" {
				if !nd.maybe(entry) {
					continue
				}
				wal.DecodeFrame(&fr, entry)
			}
			if fr.Event != nil && !q.match(fr.Event, raw) {
				continue
			}
			if !visit(&fr) {
				if seq > first {
					res.next = seq
				}
				return true, nil
			}
		}
		hi = a - 1
	}
	return false, nil
}

// Page reads one page of the log, whose retained events are first..last
// (scan).
func (lr *LogReader) Page(ctx context.Context, first, last uint64, q LogQuery) (LogPage, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Limit = min(q.Limit, MaxPageSize)
	page := LogPage{Events: []LogEvent{}, FirstSeq: first, LastSeq: last}
	res, err := lr.scan(ctx, first, last, &q, func(f *wal.Frame) bool {
		if f.Event == nil {
			page.Events = append(page.Events, LogEvent{Rendered: Rendered{EnvelopeJSON: events.EnvelopeJSON{Seq: f.Seq}}, Size: f.Size, Segment: f.Segment, Offset: f.Offset, Checksum: f.Bad})
		} else {
			page.Events = append(page.Events, LogEvent{Rendered: Render(f.Event), Size: f.Size, Segment: f.Segment, Offset: f.Offset, Checksum: "ok"})
		}
		return len(page.Events) < q.Limit
	})
	page.Next, page.Partial, page.Scanned = res.next, res.partial, res.scanned
	return page, err
}

// Events calls keep with each event passing q, newest first from
// q.Before (or last), until keep returns false, the retained start, or
// q.Budget; damaged frames are skipped. It returns the Before to go on
// from (0: the retained start was reached) and whether the budget cut it.
func (lr *LogReader) Events(ctx context.Context, first, last uint64, q LogQuery, keep func(ev *events.Event) bool) (next uint64, partial bool, err error) {
	res, err := lr.scan(ctx, first, last, &q, func(f *wal.Frame) bool {
		return f.Event == nil || keep(f.Event)
	})
	return res.next, res.partial, err
}
