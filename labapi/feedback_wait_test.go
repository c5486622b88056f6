package labapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestFeedbackLongPoll (issue 25 §5): GET /api/feedback?wait= waits for
// the next entry after since and answers it as soon as it is committed;
// with nothing new it answers the empty page when wait passes; without
// wait the answer is byte for byte the plain poll's.
func TestFeedbackLongPoll(t *testing.T) {
	tl := newTestLab(t)
	if r := tl.do("POST", "/api/feedback", `{"notes":"first"}`); r.status != 200 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	first := tl.do("GET", "/api/feedback?since=0", "")
	page, err := PollFeedback(tl.home.FeedbackFile(), "0", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(page)
	if !bytes.Equal(bytes.TrimSpace(first.body), want) {
		t.Fatalf("plain poll = %s, want %s", first.body, want)
	}
	var p1 FeedbackPage
	json.Unmarshal(first.body, &p1)

	// Nothing new: the empty page after wait, with the same cursor.
	start := time.Now()
	r := tl.do("GET", "/api/feedback?since="+p1.NextCursor+"&wait=300ms", "")
	if el := time.Since(start); r.status != 200 || el < 300*time.Millisecond || el > 5*time.Second {
		t.Fatalf("idle long poll = %d %s after %s", r.status, r.body, el)
	}
	if got := string(bytes.TrimSpace(r.body)); got != `{"items":[],"nextCursor":"`+p1.NextCursor+`"}` {
		t.Fatalf("idle long poll = %s", got)
	}

	// An entry added while the poll waits is answered at once.
	type answer struct {
		r   resp
		err time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		s := time.Now()
		done <- answer{tl.do("GET", "/api/feedback?since="+p1.NextCursor+"&wait=30s", ""), time.Since(s)}
	}()
	// Add once the poll is waiting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tl.srv.fbSignal.mu.Lock()
		n := tl.srv.fbSignal.waiters
		tl.srv.fbSignal.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long poll never started waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := tl.do("POST", "/api/feedback", `{"notes":"second"}`); r.status != 200 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	a := <-done
	var p2 FeedbackPage
	if a.r.status != 200 || json.Unmarshal(a.r.body, &p2) != nil || len(p2.Items) != 1 || a.err > 20*time.Second {
		t.Fatalf("long poll = %d %s after %s", a.r.status, a.r.body, a.err)
	}
	var e struct{ Notes string }
	json.Unmarshal(p2.Items[0], &e)
	if e.Notes != "second" {
		t.Fatalf("long poll item = %s", p2.Items[0])
	}
	// Past MaxFeedbackWaiters waiting polls a long poll is BUSY at once;
	// the plain poll is served.
	tl.srv.fbSignal.mu.Lock()
	tl.srv.fbSignal.waiters = MaxFeedbackWaiters
	tl.srv.fbSignal.mu.Unlock()
	if r := tl.do("GET", "/api/feedback?since=0&wait=30s", ""); r.status != http.StatusConflict || r.code() != CodeBusy {
		t.Fatalf("long poll past the cap = %d %s", r.status, r.body)
	}
	if r := tl.do("GET", "/api/feedback?since=0", ""); r.status != 200 {
		t.Fatalf("plain poll at the cap = %d %s", r.status, r.body)
	}
	tl.srv.fbSignal.mu.Lock()
	tl.srv.fbSignal.waiters = 0
	tl.srv.fbSignal.mu.Unlock()
	// Bad wait values are refused.
	for _, w := range []string{"soon", "-1s"} {
		if r := tl.do("GET", "/api/feedback?since=0&wait="+w, ""); r.status != http.StatusBadRequest || r.code() != CodeInvalidArgument {
			t.Fatalf("wait=%s = %d %s", w, r.status, r.body)
		}
	}
}
