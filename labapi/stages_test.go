package labapi

import (
	"testing"
	"time"
)

// TestStageRecorderCountsAcknowledgedPosts: with a recorder installed,
// each acknowledged POST /api/feedback is counted once in every stage; the
// stages add up to the handler total exactly; the append and projection
// stages are not empty; a retry answered from the request-id index, a
// refused body and a request sent without a recorder are not counted.
func TestStageRecorderCountsAcknowledgedPosts(t *testing.T) {
	tl := newTestLab(t)
	if r := tl.do("POST", "/api/feedback", `{"notes":"before"}`, "X-CM-LAB-REQUEST-ID", "st-0"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	rec := &StageRecorder{}
	tl.srv.SetStageRecorder(rec)
	for i, id := range []string{"st-1", "st-2", "st-3"} {
		if r := tl.do("POST", "/api/feedback", `{"notes":"n","ratings":{"overall":`+string(rune('1'+i))+`0}}`, "X-CM-LAB-REQUEST-ID", id); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	if r := tl.do("POST", "/api/feedback", `{"notes":"n","ratings":{"overall":10}}`, "X-CM-LAB-REQUEST-ID", "st-1"); r.status != 200 || r.header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") != "true" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if r := tl.do("POST", "/api/feedback", `{"ratings":{"overall":500}}`, "X-CM-LAB-REQUEST-ID", "st-bad"); r.status != 400 {
		t.Fatalf("bad body: %d %s", r.status, r.body)
	}
	if r := tl.do("POST", "/api/feedback", `{"notes":"no id"}`); r.status != 200 {
		t.Fatalf("without a request id: %d %s", r.status, r.body)
	}
	tl.srv.SetStageRecorder(nil)
	if r := tl.do("POST", "/api/feedback", `{"notes":"after"}`, "X-CM-LAB-REQUEST-ID", "st-9"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}

	const want = 4 // st-1, st-2, st-3 and the one without an id
	var sum uint64
	for i := range rec.stages {
		if n := rec.stages[i].count.Load(); n != want {
			t.Errorf("stage %s counted %d requests, want %d", Stage(i), n, want)
		}
		sum += rec.stages[i].sum.Load()
	}
	if n := rec.total.count.Load(); n != want {
		t.Errorf("handler total counted %d requests, want %d", n, want)
	}
	if total := rec.total.sum.Load(); sum != total || total == 0 {
		t.Errorf("stages add up to %v, the handler total is %v", time.Duration(sum), time.Duration(total))
	}
	for _, st := range []Stage{StageAppend, StageProject} {
		if rec.stages[st].sum.Load() == 0 {
			t.Errorf("stage %s recorded no time", st)
		}
	}
	stats := rec.Stats()
	if len(stats) != int(numStages)+1 || stats[len(stats)-1].Stage != "handler total" || stats[StageProject].Stage != "projection" {
		t.Fatalf("Stats: %+v", stats)
	}
	if st := stats[len(stats)-1]; st.P50Us <= 0 || st.P99Us < st.P50Us || st.MeanUs <= 0 {
		t.Errorf("handler total stats %+v", st)
	}
}

// TestDurHistQuantile: a quantile lands in the bucket of the value of that
// rank, within the bucket's width (≤ 12.5% of the value either way).
func TestDurHistQuantile(t *testing.T) {
	var h durHist
	for i := 1; i <= 100; i++ {
		h.observe(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 50e3}, {0.99, 99e3}, {0.01, 1e3}} {
		got := h.quantile(c.q)
		if got < c.want*0.875 || got > c.want*1.25 {
			t.Errorf("quantile %.2f = %.0f ns, want about %.0f", c.q, got, c.want)
		}
	}
	for _, ns := range []uint64{0, 1, 3, 4, 5, 7, 8, 1000, 1 << 40, 1<<63 + 5} {
		b := durBucket(ns)
		if b < 0 || b >= len(h.buckets) {
			t.Fatalf("bucket of %d = %d", ns, b)
		}
		if ns >= 4 {
			if mid := durBucketMid(b); mid < float64(ns)*0.8 || mid > float64(ns)*1.2 {
				t.Errorf("bucket of %d has middle %.0f", ns, mid)
			}
		}
	}
}
