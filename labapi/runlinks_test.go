package labapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunFilesLinkedInside (issue 28 A2): video.mp4, script.json and
// sync-report.json that are symlinks to files inside the run folder are
// followed (video served, topic read, sync rating read); a report linked
// outside the allowed roots is neither listed nor served, and the run's
// record says why.
func TestRunFilesLinkedInside(t *testing.T) {
	tl := newTestLab(t)
	outside := filepath.Join(t.TempDir(), "caption-report.json")
	os.WriteFile(outside, []byte(`{"captionQuality":{"overall":{"score":0.5}}}`), 0o600)
	dir := tl.mkRun("linked-inside", map[string]string{"final.mp4": "FINAL-RENDER"})
	os.MkdirAll(filepath.Join(dir, "out"), 0o700)
	os.WriteFile(filepath.Join(dir, "out", "script-v2.json"), []byte(`{"title":"Linked topic"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "out", "sync-v2.json"), []byte(`{"rating":87}`), 0o600)
	for n, target := range map[string]string{"video.mp4": "final.mp4", "script.json": "out/script-v2.json",
		"sync-report.json": filepath.Join(dir, "out", "sync-v2.json"), "caption-report.json": outside} {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	runID := tl.importRun(dir)
	r := tl.do("GET", "/api/runs/"+runID, "")
	m := r.json(t)
	if m["topic"] != "Linked topic" {
		t.Fatalf("topic = %v, want the linked script's title; %s", m["topic"], r.body)
	}
	if got := m["autoMetricsSummary"].(map[string]any)["syncRating"]; got != float64(87) {
		t.Fatalf("syncRating = %v; %s", got, r.body)
	}
	if got := m["autoMetricsSummary"].(map[string]any)["captionOverall"]; got != nil {
		t.Fatalf("read a report linked outside: captionOverall = %v", got)
	}
	reports := m["artifacts"].(map[string]any)["reports"].(map[string]any)
	if reports["sync"] != true || reports["caption"] != false || m["artifacts"].(map[string]any)["script"] != true {
		t.Fatalf("artifacts = %v", m["artifacts"])
	}
	refused, _ := m["refused"].(map[string]any)
	if why, _ := refused["caption-report.json"].(string); !strings.Contains(why, "outside the run folder") {
		t.Fatalf("refused = %v; %s", m["refused"], r.body)
	}
	if len(refused) != 1 {
		t.Fatalf("refused = %v, want caption-report.json only", refused)
	}
	if v := tl.do("GET", "/api/runs/"+runID+"/video", ""); v.status != 200 || string(v.body) != "FINAL-RENDER" {
		t.Fatalf("video: %d %q", v.status, v.body)
	}
	if a := tl.do("GET", "/api/runs/"+runID+"/artifact/sync-report.json", ""); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"rating":87}` {
		t.Fatalf("sync report: %d %s", a.status, a.body)
	}
	if a := tl.do("GET", "/api/runs/"+runID+"/artifact/caption-report.json", ""); a.status != 404 || strings.Contains(string(a.body), "captionQuality") {
		t.Fatalf("report linked outside served: %d %s", a.status, a.body)
	}
	// The feedback snapshot lists only what the API serves.
	fb := tl.do("POST", "/api/feedback", `{"runId":"`+runID+`","ratings":{"overall":50}}`)
	if fb.status != 200 {
		t.Fatalf("feedback: %d %s", fb.status, fb.body)
	}
	lines := tl.feedbackLines()
	last := lines[len(lines)-1]
	if strings.Contains(last, "caption-report.json") || !strings.Contains(last, "sync-report.json") {
		t.Fatalf("feedback snapshot: %s", last)
	}
}
