package labapi

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/ship/cursor"
)

// TestMetricsDocumented: every metric /metrics exposes is in
// docs/metrics.md, and the document names no metric that does not exist.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(cmlab_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	tl := newTestLab(t)
	tl.do("POST", "/api/feedback", `{"notes":"x"}`)
	// A home that ships (state/ship.json) has the shipping gauges.
	if err := cursor.Write(tl.home, cursor.State{HomeID: "h1", Stream: "CMLAB_h1", Shipped: 1, Retrying: true}); err != nil {
		t.Fatal(err)
	}
	// The ages need a checkpoint and a snapshot on disk.
	if err := tl.eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := tl.srv.opts.Retention.WriteSnapshot(retention.SnapshotFile(tl.home), 0); err != nil {
		t.Fatal(err)
	}
	body := string(tl.do("GET", "/metrics", "").body)
	var exposed []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (cmlab_[a-z_]+) `).FindAllStringSubmatch(body, -1) {
		exposed = append(exposed, m[1])
		if !documented[m[1]] {
			t.Errorf("%s is exposed but not in docs/metrics.md", m[1])
		}
	}
	// The terminal's gauges need a terminal manager, which this server has not.
	exposed = append(exposed, "cmlab_pty_shells", "cmlab_pty_shells_max")
	for name := range documented {
		if !slices.Contains(exposed, name) {
			t.Errorf("docs/metrics.md names %s, which /metrics does not expose", name)
		}
	}
	if len(exposed) < 16 || !strings.Contains(body, "cmlab_wal_appends_total 1\n") || !strings.Contains(body, "cmlab_ship_failing 1\n") {
		t.Fatalf("metrics:\n%s", body)
	}
}
