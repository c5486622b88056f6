package torture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// maxReplays caps how many acknowledged request ids are sent again per check.
const maxReplays = 25

// maxCursorChecks caps how many old cursors are re-polled per check.
const maxCursorChecks = 40

// checkAfterRestart runs every invariant against the restarted, idle daemon.
func (h *harness) checkAfterRestart(ctx context.Context, round int) (resent, replayed int) {
	c := newClient(h.d)
	if status, _, err := c.health(ctx); err != nil || status != "ok" {
		h.l.violate("round %d: health after restart: %q %v", round, status, err)
	}
	var steps []string
	t := time.Now()
	lap := func(name string) {
		steps = append(steps, fmt.Sprintf("%s %v", name, time.Since(t).Round(time.Millisecond)))
		t = time.Now()
	}
	resent = h.resendUnknown(ctx, c, round)
	lap("resend")
	replayed = h.replayAcked(ctx, c, round)
	lap("replay")
	h.checkViews(round)
	lap("views")
	h.checkCursors(ctx, c, round)
	lap("cursors")
	h.checkRebuild(ctx, round, true)
	lap("rebuild")
	h.checkStepsClassified(ctx, c, round)
	lap("steps")
	h.checkStreamReplay(ctx, c, round)
	lap("stream")
	fmt.Fprintf(h.opts.Out, "round %d: checks: %s\n", round, strings.Join(steps, ", "))
	return resent, replayed
}

