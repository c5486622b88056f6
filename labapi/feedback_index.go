package labapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

// feedbackIndex answers "how many feedback entries name this run, and
// which are its latest" without reading feedback.jsonl for every look: a
// cache over the projection, built by one scan the first time it is
// asked, then brought up to date by reading only the bytes appended since
// (the store is append-only; a file that shrank or was replaced, as a
// rebuild does, is scanned again). It is no read model of the log: it
// holds no state the file does not, so it needs no snapshot. Memory is one
// counter and at most recentPerRun offsets per run named.
type feedbackIndex struct {
	path string

	mu    sync.Mutex
	fi    fs.FileInfo // the file scanned, to tell a replaced one
	off   int64       // bytes indexed: always just after a '\n'
	byRun map[string]*runFeedback
}

// recentPerRun is how many of a run's latest entries the index locates.
const recentPerRun = 20

type runFeedback struct {
	count  int
	recent []int64 // offsets of the latest entries' lines, oldest first
}

func newFeedbackIndex(path string) *feedbackIndex {
	return &feedbackIndex{path: path, byRun: map[string]*runFeedback{}}
}

// refresh indexes what was appended since the last call. Call with mu held.
func (x *feedbackIndex) refresh() error {
	f, err := os.Open(x.path)
	if errors.Is(err, fs.ErrNotExist) {
		x.fi, x.off, x.byRun = nil, 0, map[string]*runFeedback{}
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if x.fi == nil || !os.SameFile(x.fi, fi) || fi.Size() < x.off {
		x.off, x.byRun = 0, map[string]*runFeedback{}
	}
	x.fi = fi
	if fi.Size() == x.off {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, x.off, fi.Size()-x.off), 64<<10)
	var e struct {
		RunID string `json:"runId"`
	}
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line over 64 KiB: read the rest of it the slow way.
			rest, err2 := br.ReadBytes('\n')
			line, err = append(append([]byte{}, line...), rest...), err2
		}
		if err != nil {
			return nil // no complete line left: a writer is mid-line
		}
		start := x.off
		x.off += int64(len(line))
		id, ok := topRunID(line)
		if !ok {
			e.RunID = ""
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			id = e.RunID
		}
		if id == "" {
			continue
		}
		rf := x.byRun[id]
		if rf == nil {
			rf = &runFeedback{}
			x.byRun[id] = rf
		}
		rf.count++
		if len(rf.recent) == recentPerRun {
			copy(rf.recent, rf.recent[1:])
			rf.recent = rf.recent[:recentPerRun-1]
		}
		rf.recent = append(rf.recent, start)
	}
}

// topRunID reads the top-level runId of an entry line without decoding
// the line, in the common shape (the projector writes runId before any
// nested object): "runId" found before any '{' or '[' past the first
// byte, followed by a plain string. ok false: decode the line instead.
func topRunID(line []byte) (string, bool) {
	i := bytes.Index(line, []byte(`"runId"`))
	if i < 0 {
		return "", true // no runId anywhere in the line
	}
	if bytes.ContainsAny(line[1:i], "{[") {
		return "", false
	}
	rest := bytes.TrimLeft(line[i+len(`"runId"`):], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return "", false
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	if len(rest) == 0 || rest[0] != '"' {
		return "", false
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 || bytes.IndexByte(rest[1:1+end], '\\') >= 0 {
		return "", false
	}
	return string(rest[1 : 1+end]), true
}

// counts is every run's entry count.
func (x *feedbackIndex) counts() (map[string]int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(x.byRun))
	for id, rf := range x.byRun {
		out[id] = rf.count
	}
	return out, nil
}

// countsOf is the entry count of each of ids.
func (x *feedbackIndex) countsOf(ids []string) (map[string]int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		if rf := x.byRun[id]; rf != nil {
			out[id] = rf.count
		}
	}
	return out, nil
}

// latest is up to limit of the run's latest entries, newest first, and
// how many there are in all.
func (x *feedbackIndex) latest(runID string, limit int) ([]json.RawMessage, int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(); err != nil {
		return nil, 0, err
	}
	items := []json.RawMessage{}
	rf := x.byRun[runID]
	if rf == nil {
		return items, 0, nil
	}
	f, err := os.Open(x.path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	for i := len(rf.recent) - 1; i >= 0 && len(items) < limit; i-- {
		line, err := readLineAt(f, rf.recent[i])
		if err != nil {
			return nil, 0, err
		}
		if json.Valid(line) {
			items = append(items, line)
		}
	}
	return items, rf.count, nil
}

// readLineAt reads the line starting at off (without its '\n').
func readLineAt(f *os.File, off int64) ([]byte, error) {
	br := bufio.NewReader(io.NewSectionReader(f, off, 1<<62))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

// handleRunFeedback (an extension): GET /api/runs/{runId}/feedback?limit=
// is the run's latest feedback entries, newest first (at most 20), with
// total, the number of entries naming the run.
func (s *Server) handleRunFeedback(w http.ResponseWriter, r *http.Request) error {
	run, err := s.lookupRun(r)
	if err != nil {
		return err
	}
	limit := recentPerRun
	if v := strings.TrimSpace(r.URL.Query().Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return NewError(CodeInvalidArgument, "limit must be a whole number from 1 to 20", "Send limit=20 or less.").With("field", "limit")
		}
		limit = min(n, recentPerRun)
	}
	items, total, err := s.fbIndex.latest(run.RunID, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "total": total})
	return nil
}
