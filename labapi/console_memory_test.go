package labapi

import (
	"runtime"
	"testing"
)

// TestConsolePagesDoNotGrowMemory: serving hundreds of console pages (log
// pages with and without filters, traces, overviews) leaves the server's
// live heap where a few pages left it: no per-page state is kept.
func TestConsolePagesDoNotGrowMemory(t *testing.T) {
	tl := newTestLab(t)
	for i := 0; i < 300; i++ {
		if r := tl.do("POST", "/api/feedback", `{"notes":"memory"}`); r.status != 200 {
			t.Fatal(r.status, string(r.body))
		}
	}
	pages := []string{"/api/console/log", "/api/console/log?type=feedback.&before=200", "/api/console/log?id=nothing",
		"/api/console/trace?id=lab_test", "/api/console/overview", "/api/console/recovery"}
	serve := func(n int) {
		for i := 0; i < n; i++ {
			for _, p := range pages {
				if r := tl.do("GET", p, ""); r.status != 200 {
					t.Fatalf("%s: %d %s", p, r.status, r.body)
				}
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	serve(20)
	before := heap()
	serve(200)
	after := heap()
	t.Logf("live heap after 120 pages %d KiB, after 1320 more %d KiB", before>>10, after>>10)
	if after > before+2<<20 {
		t.Fatalf("the live heap grew by %d KiB over 1200 pages", (after-before)>>10)
	}
}