// reqIDs returns, sorted, the request ids sent whose answer was (acked) or
// was not (!acked) received.
func (l *ledger) reqIDs(acked bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, rec := range l.reqs {
		if rec.acked == acked {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// resendUnknown sends again every request id whose answer the kill
// swallowed: it must now be answered 200, and act at most once in total.
func (h *harness) resendUnknown(ctx context.Context, c *client, round int) int {
	ids := h.l.reqIDs(false)
	for _, id := range ids {
		h.l.mu.Lock()
		rec := h.l.reqs[id]
		h.l.mu.Unlock()
		r := c.do(ctx, "POST", rec.path, id, rec.body)
		if !r.ok() {
			h.l.violate("round %d: resending %s %s after restart → %s", round, rec.kind, id, r)
			continue
		}
		w := &worker{round: round, l: h.l}
		switch rec.kind {
		case "feedback":
			w.settleFeedback(r, id, rec.marker)
			h.l.mu.Lock()
			delete(h.l.fbMaybe, rec.marker) // acknowledged now: exactly once
			h.l.mu.Unlock()
		case "submit":
			w.settleSubmit(r, id, rec.exp)
		case "import":
			var resp struct {
				RunID string `json:"runId"`
			}
			if json.Unmarshal(r.body, &resp) == nil && resp.RunID != "" {
				h.l.mu.Lock()
				h.l.runs[resp.RunID] = rec.dir
				if _, ok := h.l.dirRun[rec.dir]; !ok {
					h.l.dirRun[rec.dir] = resp.RunID
				}
				rec.acked, rec.resp = true, r.body
				h.l.mu.Unlock()
			}
		}
	}
	return len(ids)
}

// replayAcked sends acknowledged request ids again: same answer, marked as
// a replay, and nothing appended.
func (h *harness) replayAcked(ctx context.Context, c *client, round int) int {
	ids := h.l.reqIDs(true)
	if len(ids) > maxReplays {
		h.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:maxReplays]
	}
	_, before, err := c.health(ctx)
	if err != nil {
		h.l.violate("round %d: health: %v", round, err)
		return 0
	}
	for _, id := range ids {
		h.l.mu.Lock()
		rec := h.l.reqs[id]
		h.l.mu.Unlock()
		r := c.do(ctx, "POST", rec.path, id, rec.body)
		if !r.ok() || !sameJSON(r.body, rec.resp) {
			h.l.violate("round %d: replay of acknowledged %s %s → %s, first answer %s", round, rec.kind, id, r, bytes.TrimSpace(rec.resp))
		} else if !r.replay {
			h.l.violate("round %d: replay of %s %s not marked X-CM-LAB-IDEMPOTENT-REPLAY", round, rec.kind, id)
		}
	}
	if _, after, err := c.health(ctx); err == nil && after != before {
		h.l.violate("round %d: replaying %d acknowledged request ids appended %d events", round, len(ids), after-before)
	}
	return len(ids)
}

type jsonlLine struct {
	raw []byte
	m   map[string]any
}

// readJSONL reads a view; a last line without '\n' is reported.
func (h *harness) readJSONL(round int, rel string) []jsonlLine {
	b, err := os.ReadFile(filepath.Join(h.home, rel))
	if err != nil {
		if !os.IsNotExist(err) {
			h.l.violate("round %d: read %s: %v", round, rel, err)
		}
		return nil
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		h.l.violate("round %d: %s ends in a partial line (%d bytes after the last newline)", round, rel, len(b)-bytes.LastIndexByte(b, '\n')-1)
	}
	var out []jsonlLine
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			h.l.violate("round %d: %s holds a line that is not JSON: %.120q", round, rel, line)
			continue
		}
		out = append(out, jsonlLine{raw: line, m: m})
	}
	return out
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// checkViews checks exactly-once presence of every acknowledged write.
func (h *harness) checkViews(round int) {
	fb := h.readJSONL(round, "feedback/feedback.jsonl")
	runs := h.readJSONL(round, "lab/runs.jsonl")
	exps := h.readJSONL(round, "lab/experiments.jsonl")

	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	v := func(format string, args ...any) {
		h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: ", round)+fmt.Sprintf(format, args...))
	}
	byID, byMarker := map[string]int{}, map[string]int{}
	notesOf := map[string]string{}
	for _, ln := range fb {
		id, notes := str(ln.m, "id"), str(ln.m, "notes")
		byID[id]++
		notesOf[id] = notes
		if strings.HasPrefix(notes, "torture ") {
			byMarker[notes]++
			if !h.l.markers[notes] {
				v("feedback line with a marker never sent: %q", notes)
			}
		}
	}
	for id, n := range byID {
		if n > 1 {
			v("feedback id %s appears %d times", id, n)
		}
	}
	for id, m := range h.l.fbAcked {
		switch {
		case byID[id] == 0:
			v("acknowledged feedback %s (%q) is missing", id, m)
		case notesOf[id] != m:
			v("acknowledged feedback %s holds notes %q, sent %q", id, notesOf[id], m)
		}
	}
	for m := range h.l.fbMaybe {
		if byMarker[m] > 1 {
			v("feedback %q whose answer was lost is present %d times", m, byMarker[m])
		}
	}
	for exp, ids := range h.l.submits {
		for _, id := range ids {
			if byID[id] != 1 {
				v("feedback %s of acknowledged submit %s present %d times", id, exp, byID[id])
			}
		}
	}

	runCount := map[string]int{}
	for _, ln := range runs {
		runCount[str(ln.m, "runId")]++
	}
	for id, n := range runCount {
		if n > 1 {
			v("run %s appears %d times in lab/runs.jsonl", id, n)
		}
	}
	for id := range h.l.runs {
		if runCount[id] == 0 {
			v("acknowledged run %s is missing from lab/runs.jsonl", id)
		}
	}

	lastExp := map[string]map[string]any{}
	for _, ln := range exps {
		lastExp[str(ln.m, "experimentId")] = ln.m
	}
	for _, e := range h.l.exps {
		if lastExp[e.id] == nil {
			v("acknowledged experiment %s is missing", e.id)
		}
	}
	for exp := range h.l.submits {
		if rec := lastExp[exp]; rec == nil || str(rec, "status") != "done" {
			v("acknowledged submit of %s: last record status %q, want done", exp, str(rec, "status"))
		}
	}
}

// checkCursors re-polls cursors handed out before the crash, then advances
// the chain to the end and checks it saw every acknowledged entry once.
func (h *harness) checkCursors(ctx context.Context, c *client, round int) {
	h.l.mu.Lock()
	curs := append([]cursorRec(nil), h.l.cursors...)
	pos := map[string]int{}
	for i, id := range h.l.chain {
		if _, ok := pos[id]; !ok {
			pos[id] = i
		}
	}
	h.l.mu.Unlock()
	if len(curs) > maxCursorChecks {
		h.rng.Shuffle(len(curs)-1, func(i, j int) { curs[i], curs[j] = curs[j], curs[i] })
		curs = append(curs[:maxCursorChecks-1], curs[len(curs)-1])
	}
	for _, cr := range curs {
		page, r := pollPage(ctx, c, cr.cursor, 20)
		if page == nil {
			h.l.violate("round %d: cursor %s from round %d is no longer valid: %s", round, cr.cursor, cr.round, r)
			continue
		}
		for _, id := range page.ids {
			if i, ok := pos[id]; ok && i < cr.before {
				h.l.violate("round %d: poll from cursor %s (round %d) returned %s, which lay before it", round, cr.cursor, cr.round, id)
			}
		}
	}
	// Advance the chain to the end of the store.
	for i := 0; i < 100000; i++ {
		h.l.mu.Lock()
		cur := h.l.lastCur
		h.l.mu.Unlock()
		page, r := pollPage(ctx, c, cur, 500)
		if page == nil {
			h.l.violate("round %d: poll from chain cursor %s → %s", round, cur, r)
			return
		}
		h.l.mu.Lock()
		for _, id := range page.ids {
			if _, dup := pos[id]; dup {
				h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: cursor chain returned %s twice", round, id))
			}
			pos[id] = len(h.l.chain)
			h.l.chain = append(h.l.chain, id)
		}
		h.l.lastCur = page.next
		h.l.cursors = append(h.l.cursors, cursorRec{cursor: page.next, before: len(h.l.chain), round: round})
		h.l.mu.Unlock()
		if len(page.ids) == 0 && page.next == cur {
			break
		}
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	for id := range h.l.fbAcked {
		if _, ok := pos[id]; !ok {
			h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: acknowledged feedback %s never reached by the cursor chain", round, id))
		}
	}
}

// viewRoots are the projected files and directories of a home (SPEC §2).
var viewRoots = []string{"feedback", "lab/runs.jsonl", "lab/experiments.jsonl", "lab/sessions", "pty", "steps"}

// RebuildViews copies the log of home src into a fresh home under tmpDir,
// opens it there (which projects every view from the log) and returns
// that home's directory: a rebuild to compare with DiffViews.
func RebuildViews(ctx context.Context, src, tmpDir string) (string, error) {
	rh := home.Home{Dir: filepath.Join(tmpDir, "home")}
	if err := copyLogFiles(src, rh); err != nil {
		return "", err
	}
	eng, err := engine.Open(ctx, engine.Options{Home: rh})
	if err != nil {
		return "", err
	}
	return rh.Dir, eng.Close()
}

// checkRebuild copies the log into a fresh home, opens it (a rebuild) and
// compares every view byte for byte with the live home. It also checks
// that the events the stream delivered before the crash are still in the
// log with the same ids.
func (h *harness) checkRebuild(ctx context.Context, round int, live bool) {
	dir, err := os.MkdirTemp(h.root, "rebuild-")
	if err != nil {
		h.l.violate("harness: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	rh := home.Home{Dir: filepath.Join(dir, "home")}
	if err := copyLogFiles(h.home, rh); err != nil {
		h.l.violate("round %d: copy log: %v", round, err)
		return
	}
	eng, err := engine.Open(ctx, engine.Options{Home: rh})
	if err != nil {
		h.l.violate("round %d: rebuild: open copied log: %v", round, err)
		return
	}
	h.l.mu.Lock()
	sample := make(map[uint64]string, len(h.l.sse.ids))
	for k, v := range h.l.sse.ids {
		sample[k] = v
	}
	h.l.mu.Unlock()
	h.checkBlocks(eng, round)
	for seq, id := range sample {
		ev, err := eng.Log().Read(seq)
		if err != nil || ev.ID != id {
			h.l.violate("round %d: event %d (%s) delivered on the stream is not in the log after the crash: %v", round, seq, id, err)
		}
	}
	if err := eng.Close(); err != nil {
		h.l.violate("round %d: rebuild: close: %v", round, err)
	}
	for _, d := range DiffViews(h.home, rh.Dir) {
		h.l.violate("round %d: view differs from a rebuild: %s", round, d)
	}
}

// DiffViews lists the view files (SPEC §2: feedback/, lab/ but exports,
// pty/, steps/) that differ between the homes a and b, one line each with
// the first differing byte. Empty means byte-identical views.
func DiffViews(a, b string) []string {
	files := map[string]bool{}
	for _, root := range []string{a, b} {
		for _, v := range viewRoots {
			filepath.WalkDir(filepath.Join(root, v), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					rel, _ := filepath.Rel(root, p)
					files[filepath.ToSlash(rel)] = true
				}
				return nil
			})
		}
	}
	var out []string
	for rel := range files {
		x, errx := os.ReadFile(filepath.Join(a, rel))
		y, erry := os.ReadFile(filepath.Join(b, rel))
		switch {
		case errx != nil && erry == nil:
			if len(y) > 0 {
				out = append(out, rel+": missing in the live home")
			}
		case erry != nil && errx == nil:
			if len(x) > 0 {
				out = append(out, rel+": missing in the rebuild")
			}
		case !bytes.Equal(x, y):
			out = append(out, fmt.Sprintf("%s: live %d bytes, rebuild %d bytes, first difference at byte %d", rel, len(x), len(y), firstDiff(x, y)))
		}
	}
	slices.Sort(out)
	return out
}

func firstDiff(x, y []byte) int {
	n := min(len(x), len(y))
	for i := 0; i < n; i++ {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

// copyLogFiles copies the log files of the home in directory src, but not its
// LOCK, into the log directory of dst.
func copyLogFiles(src string, dst home.Home) error {
	from, to := filepath.Join(src, "wal"), dst.WALDir()
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// checkOffline runs after a clean shutdown: the operator tools must agree
// with the home (`cmlab wal verify`, `cmlab rebuild --check`), and the home
// must compare equal to a rebuild.
func (h *harness) checkOffline(ctx context.Context) {
	for _, args := range [][]string{{"wal", "verify"}, {"rebuild", "--check"}} {
		cmd := exec.CommandContext(ctx, h.opts.Binary, append(args, "--home", h.home)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 && bytes.Contains(out, []byte("unknown")) {
				fmt.Fprintf(h.opts.Out, "torture: `cmlab %s` not available, skipped\n", strings.Join(args, " "))
				continue
			}
			h.l.violate("final: cmlab %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 1500))
		}
	}
	h.checkRebuild(ctx, 0, false)
}

// checkBlocks reads the whole (copied) log: every terminal block has
// exactly one pty.block.begin and, once the daemon restarted, exactly one
// pty.block.end; every acknowledged block is in the log.
func (h *harness) checkBlocks(eng *engine.Engine, round int) {
	begins, ends := map[string]int{}, map[string]int{}
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			h.l.violate("round %d: reading the copied log: %v", round, err)
			return
		}
		switch ev.Type {
		case events.TypePtyBlockBegin:
			if p, err := events.DecodeAs[*events.PtyBlockBegin](ev); err == nil {
				begins[p.Block.BlockID]++
			}
		case events.TypePtyBlockEnd:
			if p, err := events.DecodeAs[*events.PtyBlockEnd](ev); err == nil {
				ends[p.Block.BlockID]++
			}
		}
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	for id, n := range begins {
		if n != 1 || ends[id] != 1 {
			h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: block %s has %d BEGIN and %d END events", round, id, n, ends[id]))
		}
	}
	for id, n := range ends {
		if begins[id] == 0 {
			h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: block %s has %d END events and no BEGIN", round, id, n))
		}
	}
	for id := range h.l.blocks {
		if begins[id] == 0 {
			h.l.violations = append(h.l.violations, fmt.Sprintf("round %d: acknowledged block %s is not in the log", round, id))
		}
	}
	h.l.blockEnds = len(ends)
}

// checkStreamReplay reads the event stream from a point before the end up
// to the log's last seq and checks the ids run consecutively: a replay
// after a crash has no gap and no duplicate.
func (h *harness) checkStreamReplay(ctx context.Context, c *client, round int) {
	_, last, err := c.health(ctx)
	if err != nil || last == 0 {
		return
	}
	since := uint64(0)
	if last > 5000 {
		since = last - 5000
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/events?since="+strconv.FormatUint(since, 10), nil)
	if err != nil {
		return
	}
	req.Header.Set("X-CM-LAB-TOKEN", c.token)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		h.l.violate("round %d: event stream replay: %v", round, err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	want := since + 1
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "id:") {
			continue
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "id:")), 10, 64)
		if id != want {
			h.l.violate("round %d: event stream replay from %d: id %d where %d was due", round, since, id, want)
			return
		}
		if id == last {
			return
		}
		want++
	}
	h.l.violate("round %d: event stream replay from %d ended at %d before the last seq %d (%v)", round, since, want-1, last, sc.Err())
}
