package labapi

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestConsoleTravel: a point in the past shows the views as they were
// (replay --to), two points compare line by line, at most travelKeep
// points are kept on disk, the check reports the live views identical,
// and closing the server removes every point.
func TestConsoleTravel(t *testing.T) {
	tl := newTestLab(t)
	var seqs []uint64
	for _, n := range []string{"first", "second", "third"} {
		if r := tl.do("POST", "/api/feedback", `{"notes":"`+n+`"}`); r.status != 200 {
			t.Fatal(r.status, string(r.body))
		}
		seqs = append(seqs, tl.lastSeq())
	}
	travel := func(body string) travelPoint {
		t.Helper()
		r := tl.do("POST", "/api/console/travel", body)
		if r.status != 200 {
			t.Fatalf("travel %s: %d %s", body, r.status, r.body)
		}
		var p travelPoint
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	past, now := travel(`{"seq":`+seqStr(seqs[0])+`}`), travel(`{"seq":`+seqStr(seqs[2])+`}`)
	lines := func(p travelPoint) []string {
		r := tl.do("GET", "/api/console/travel/"+p.ID+"/file?path=feedback/feedback.jsonl", "")
		var out struct {
			Lines []string `json:"lines"`
			Total int      `json:"total"`
		}
		json.Unmarshal(r.body, &out)
		if r.status != 200 || out.Total != len(out.Lines) {
			t.Fatalf("file: %d %s", r.status, r.body)
		}
		return out.Lines
	}
	if l := lines(past); len(l) != 1 || !strings.Contains(l[0], `"first"`) {
		t.Fatalf("the past feedback.jsonl: %q", l)
	}
	if l := lines(now); len(l) != 3 {
		t.Fatalf("the later feedback.jsonl: %q", l)
	}
	r := tl.do("GET", "/api/console/travel/compare?a="+now.ID+"&b="+past.ID, "")
	var cmp struct {
		A, B          uint64
		EventsBetween uint64 `json:"eventsBetween"`
		Files         []travelDiff
	}
	json.Unmarshal(r.body, &cmp)
	var fb *travelDiff
	for i := range cmp.Files {
		if cmp.Files[i].Path == "feedback/feedback.jsonl" {
			fb = &cmp.Files[i]
		}
	}
	if r.status != 200 || cmp.A != seqs[0] || cmp.B != seqs[2] || cmp.EventsBetween != seqs[2]-seqs[0] || fb == nil ||
		fb.CountA != 0 || fb.CountB != 2 || !strings.Contains(fb.OnlyB[0], `"second"`) {
		t.Fatalf("compare: %d %s", r.status, r.body)
	}
	// Path confinement: only the point's view files.
	for _, bad := range []string{"../../etc/passwd", "state/token", "wal/00000000000000000001"} {
		if r := tl.do("GET", "/api/console/travel/"+past.ID+"/file?path="+bad, ""); r.status != 404 {
			t.Errorf("file %q: %d", bad, r.status)
		}
	}
	// A point before the log or an empty request is refused.
	for _, body := range []string{`{}`, `{"at":"1970-01-01T00:00:01Z"}`, `{"seq":999999}`} {
		if r := tl.do("POST", "/api/console/travel", body); r.status != 400 {
			t.Errorf("travel %s: %d %s", body, r.status, r.body)
		}
	}
	extra := travel(`{"seq":` + seqStr(seqs[1]) + `}`)
	fourth := travel(`{"seq":` + seqStr(seqs[1]) + `}`)
	if r := tl.do("GET", "/api/console/travel/"+past.ID+"/file?path=feedback/feedback.jsonl", ""); r.status != 404 {
		t.Errorf("the oldest of %d points is still kept: %d", travelKeep+1, r.status)
	}
	if _, err := os.Stat(past.dir); err == nil {
		t.Error("the evicted point's directory is still on disk")
	}
	if r := tl.do("POST", "/api/console/check", ""); r.status != 200 || !strings.Contains(string(r.body), `"identical":true`) {
		t.Fatalf("check: %d %s", r.status, r.body)
	}
	dirs := []string{}
	for _, p := range tl.srv.console.travel.points {
		dirs = append(dirs, p.dir)
	}
	if len(dirs) != travelKeep {
		t.Fatalf("%d points kept", len(dirs))
	}
	tl.srv.Close()
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s survives the server", d)
		}
	}
	_, _ = extra, fourth
}

func seqStr(n uint64) string { b, _ := json.Marshal(n); return string(b) }
