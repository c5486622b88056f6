package labapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/replay"
)

// Time travel (issue 30 §6): the home as it was at a seq or a time, built
// by replay.To — the machinery of `cmlab replay --to` — into a private
// directory of the daemon's, read-only from then on; two such points
// compared; and replay.Check's drift verdict for the live views.
//
//	POST /api/console/travel {seq?, at?}        → {id, lastSeq, lastTs, events, files:[{path, bytes, lines}]}
//	GET  /api/console/travel/{id}/file?path=&offset=&limit=   lines of one view file of that point
//	GET  /api/console/travel/compare?a=&b=      events between the points and the view lines each side alone has
//	POST /api/console/check                     replay --check's report
//
// At most travelKeep points are kept (on disk, the oldest removed first),
// one is built at a time, and all are removed when the server closes: the
// daemon's memory and disk do not grow with the pages served.

const (
	travelKeep      = 3
	travelLineLimit = 200
)

type travelPoint struct {
	ID     string       `json:"id"`
	UpTo   uint64       `json:"lastSeq"`
	LastTS int64        `json:"lastTs"`
	Events int          `json:"events"`
	Files  []travelFile `json:"files"`
	home   home.Home    // the replayed home
	dir    string       // its private parent directory
	built  time.Time
}

type travelFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Lines int    `json:"lines"`
}

type consoleTravel struct {
	build  sync.Mutex // one replay at a time
	mu     sync.Mutex
	points []*travelPoint
	check  sync.Mutex
}

func (s *Server) registerConsoleTravelRoutes() {
	s.route("POST /api/console/travel", authAlwaysRead, s.consoleTravelBuild)
	s.route("GET /api/console/travel/compare", authAlways, s.consoleTravelCompare)
	s.route("GET /api/console/travel/{id}/file", authAlways, s.consoleTravelFile)
	s.route("POST /api/console/check", authAlwaysRead, s.consoleCheck)
}

// closeTravel removes every point (Server.Close).
func (s *Server) closeTravel() {
	t := &s.console.travel
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.points {
		os.RemoveAll(p.dir)
	}
	t.points = nil
}

func (s *Server) consoleTravelBuild(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in struct {
		Seq uint64 `json:"seq"`
		At  string `json:"at"`
	}
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	opts := replay.ToOptions{Src: s.opts.Engine.Home(), UpTo: in.Seq}
	if in.At != "" {
		ts, err := parseTime(strings.TrimSpace(in.At))
		if err != nil {
			return NewError(CodeInvalidArgument, "at: "+err.Error(), "Give a time as RFC 3339 or ms since the epoch.").With("field", "at")
		}
		opts.Until = time.UnixMilli(ts)
	}
	if in.Seq == 0 && in.At == "" {
		return NewError(CodeInvalidArgument, "give seq or at: the point to travel to", "Send {\"seq\": N} or {\"at\": \"2026-11-28T14:02:00Z\"}.")
	}
	t := &s.console.travel
	t.build.Lock()
	defer t.build.Unlock()
	dir, err := os.MkdirTemp("", "cmlab-travel-")
	if err != nil {
		return err
	}
	p := &travelPoint{ID: newSecret()[:16], dir: dir, home: home.Home{Dir: filepath.Join(dir, "home")}, built: time.Now()}
	opts.Into = p.home
	res, err := replay.To(r.Context(), opts)
	if err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, replay.ErrNothing) {
			return NewError(CodeInvalidArgument, err.Error(), "Pick a seq or a time inside the log (the overview shows its first and last seq).")
		}
		return NewError(CodeInvalidArgument, "replay: "+err.Error(), "Pick a seq or a time inside the retained log.")
	}
	p.UpTo, p.LastTS, p.Events = res.Last, res.LastTS, res.Events
	if p.Files, err = travelFiles(p.home); err != nil {
		os.RemoveAll(dir)
		return err
	}
	t.mu.Lock()
	t.points = append(t.points, p)
	for len(t.points) > travelKeep {
		os.RemoveAll(t.points[0].dir)
		t.points = t.points[1:]
	}
	t.mu.Unlock()
	writeJSON(w, http.StatusOK, p)
	return nil
}

func travelFiles(h home.Home) ([]travelFile, error) {
	views, err := projections.ViewFiles(h)
	if err != nil {
		return nil, err
	}
	out := []travelFile{}
	for _, v := range views {
		fp := filepath.Join(h.Dir, filepath.FromSlash(v))
		fi, err := os.Stat(fp)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		n := 0
		if f, err := os.Open(fp); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				n++
			}
			f.Close()
		}
		out = append(out, travelFile{Path: v, Bytes: fi.Size(), Lines: n})
	}
	return out, nil
}

