package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ledger is what the harness knows was acknowledged, and what it sent
// without learning the outcome. It is the oracle of the invariant checks.
type ledger struct {
	mu sync.Mutex

	fbAcked map[string]string // feedbackId → marker (notes)
	fbMaybe map[string]bool   // markers of posts whose outcome the crash hid
	markers map[string]bool   // every marker ever sent (unique per post)

	reqs map[string]*reqRec // request id → what was sent and answered

	runs    map[string]string // acknowledged runId → its directory
	dirRun  map[string]string // directory → runId of its first acknowledged import
	runDirs []string          // directories created (imported or not)

	exps    []expRec            // acknowledged experiments
	submits map[string][]string // experimentId → feedbackIds of its acknowledged submit

	chain     []string    // feedback ids collected by the cursor chain, in order
	cursors   []cursorRec // cursors handed out, with how many chain ids lie before them
	lastCur   string      // the chain's current cursor
	sse       sseState    // event-stream reader state
	ops       map[string]int
	blocks    map[string]bool // acknowledged terminal blocks
	blockEnds int             // blocks with an END in the log at the last check
	// noTerminal / noSteps: the daemon has no terminal or step routes
	// (404); that part of the load is skipped.
	noTerminal, noSteps bool
	unknown             int // requests whose outcome was hidden by a crash
	retries             int // immediate retries of a request id

	violations []string
}

type reqRec struct {
	path   string
	body   []byte
	kind   string // feedback | import | submit
	marker string // feedback marker (kind feedback)
	exp    string // experiment id (kind submit)
	dir    string // run directory (kind import)
	resp   []byte // the answer, once acknowledged
	acked  bool
}

type expRec struct {
	id       string
	baseline string
	variant  string
	varID    string
}

type cursorRec struct {
	cursor string
	before int // len(chain) when the cursor was handed out
	round  int
}

type sseState struct {
	last    uint64            // highest id seen
	ids     map[uint64]string // seq → event id, a sample for the durability check
	dups    int
	gaps    int
	events  int
	connect int
}

func newLedger() *ledger {
	return &ledger{
		fbAcked: map[string]string{}, fbMaybe: map[string]bool{}, markers: map[string]bool{},
		reqs: map[string]*reqRec{}, runs: map[string]string{}, dirRun: map[string]string{},
		submits: map[string][]string{}, ops: map[string]int{}, lastCur: "0", blocks: map[string]bool{},
		sse: sseState{ids: map[uint64]string{}},
	}
}

func (l *ledger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

func (l *ledger) count(op string) {
	l.mu.Lock()
	l.ops[op]++
	l.mu.Unlock()
}

// worker drives one stream of operations until ctx ends (the daemon died
// or the round is over).
type worker struct {
	id    int
	round int
	n     int
	rng   *rand.Rand
	c     *client
	l     *ledger
	env   *env
}

// env is the fixed world of a run: where run directories are made.
type env struct {
	runsRoot string
}

func (w *worker) marker() string {
	w.n++
	return fmt.Sprintf("torture r%d w%d n%d", w.round, w.id, w.n)
}

func (w *worker) reqID() string {
	return fmt.Sprintf("req-r%d-w%d-n%d-%x", w.round, w.id, w.n, w.rng.Uint32())
}

// run performs random operations until ctx is done.
func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch p := w.rng.IntN(100); {
		case p < 30:
			w.feedback(ctx, false)
		case p < 55:
			w.feedback(ctx, true)
		case p < 67:
			w.importRun(ctx, "")
		case p < 72:
			w.reimport(ctx)
		case p < 80:
			w.experiment(ctx)
		case p < 86:
			w.l.mu.Lock()
			skip := w.l.noSteps
			w.l.mu.Unlock()
			if !skip {
				w.steps(ctx)
			}
		default:
			w.poll(ctx)
		}
	}
}

func (w *worker) someRun() string {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if len(w.l.runs) == 0 {
		return ""
	}
	ids := make([]string, 0, len(w.l.runs))
	for id := range w.l.runs {
		ids = append(ids, id)
	}
	// Map order is random; sort-free pick is fine but keep it seeded.
	slices.Sort(ids)
	return ids[w.rng.IntN(len(ids))]
}

type ratings map[string]int

func (w *worker) ratings() ratings {
	r := ratings{"overall": w.rng.IntN(101)}
	for _, k := range []string{"hook", "pacing", "script", "visuals", "motion", "captions", "sync"} {
		if w.rng.IntN(3) == 0 {
			r[k] = w.rng.IntN(101)
		}
	}
	return r
}

