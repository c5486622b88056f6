package labapi

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// The list routes read from the Lab store (labstore.go): GET /api/runs
// and GET /api/experiments without paging parameters stream every record,
// a chunk of the store at a time, in the bytes content-machine writes
// ({"items":[…],"nextCursor":null}, each item as json.Marshal writes its
// map); a page (paging.go) is found by seeking the store's index (newest
// and oldest without a filter) or by one pass that keeps only the page
// (a bounded heap), never the whole list.

// runListItem is a run as GET /api/runs lists it.
func runListItem(run *events.LabRun) map[string]any {
	return map[string]any{
		"runId": run.RunID, "sessionId": run.SessionID, "createdAt": run.CreatedAt,
		"topic": nullable(run.Topic), "artifactsDir": run.ArtifactsDir, "videoPath": nullable(run.VideoPath),
		"autoMetricsSummary": summaryOrNulls(run.AutoMetricsSummary),
	}
}

// experimentListItem is an experiment as GET /api/experiments lists it.
func experimentListItem(e *events.LabExperiment) map[string]any {
	return map[string]any{"experimentId": e.ExperimentID, "sessionId": e.SessionID,
		"createdAt": e.CreatedAt, "name": e.Name, "topic": nullable(e.Topic), "status": e.Status}
}

// streamList writes {"items":[…],"nextCursor":null} and a newline to w,
// the items from each (which calls its argument per record, newest
// first). start is called before the first byte is written; an error
// before then is returned (the route answers it), one after it ends the
// answer short (errAfterStart).
func streamList[T any](w io.Writer, each func(fn func(k []byte, rec *T) bool) error, item func(*T) map[string]any, start func()) error {
	var bw *bufio.Writer
	n := 0
	var werr error
	begin := func() {
		start()
		bw = bufio.NewWriterSize(w, 32<<10)
		bw.WriteString(`{"items":[`)
	}
	err := each(func(_ []byte, rec *T) bool {
		b, err := json.Marshal(item(rec))
		if err != nil {
			werr = err
			return false
		}
		if bw == nil {
			begin()
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		n++
		if _, werr = bw.Write(b); werr != nil {
			return false
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		if bw == nil {
			return err
		}
		return errAfterStart{err}
	}
	if bw == nil {
		begin()
	}
	bw.WriteString(`],"nextCursor":null}` + "\n")
	if err := bw.Flush(); err != nil {
		return errAfterStart{err}
	}
	return nil
}

// errAfterStart: a list failed after its first bytes were sent.
type errAfterStart struct{ error }

func (e errAfterStart) Unwrap() error { return e.error }

// serveList answers a streamed list on w.
func serveList[T any](s *Server, w http.ResponseWriter, each func(fn func(k []byte, rec *T) bool) error, item func(*T) map[string]any) error {
	err := streamList(w, each, item, func() {
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	})
	if ea, ok := err.(errAfterStart); ok {
		// The status line is sent: end the answer short rather than let
		// it read as a whole list.
		s.log.Warn("list answer cut short", "error", ea.Error())
		panic(http.ErrAbortHandler)
	}
	return labStoreError(err)
}

func (st *labStore) eachRun(desc bool) func(fn func(k []byte, rec *events.LabRun) bool) error {
	return func(fn func(k []byte, rec *events.LabRun) bool) error {
		return eachRecord(st, lsRunIdx, desc, nil, fn)
	}
}

func (st *labStore) eachExperiment(desc bool) func(fn func(k []byte, rec *events.LabExperiment) bool) error {
	return func(fn func(k []byte, rec *events.LabExperiment) bool) error {
		return eachRecord(st, lsExpIdx, desc, nil, fn)
	}
}

// writeRunsList writes GET /api/runs's whole answer (no paging) to w.
func writeRunsList(w io.Writer, st *labStore) error {
	return streamList(w, st.eachRun(true), runListItem, func() {})
}

// pageEntry is a record kept for a page, with its index key (its place
// in the newest-first order, the tie-break of every sort).
type pageEntry[T any] struct {
	key []byte
	rec T
}

// pageHeap keeps the smallest entries by less: a max-heap of at most cap.
type pageHeap[T any] struct {
	less func(a, b *pageEntry[T]) bool
	es   []*pageEntry[T]
}

func (h *pageHeap[T]) Len() int           { return len(h.es) }
func (h *pageHeap[T]) Less(i, j int) bool { return h.less(h.es[j], h.es[i]) }
func (h *pageHeap[T]) Swap(i, j int)      { h.es[i], h.es[j] = h.es[j], h.es[i] }
func (h *pageHeap[T]) Push(x any)         { h.es = append(h.es, x.(*pageEntry[T])) }
func (h *pageHeap[T]) Pop() any {
	e := h.es[len(h.es)-1]
	h.es = h.es[:len(h.es)-1]
	return e
}

// selectPage is one pass over every record of idx: the records keep
// passes, how many (total), and, in the order less, the limit+1 first
// after the cursor entry (nil: from the start).
func selectPage[T any](st *labStore, idx []byte, keep func(*T) bool, less func(a, b *pageEntry[T]) bool, cursor *pageEntry[T], limit int) ([]*pageEntry[T], int, error) {
	h := &pageHeap[T]{less: less}
	total := 0
	err := eachRecord(st, idx, true, nil, func(k []byte, rec *T) bool {
		if !keep(rec) {
			return true
		}
		total++
		e := &pageEntry[T]{key: k, rec: *rec}
		if cursor != nil && !less(cursor, e) {
			return true
		}
		if h.Len() <= limit {
			heap.Push(h, e)
		} else if less(e, h.es[0]) {
			h.es[0] = e
			heap.Fix(h, 0)
		}
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]*pageEntry[T], h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(*pageEntry[T])
	}
	return out, total, nil
}

// seekPage is the limit+1 first records of idx after the key from (nil:
// from the start) in key order (desc: newest first).
func seekPage[T any](st *labStore, idx []byte, desc bool, from []byte, limit int) ([]*pageEntry[T], error) {
	var out []*pageEntry[T]
	err := eachRecord(st, idx, desc, from, func(k []byte, rec *T) bool {
		out = append(out, &pageEntry[T]{key: k, rec: *rec})
		return len(out) <= limit
	})
	return out, err
}

// newestFirst orders entries as the lists do: newest first.
func newestFirst[T any](a, b *pageEntry[T]) bool { return string(a.key) > string(b.key) }

func cursorError(after string) error {
	return NewError(CodeInvalidCursor, "Cursor "+strconv.Quote(truncate(after, 140))+" names no item of this list", "Use the nextCursor of the previous page, or drop after= to start over.").With("after", truncate(after, 140))
}

// matchesQuery reports whether q (lower case) is empty or a substring of
// one of fields, case-folded: the q= filter of every paged list.
func matchesQuery(q string, fields ...string) bool {
	if q == "" {
		return true
	}
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}

// pageOrder is the order of a sort every paged list has: oldest, newest
// (the default), and the sort named byText, by the text of one field
// case-folded, newest first among equals.
func pageOrder[T any](sort, byText string, text func(*T) string) func(a, b *pageEntry[T]) bool {
	switch sort {
	case "oldest":
		return func(a, b *pageEntry[T]) bool { return string(a.key) < string(b.key) }
	case byText:
		return func(a, b *pageEntry[T]) bool {
			ta, tb := strings.ToLower(text(&a.rec)), strings.ToLower(text(&b.rec))
			if ta != tb {
				return ta < tb
			}
			return newestFirst(a, b)
		}
	}
	return newestFirst[T]
}

// runsPageFilter is the filter of a runs page (q, unrated).
func runsPageFilter(lq listQuery, counts map[string]int) func(r *events.LabRun) bool {
	return func(r *events.LabRun) bool {
		return matchesQuery(lq.q, r.Topic, r.RunID, r.ArtifactsDir) && (!lq.unrated || counts[r.RunID] == 0)
	}
}

// runsPageOrder is the order of a runs page's sort: by topic or by a
// metric (runs without it last), else as every list.
func runsPageOrder(sort string) func(a, b *pageEntry[events.LabRun]) bool {
	switch sort {
	case "sync", "caption", "score":
		return func(a, b *pageEntry[events.LabRun]) bool {
			x, okA := metricOf(a.rec, sort)
			y, okB := metricOf(b.rec, sort)
			if okA != okB {
				return okA
			}
			if okA && x != y {
				return x > y
			}
			return newestFirst(a, b)
		}
	}
	return pageOrder(sort, "topic", func(r *events.LabRun) string { return r.Topic })
}

// experimentsPageFilter and experimentsPageOrder: as runs', by name.
func experimentsPageFilter(lq listQuery) func(e *events.LabExperiment) bool {
	return func(e *events.LabExperiment) bool {
		return matchesQuery(lq.q, e.Name, e.ExperimentID, e.Topic)
	}
}

func experimentsPageOrder(sort string) func(a, b *pageEntry[events.LabExperiment]) bool {
	return pageOrder(sort, "name", func(e *events.LabExperiment) string { return e.Name })
}

// findPage is a page of idx for lq: the entries (up to limit+1: one more
// means a next page) and the total the filter keeps. get reads the
// cursor's record; ids is idx's id bucket.
func findPage[T any](st *labStore, ids, idx []byte, lq listQuery, simple bool, total func() (int, error),
	get func(id string) (T, bool, error), keep func(*T) bool, less func(a, b *pageEntry[T]) bool) ([]*pageEntry[T], int, error) {
	var cursor *pageEntry[T]
	if lq.after != "" {
		k, err := st.indexKey(ids, lq.after)
		if err != nil {
			return nil, 0, err
		}
		if k == nil {
			return nil, 0, cursorError(lq.after)
		}
		rec, ok, err := get(lq.after)
		if err != nil {
			return nil, 0, err
		}
		if !ok || !keep(&rec) {
			return nil, 0, cursorError(lq.after)
		}
		cursor = &pageEntry[T]{key: k, rec: rec}
	}
	if simple {
		var from []byte
		if cursor != nil {
			from = cursor.key
		}
		page, err := seekPage[T](st, idx, lq.sort != "oldest", from, lq.limit)
		if err != nil {
			return nil, 0, err
		}
		n, err := total()
		return page, n, err
	}
	return selectPage(st, idx, keep, less, cursor, lq.limit)
}