func (s *Server) travelPoint(id string) (*travelPoint, error) {
	t := &s.console.travel
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.points {
		if p.ID == id {
			return p, nil
		}
	}
	return nil, NewError(CodeNotFound, "no time-travel point "+truncate(id, 40), fmt.Sprintf("Build one with POST /api/console/travel; the last %d are kept.", travelKeep))
}

// readLines returns lines [offset, offset+limit) of the view file rel of
// h, and how many it has, reading through confine (no symlink, no escape).
func readLines(h home.Home, rel string, offset, limit int) ([]string, int, error) {
	f, err := confine.Open(h.Dir, filepath.FromSlash(rel))
	if err != nil {
		return nil, 0, NewError(CodeFileNotFound, "no view file "+truncate(rel, 100)+" at this point", "Pick a path from the point's files.")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []string
	n := 0
	for sc.Scan() {
		if n >= offset && len(out) < limit {
			out = append(out, sc.Text())
		}
		n++
	}
	return out, n, sc.Err()
}

func (s *Server) consoleTravelFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.travelPoint(r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rel := q.Get("path")
	if !slices.ContainsFunc(p.Files, func(f travelFile) bool { return f.Path == rel }) {
		return NewError(CodeFileNotFound, "no view file "+truncate(rel, 100)+" at this point", "Pick a path from the point's files.")
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > travelLineLimit {
		limit = travelLineLimit
	}
	lines, total, err := readLines(p.home, rel, max(0, offset), limit)
	if err != nil {
		return err
	}
	if lines == nil {
		lines = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": rel, "offset": offset, "lines": lines, "total": total, "lastSeq": p.UpTo})
	return nil
}

type travelDiff struct {
	Path    string   `json:"path"`
	OnlyA   []string `json:"onlyA"` // lines the earlier point has and the later not (at most travelLineLimit)
	OnlyB   []string `json:"onlyB"`
	CountA  int      `json:"countA"`
	CountB  int      `json:"countB"`
	Changed bool     `json:"changed"`
}

// consoleTravelCompare lists, per view file, the lines each point alone
// has (as multisets: a view line rewritten in place shows on both sides),
// and the seq range of the events between the points (the log page shows
// them: before=later+1, down to earlier+1).
func (s *Server) consoleTravelCompare(w http.ResponseWriter, r *http.Request) error {
	a, err := s.travelPoint(r.URL.Query().Get("a"))
	if err != nil {
		return err
	}
	b, err := s.travelPoint(r.URL.Query().Get("b"))
	if err != nil {
		return err
	}
	if a.UpTo > b.UpTo {
		a, b = b, a
	}
	paths := map[string]bool{}
	for _, f := range a.Files {
		paths[f.Path] = true
	}
	for _, f := range b.Files {
		paths[f.Path] = true
	}
	var diffs []travelDiff
	for _, rel := range slices.Sorted(maps.Keys(paths)) {
		la, _, _ := readLines(a.home, rel, 0, 1<<20)
		lb, _, _ := readLines(b.home, rel, 0, 1<<20)
		d := travelDiff{Path: rel, OnlyA: []string{}, OnlyB: []string{}}
		count := map[string]int{}
		for _, l := range la {
			count[l]++
		}
		for _, l := range lb {
			if count[l] > 0 {
				count[l]--
				continue
			}
			d.CountB++
			if len(d.OnlyB) < travelLineLimit {
				d.OnlyB = append(d.OnlyB, l)
			}
		}
		for _, l := range la {
			if count[l] > 0 {
				count[l]--
				d.CountA++
				if len(d.OnlyA) < travelLineLimit {
					d.OnlyA = append(d.OnlyA, l)
				}
			}
		}
		if d.CountA+d.CountB > 0 {
			d.Changed = true
			diffs = append(diffs, d)
		}
	}
	if diffs == nil {
		diffs = []travelDiff{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"a": a.UpTo, "b": b.UpTo, "eventsBetween": b.UpTo - a.UpTo, "files": diffs})
	return nil
}

// consoleCheck runs replay.Check on the live home: the views re-projected
// from the log into a shadow home and compared (one check at a time).
func (s *Server) consoleCheck(w http.ResponseWriter, r *http.Request) error {
	t := &s.console.travel
	if !t.check.TryLock() {
		return NewError(CodeBusy, "a check is already running", "Wait for it to finish, then check again.")
	}
	defer t.check.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	rep, err := replay.Check(ctx, replay.CheckOptions{Home: s.opts.Engine.Home()})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