// feedback posts one feedback entry; with a request id it may retry at once.
func (w *worker) feedback(ctx context.Context, withID bool) {
	run := w.someRun()
	if run == "" {
		w.importRun(ctx, "")
		return
	}
	m := w.marker()
	body, _ := json.Marshal(map[string]any{"runId": run, "ratings": w.ratings(), "notes": m, "tags": []string{"torture"}})
	req := ""
	if withID {
		req = w.reqID()
	}
	w.l.mu.Lock()
	w.l.markers[m] = true
	if req != "" {
		w.l.reqs[req] = &reqRec{path: "/api/feedback", body: body, kind: "feedback", marker: m}
	}
	w.l.mu.Unlock()
	if req != "" && w.rng.IntN(4) == 0 {
		// Two concurrent requests with one id: they must act once and
		// both get the one answer.
		var r2 reply
		done := make(chan struct{})
		go func() { r2 = w.c.do(ctx, "POST", "/api/feedback", req, body); close(done) }()
		r := w.c.do(ctx, "POST", "/api/feedback", req, body)
		<-done
		w.l.mu.Lock()
		w.l.retries++
		w.l.mu.Unlock()
		if r.ok() && r2.ok() && !sameJSON(r.body, r2.body) {
			w.l.violate("round %d: concurrent duplicates of %s answered %s and %s", w.round, req, r, r2)
		}
		if !r.ok() && r2.ok() {
			r = r2
		}
		w.settleFeedback(r, req, m)
		return
	}
	r := w.c.do(ctx, "POST", "/api/feedback", req, body)
	w.settleFeedback(r, req, m)
	if req != "" && r.ok() && w.rng.IntN(2) == 0 {
		if r2, same := w.retry(ctx, "/api/feedback", req, body, r); !same {
			w.l.violate("round %d: retry of %s answered %s, first answer %s", w.round, req, r2, r)
		}
	}
}

// retry posts body under request id req once more right after its first
// answer r; same is false when an answer arrives that is not r again.
func (w *worker) retry(ctx context.Context, path, req string, body []byte, r reply) (r2 reply, same bool) {
	r2 = w.c.do(ctx, "POST", path, req, body)
	w.l.mu.Lock()
	w.l.retries++
	w.l.mu.Unlock()
	return r2, r2.err != nil || r2.status == http.StatusOK && sameJSON(r.body, r2.body)
}

// settleFeedback books the outcome of a feedback post.
func (w *worker) settleFeedback(r reply, req, m string) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if r.err != nil {
		w.l.unknown++
		w.l.fbMaybe[m] = true
		return
	}
	if r.status != http.StatusOK {
		if r.status >= 500 && r.errCode() != "DEGRADED" {
			w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: POST /api/feedback → %s", w.round, r))
		}
		w.l.fbMaybe[m] = true // a 5xx says nothing about durability; 4xx must have appended nothing
		if req != "" && r.status < 500 {
			delete(w.l.reqs, req)
		}
		return
	}
	var resp struct {
		FeedbackID string `json:"feedbackId"`
	}
	if json.Unmarshal(r.body, &resp) != nil || resp.FeedbackID == "" {
		w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: feedback answer without feedbackId: %s", w.round, r))
		return
	}
	w.l.fbAcked[resp.FeedbackID] = m
	w.l.ops["feedback"]++
	if req != "" {
		rec := w.l.reqs[req]
		rec.acked, rec.resp = true, r.body
	}
}

