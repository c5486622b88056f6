package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// conversation is the terminal the harness drives; it lives across rounds so
// that a block running at the kill must be closed by the restarted daemon.
const conversation = "torture"

// terminal runs blocks one after another in the conversation until ctx
// ends: exec_block (some with a request id), then polls the block until it
// ends. Blocks that run when the daemon is killed are left to recovery.
func (w *worker) terminal(ctx context.Context) {
	for ctx.Err() == nil {
		m := w.marker()
		cmd := fmt.Sprintf("echo '%s'; printf 'line\\r\\nmore'; sleep 0.0%d; echo done", m, w.rng.IntN(9))
		req := ""
		if w.rng.IntN(2) == 0 {
			req = w.reqID()
		}
		r := w.c.post(ctx, "/api/pty/"+conversation+"/exec_block", req, map[string]string{"cmd": cmd})
		if r.err != nil {
			w.l.mu.Lock()
			w.l.unknown++
			w.l.mu.Unlock()
			return
		}
		switch {
		case r.status == http.StatusNotFound && w.n <= 1:
			w.l.mu.Lock()
			w.l.noTerminal = true
			w.l.mu.Unlock()
			return
		case r.status == http.StatusConflict:
			// busy: the previous block (maybe from before a crash) still runs
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case r.status != http.StatusOK:
			w.l.violate("round %d: exec_block → %s", w.round, r)
			return
		}
		var res struct {
			OK      bool   `json:"ok"`
			BlockID string `json:"block_id"`
		}
		if json.Unmarshal(r.body, &res) != nil || !res.OK || res.BlockID == "" {
			w.l.violate("round %d: exec_block answer %s", w.round, r)
			return
		}
		w.l.mu.Lock()
		w.l.blocks[res.BlockID] = true
		w.l.ops["block"]++
		w.l.mu.Unlock()
		for ctx.Err() == nil {
			g := w.c.get(ctx, "/api/pty/"+conversation+"/blocks/"+res.BlockID)
			if g.err != nil {
				return
			}
			var b struct {
				Block struct {
					Status string `json:"status"`
				} `json:"block"`
			}
			if g.status != http.StatusOK || json.Unmarshal(g.body, &b) != nil {
				w.l.violate("round %d: read own block %s → %s", w.round, res.BlockID, g)
				return
			}
			if b.Block.Status != "running" {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func hash64(c byte) string { return "sha256-" + strings.Repeat(string(c), 64) }

// steps plans a two-step mandate and drives it through its transitions;
// the kill catches some steps planned or executing.
func (w *worker) steps(ctx context.Context) {
	w.marker()
	mid := fmt.Sprintf("mt-r%d-w%d-n%d", w.round, w.id, w.n)
	base := "/api/steps/" + mid + "/"
	post := func(tr string, body map[string]any) bool {
		req := ""
		if w.rng.IntN(2) == 0 {
			req = w.reqID() + tr
		}
		r := w.c.post(ctx, base+tr, req, body)
		if r.err != nil {
			w.l.mu.Lock()
			w.l.unknown++
			w.l.mu.Unlock()
			return false
		}
		if r.status == http.StatusNotFound && tr == "plan" {
			w.l.mu.Lock()
			w.l.noSteps = true
			w.l.mu.Unlock()
			return false
		}
		if r.status != http.StatusOK {
			w.l.violate("round %d: step %s %s → %s", w.round, mid, tr, r)
			return false
		}
		w.l.count("step." + tr)
		return true
	}
	if !post("plan", map[string]any{"steps": []map[string]string{
		{"step_id": "s1", "tool": "sh", "params_hash": hash64('1'), "idem_key": mid + "-s1"},
		{"step_id": "s2", "tool": "sh", "params_hash": hash64('2'), "idem_key": mid + "-s2"},
	}}) {
		return
	}
	for _, s := range []string{"s1", "s2"} {
		if !post("executing", map[string]any{"step_id": s, "idem_key": mid + "-" + s, "observed_pre_hash": hash64('a')}) {
			return
		}
		switch w.rng.IntN(4) {
		case 0:
			return // leave it executing: recovery must classify it after a crash
		case 1:
			post("failed", map[string]any{"step_id": s, "error_class": "exit", "error_msg": "exit status 1"})
			return
		}
		if !post("completed", map[string]any{"step_id": s, "post_hash": hash64('b'), "result_hash": hash64('c')}) {
			return
		}
	}
}

// checkStepsClassified asks the restarted daemon for its recovery plan:
// every step it knows must carry a verdict.
func (h *harness) checkStepsClassified(ctx context.Context, c *client, round int) {
	h.l.mu.Lock()
	skip := h.l.noSteps
	h.l.mu.Unlock()
	if skip {
		return
	}
	r := c.get(ctx, "/api/recovery/plan")
	if !r.ok() {
		h.l.violate("round %d: GET /api/recovery/plan → %s", round, r)
		return
	}
	var plan struct {
		Steps []struct {
			MandateID string `json:"mandate_id"`
			StepID    string `json:"step_id"`
			Status    string `json:"status"`
			Verdict   string `json:"verdict"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(r.body, &plan); err != nil {
		h.l.violate("round %d: recovery plan is not JSON: %v", round, err)
		return
	}
	for _, s := range plan.Steps {
		if s.Verdict == "" && s.Status != "completed" && s.Status != "failed" {
			h.l.violate("round %d: step %s/%s (%s) is not classified", round, s.MandateID, s.StepID, s.Status)
		}
	}
}
