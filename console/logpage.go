package console

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// Log pages: the log newest first, read from its segment files backwards
// from a seq, one segment at a time (wal.ReadSegmentFrames), never from
// its start. A filter that matches rarely could otherwise read the whole
// log for one page, so a page stops at its Budget of time and says where
// to go on (Next, Partial): every page answers in bounded time whatever
// the log's length.

// Defaults of LogQuery.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
	DefaultBudget   = 40 * time.Millisecond
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
// page does not allocate a segment's worth of memory.
type LogReader struct {
	dir  string
	bufs sync.Pool
}

// NewLogReader returns a reader of the log in dir.
func NewLogReader(dir string) *LogReader { return &LogReader{dir: dir} }

type segBuf struct {
	data []byte
	offs []int
}

// budgetEvery is how many frames a page reads between looks at its clock.
const budgetEvery = 128

// Page reads one page of the log, whose retained events are first..last:
// segment by segment from the newest, each framed in memory and its
// entries checked and decoded newest first, so a page cut by its budget
// goes on exactly below the last frame it read.
func (lr *LogReader) Page(ctx context.Context, first, last uint64, q LogQuery) (LogPage, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Limit = min(q.Limit, MaxPageSize)
	if q.Budget <= 0 {
		q.Budget = DefaultBudget
	}
	page := LogPage{Events: []LogEvent{}, FirstSeq: first, LastSeq: last}
	upper := last
	if q.Before != 0 && q.Before-1 < upper {
		upper = q.Before - 1
	}
	if upper < first || last == 0 {
		return page, nil
	}
	deadline := time.Now().Add(q.Budget)
	name, segFirst, ok, err := wal.SegmentOf(lr.dir, upper)
	if err != nil || !ok {
		return page, err
	}
	sb, _ := lr.bufs.Get().(*segBuf)
	if sb == nil {
		sb = &segBuf{}
	}
	defer lr.bufs.Put(sb)
	var raw [][]byte // the ids' bytes: a payload without them cannot name them
	for _, id := range q.IDs {
		raw = append(raw, []byte(id))
	}
	for {
		sf, err := wal.LoadSegment(lr.dir, name, segFirst, sb.data, sb.offs)
		if err != nil {
			return page, err
		}
		sb.data, sb.offs = sf.Buffer()
		lo := max(segFirst, first)
		top := min(upper, sf.Last())
		if sf.Tail() != "" && upper > sf.Last() {
			// Framing stopped at damage before upper: show where.
			page.Events = append(page.Events, LogEvent{Rendered: Rendered{Seq: sf.Last() + 1}, Segment: name, Checksum: sf.Tail()})
		}
		for seq := top; seq >= lo && seq > 0; seq-- {
			page.Scanned++
			if page.Scanned%budgetEvery == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
				page.Partial, page.Next = true, seq+1
				return page, nil
			}
			f := sf.Frame(seq)
			switch {
			case f.Event == nil:
				page.Events = append(page.Events, LogEvent{Rendered: Rendered{Seq: f.Seq}, Size: f.Size, Segment: f.Segment, Offset: f.Offset, Checksum: f.Bad})
			case q.match(f.Event, raw):
				page.Events = append(page.Events, LogEvent{Rendered: Render(f.Event), Size: f.Size, Segment: f.Segment, Offset: f.Offset, Checksum: "ok"})
			default:
				continue
			}
			if len(page.Events) >= q.Limit {
				if seq > first {
					page.Next = seq
				}
				return page, nil
			}
		}
		if lo <= first {
			page.Next = 0 // the retained start: no older page
			return page, nil
		}
		page.Next = segFirst
		if time.Now().After(deadline) || ctx.Err() != nil {
			page.Partial = true
			return page, nil
		}
		upper = segFirst - 1
		if name, segFirst, ok, err = wal.SegmentOf(lr.dir, upper); err != nil || !ok {
			return page, err
		}
	}
}