// newRunDir creates a run directory with content-machine's artifacts.
func (w *worker) newRunDir() (string, error) {
	dir := filepath.Join(w.env.runsRoot, fmt.Sprintf("run-r%d-w%d-n%d", w.round, w.id, w.n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	files := map[string]string{
		"script.json":     fmt.Sprintf(`{"title":"torture %s","scenes":[{"text":"x%d"}]}`, filepath.Base(dir), w.rng.IntN(1000)),
		"timestamps.json": `{"words":[]}`,
		"visuals.json":    `{"scenes":[]}`,
		"score.json":      fmt.Sprintf(`{"overall":%0.2f,"passed":true}`, w.rng.Float64()),
		"video.mp4":       strings.Repeat("\x00torture-video", 1+w.rng.IntN(64)),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// importRun imports a fresh run directory (or dir, when given).
func (w *worker) importRun(ctx context.Context, dir string) {
	w.marker()
	if dir == "" {
		var err error
		if dir, err = w.newRunDir(); err != nil {
			w.l.violate("harness: %v", err)
			return
		}
		w.l.mu.Lock()
		w.l.runDirs = append(w.l.runDirs, dir)
		w.l.mu.Unlock()
	}
	req := ""
	if w.rng.IntN(2) == 0 {
		req = w.reqID()
	}
	body, _ := json.Marshal(map[string]any{"path": dir, "topic": "torture"})
	if req != "" {
		w.l.mu.Lock()
		w.l.reqs[req] = &reqRec{path: "/api/runs/import", body: body, kind: "import", dir: dir}
		w.l.mu.Unlock()
	}
	r := w.c.do(ctx, "POST", "/api/runs/import", req, body)
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if !w.acknowledged(r, "import of a valid run directory", degraded) {
		return
	}
	var resp struct {
		RunID      string `json:"runId"`
		Supersedes string `json:"supersedesRunId"`
	}
	if json.Unmarshal(r.body, &resp) != nil || resp.RunID == "" {
		w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: import answer without runId: %s", w.round, r))
		return
	}
	if prev, ok := w.l.dirRun[dir]; ok && prev != resp.RunID && resp.Supersedes == "" {
		w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: re-import of unchanged %s gave %s, first import %s", w.round, filepath.Base(dir), resp.RunID, prev))
	}
	if _, ok := w.l.dirRun[dir]; !ok {
		w.l.dirRun[dir] = resp.RunID
	}
	w.l.runs[resp.RunID] = dir
	w.l.ops["import"]++
	if req != "" {
		rec := w.l.reqs[req]
		rec.acked, rec.resp = true, r.body
	}
}

// reimport imports an already imported, unchanged directory again.
func (w *worker) reimport(ctx context.Context) {
	w.l.mu.Lock()
	var dirs []string
	for d := range w.l.dirRun {
		dirs = append(dirs, d)
	}
	w.l.mu.Unlock()
	if len(dirs) == 0 {
		w.importRun(ctx, "")
		return
	}
	slices.Sort(dirs)
	w.importRun(ctx, dirs[w.rng.IntN(len(dirs))])
}

// experiment creates an experiment over two acknowledged runs and submits it.
func (w *worker) experiment(ctx context.Context) {
	base, variant := w.someRun(), w.someRun()
	if base == "" || base == variant {
		w.importRun(ctx, "")
		return
	}
	m := w.marker()
	r := w.c.post(ctx, "/api/experiments", "", map[string]any{
		"name": "exp " + m, "hypothesis": "h", "topic": "torture", "baselineRunId": base,
		"variants": []map[string]string{{"label": "B", "runId": variant}},
	})
	if r.err != nil {
		w.l.mu.Lock()
		w.l.unknown++
		w.l.mu.Unlock()
		return
	}
	if r.status != http.StatusOK {
		w.l.violate("round %d: create experiment → %s", w.round, r)
		return
	}
	var cr struct {
		ExperimentID string `json:"experimentId"`
	}
	if json.Unmarshal(r.body, &cr) != nil || cr.ExperimentID == "" {
		w.l.violate("round %d: create experiment answer without experimentId: %s", w.round, r)
		return
	}
	w.l.count("experiment")
	g := w.c.get(ctx, "/api/experiments/"+cr.ExperimentID)
	if g.err != nil {
		return
	}
	var exp struct {
		Variants []struct {
			VariantID string `json:"variantId"`
			RunID     string `json:"runId"`
		} `json:"variants"`
	}
	if g.status != http.StatusOK || json.Unmarshal(g.body, &exp) != nil || len(exp.Variants) != 1 {
		w.l.violate("round %d: read own experiment %s → %s", w.round, cr.ExperimentID, g)
		return
	}
	e := expRec{id: cr.ExperimentID, baseline: base, variant: variant, varID: exp.Variants[0].VariantID}
	w.l.mu.Lock()
	w.l.exps = append(w.l.exps, e)
	w.l.mu.Unlock()
	if w.rng.IntN(4) == 0 {
		return // leave some experiments unsubmitted
	}
	w.submit(ctx, e)
}

func (w *worker) submit(ctx context.Context, e expRec) {
	m := w.marker()
	body, _ := json.Marshal(map[string]any{
		"winnerVariantId": e.varID, "reason": m, "answers": map[string]string{},
		"perRun": []map[string]any{
			{"runId": e.baseline, "variantId": "baseline", "ratings": w.ratings(), "notes": m + " base", "tags": []string{}},
			{"runId": e.variant, "variantId": e.varID, "ratings": w.ratings(), "notes": m + " var", "tags": []string{}},
		},
	})
	req := w.reqID()
	path := "/api/experiments/" + e.id + "/submit"
	w.l.mu.Lock()
	w.l.reqs[req] = &reqRec{path: path, body: body, kind: "submit", exp: e.id}
	w.l.markers[m+" base"], w.l.markers[m+" var"] = true, true
	w.l.mu.Unlock()
	r := w.c.do(ctx, "POST", path, req, body)
	w.settleSubmit(r, req, e.id)
	if r.ok() && w.rng.IntN(2) == 0 {
		if r2, same := w.retry(ctx, path, req, body, r); !same {
			w.l.violate("round %d: retry of submit %s answered %s, first %s", w.round, req, r2, r)
		}
	}
}

// acknowledged settles the reply r to a write (the caller holds w.l.mu):
// no answer counts as an unknown outcome, a refusal that refusalOK does
// not allow is a violation named by what. It reports whether the write
// was acknowledged (200).
func (w *worker) acknowledged(r reply, what string, refusalOK func(reply) bool) bool {
	if r.err != nil {
		w.l.unknown++
		return false
	}
	if r.status != http.StatusOK {
		if !refusalOK(r) {
			w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: %s → %s", w.round, what, r))
		}
		return false
	}
	return true
}

// degraded allows a 5xx DEGRADED refusal only: the daemon's log failed.
func degraded(r reply) bool { return r.status >= 500 && r.errCode() == "DEGRADED" }

func (w *worker) settleSubmit(r reply, req, exp string) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if !w.acknowledged(r, "submit "+exp, func(r reply) bool { return r.errCode() == "DEGRADED" }) {
		return
	}
	var resp struct {
		ExperimentID string   `json:"experimentId"`
		FeedbackIDs  []string `json:"feedbackIds"`
	}
	if json.Unmarshal(r.body, &resp) != nil || resp.ExperimentID != exp || len(resp.FeedbackIDs) != 2 {
		w.l.violations = append(w.l.violations, fmt.Sprintf("round %d: submit answer %s", w.round, r))
		return
	}
	w.l.submits[exp] = resp.FeedbackIDs
	w.l.ops["submit"]++
	rec := w.l.reqs[req]
	rec.acked, rec.resp = true, r.body
}

// poll advances the shared cursor chain by one page. Only one worker polls
// at a time (the chain is one reader), under pollMu.
func (w *worker) poll(ctx context.Context) {
	w.l.mu.Lock()
	cur := w.l.lastCur
	w.l.mu.Unlock()
	page, r := pollPage(ctx, w.c, cur, 1+w.rng.IntN(40))
	if r.err != nil {
		return
	}
	if page == nil {
		w.l.violate("round %d: poll since=%s → %s", w.round, cur, r)
		return
	}
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if w.l.lastCur != cur {
		return // another worker advanced the chain meanwhile; drop this page
	}
	w.l.chain = append(w.l.chain, page.ids...)
	w.l.lastCur = page.next
	w.l.cursors = append(w.l.cursors, cursorRec{cursor: page.next, before: len(w.l.chain), round: w.round})
	w.l.ops["poll"]++
}

type feedbackPage struct {
	ids  []string
	next string
}

// pollPage is one GET /api/feedback; page is nil when the answer is not 200.
func pollPage(ctx context.Context, c *client, since string, limit int) (*feedbackPage, reply) {
	r := c.get(ctx, "/api/feedback?since="+since+"&limit="+strconv.Itoa(limit))
	if !r.ok() {
		return nil, r
	}
	var p struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || p.NextCursor == "" {
		return nil, r
	}
	page := &feedbackPage{next: p.NextCursor}
	for _, it := range p.Items {
		page.ids = append(page.ids, it.ID)
	}
	return page, r
}

// readSSE follows /api/events from the ledger's last seen id until ctx
// ends or the connection drops, checking ids only ever grow by one.
func readSSE(ctx context.Context, c *client, l *ledger, round int) {
	l.mu.Lock()
	since := l.sse.last
	l.sse.connect++
	l.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/events?since="+strconv.FormatUint(since, 10), nil)
	if err != nil {
		return
	}
	req.Header.Set("X-CM-LAB-TOKEN", c.token)
	req.Header.Set("Accept", "text/event-stream")
	if since > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(since, 10))
	}
	hc := &http.Client{} // no timeout: the stream is long-lived; ctx ends it
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.violate("round %d: GET /api/events → %d", round, resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var id uint64
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			id, _ = strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "id:")), 10, 64)
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "":
			if id != 0 {
				var ev struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal([]byte(data.String()), &ev)
				l.mu.Lock()
				s := &l.sse
				s.events++
				switch {
				case id <= s.last:
					s.dups++
					l.violations = append(l.violations, fmt.Sprintf("round %d: event stream repeated id %d after %d", round, id, s.last))
				case id != s.last+1:
					s.gaps++
					l.violations = append(l.violations, fmt.Sprintf("round %d: event stream jumped from %d to %d", round, s.last, id))
				}
				if id > s.last {
					s.last = id
				}
				if ev.ID != "" && id%7 == 0 {
					s.ids[id] = ev.ID
				}
				l.mu.Unlock()
			}
			id = 0
			data.Reset()
		}
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
