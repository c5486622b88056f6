package projections

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// TestLabRecordShapes pins the bytes the Lab records project to, in both
// shapes: records written since content-machine parity (run reports under
// syncReportPath/captionReportPath/scorePath, metric keys by the reports
// read, sparse experiments) are what content-machine's strict schemas
// accept; records written before keep the bytes they were written with.
func TestLabRecordShapes(t *testing.T) {
	ip := func(n int) *int { return &n }
	fp := func(f float64) *float64 { return &f }
	newSummary := &events.AutoMetricsSummary{SyncRating: ip(73), MeanDriftMs: fp(12.25), CaptionOverall: ip(56), ProxyScoreOverall: ip(80),
		Read: &events.MetricsRead{Sync: true, Caption: true}}
	evs := []*events.Event{
		events.MustNew("lab_s", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_new", SessionID: "lab_s",
			Topic: "C", ArtifactsDir: "/r/c", ArtifactsDirRealpath: "/r/c", VideoPath: "/r/c/Clip.MP4",
			Reports:            &events.RunReports{SyncReportPath: "/r/c/sync-report-attempt1.json", CaptionReportPath: "/r/c/caption-quality.json"},
			AutoMetricsSummary: newSummary}}),
		events.MustNew("lab_s", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_none", SessionID: "lab_s",
			ArtifactsDir: "/r/d", ArtifactsDirRealpath: "/r/d", Reports: &events.RunReports{},
			AutoMetricsSummary: &events.AutoMetricsSummary{Read: &events.MetricsRead{}}}}),
		events.MustNew("lab_s", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_old", SessionID: "lab_s",
			ArtifactsDir: "/r/o", ArtifactsDirRealpath: "/r/o", Reports: &events.RunReports{Sync: "/r/o/sync-report.json"},
			AutoMetricsSummary: &events.AutoMetricsSummary{SyncRating: ip(88), SyncLabel: "Good", MaxDriftMs: fp(40)}}}),
		events.MustNew("lab_s", &events.ExperimentCreated{Experiment: events.LabExperiment{SchemaVersion: 1, ExperimentID: "exp_new",
			SessionID: "lab_s", Name: "A/B Compare", BaselineRunID: "run_new", Variants: []events.Variant{{VariantID: "var_1", Label: "B", RunID: "run_none"}},
			Status: "queued", Sparse: true}}),
		events.MustNew("lab_s", &events.ExperimentCreated{Experiment: events.LabExperiment{SchemaVersion: 1, ExperimentID: "exp_old",
			SessionID: "lab_s", Name: "Old", BaselineRunID: "run_old", Variants: []events.Variant{}, Status: "queued", Questions: []events.Question{}}}),
		events.MustNew("lab_s", &events.ExperimentSubmitted{
			Experiment: events.LabExperiment{SchemaVersion: 1, ExperimentID: "exp_new", SessionID: "lab_s", CreatedAt: "2026-01-01T00:00:00.001Z",
				Name: "A/B Compare", BaselineRunID: "run_new", Variants: []events.Variant{{VariantID: "var_1", Label: "B", RunID: "run_none"}},
				Status: "done", Winner: &events.Winner{VariantID: "baseline"}, Sparse: true},
			Feedback: []events.FeedbackEntry{
				{SchemaVersion: 1, ID: "fb_1", SessionID: "lab_s", RunID: "run_new", ExperimentID: "exp_new", VariantID: "baseline",
					AutoMetricsSnapshot: events.SnapshotOf(newSummary)},
				{SchemaVersion: 1, ID: "fb_2", SessionID: "lab_s", RunID: "run_none", ExperimentID: "exp_new", VariantID: "var_1",
					AutoMetricsSnapshot: events.SnapshotOf(&events.AutoMetricsSummary{Read: &events.MetricsRead{}})},
			}}),
		events.MustNew("lab_s", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_old", RunID: "run_old",
			AutoMetricsSnapshot: &events.AutoMetricsSnapshot{SyncRating: ip(88)}}}),
	}
	for i, ev := range evs {
		ev.Seq, ev.TS = uint64(i+1), 1767225600000+int64(i) // 2026-01-01T00:00:00.000Z + i ms
	}
	h := rebuildInto(t, func(yield func(*events.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}, RebuildOptions{NoSync: true})
	want := map[string]string{
		RunsView: `{"schemaVersion":1,"runId":"run_new","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.000Z","topic":"C","artifactsDir":"/r/c","artifactsDirRealpath":"/r/c","videoPath":"/r/c/Clip.MP4","reports":{"syncReportPath":"/r/c/sync-report-attempt1.json","captionReportPath":"/r/c/caption-quality.json"},"autoMetricsSummary":{"syncRating":73,"syncLabel":null,"meanDriftMs":12.25,"maxDriftMs":null,"captionOverall":56,"captionCoverageRatio":null,"ocrConfidenceMean":null,"proxyScoreOverall":80}}
{"schemaVersion":1,"runId":"run_none","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.001Z","artifactsDir":"/r/d","artifactsDirRealpath":"/r/d","reports":{},"autoMetricsSummary":{"syncRating":null,"captionOverall":null,"proxyScoreOverall":null}}
{"schemaVersion":1,"runId":"run_old","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.002Z","artifactsDir":"/r/o","artifactsDirRealpath":"/r/o","reports":{"sync":"/r/o/sync-report.json"},"autoMetricsSummary":{"syncRating":88,"syncLabel":"Good","maxDriftMs":40,"captionOverall":null,"proxyScoreOverall":null}}
`,
		ExperimentsView: `{"schemaVersion":1,"experimentId":"exp_new","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.003Z","name":"A/B Compare","baselineRunId":"run_new","variants":[{"variantId":"var_1","label":"B","runId":"run_none"}],"status":"queued"}
{"schemaVersion":1,"experimentId":"exp_old","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.004Z","name":"Old","hypothesis":"","topic":"","baselineRunId":"run_old","variants":[],"status":"queued","questions":[]}
{"schemaVersion":1,"experimentId":"exp_new","sessionId":"lab_s","createdAt":"2026-01-01T00:00:00.001Z","name":"A/B Compare","baselineRunId":"run_new","variants":[{"variantId":"var_1","label":"B","runId":"run_none"}],"status":"done","winner":{"variantId":"baseline"},"updatedAt":"2026-01-01T00:00:00.005Z"}
`,
		FeedbackView: `{"schemaVersion":1,"id":"fb_1","createdAt":"2026-01-01T00:00:00.005Z","sessionId":"lab_s","runId":"run_new","experimentId":"exp_new","variantId":"baseline","autoMetricsSnapshot":{"syncRating":73,"captionOverall":56,"proxyScoreOverall":80,"meanDriftMs":12.25,"maxDriftMs":null,"captionCoverageRatio":null,"ocrConfidenceMean":null}}
{"schemaVersion":1,"id":"fb_2","createdAt":"2026-01-01T00:00:00.005Z","sessionId":"lab_s","runId":"run_none","experimentId":"exp_new","variantId":"var_1","autoMetricsSnapshot":{"syncRating":null,"captionOverall":null,"proxyScoreOverall":null}}
{"schemaVersion":1,"id":"fb_old","createdAt":"2026-01-01T00:00:00.006Z","runId":"run_old","autoMetricsSnapshot":{"syncRating":88,"captionOverall":null,"proxyScoreOverall":null,"meanDriftMs":null,"maxDriftMs":null,"captionCoverageRatio":null,"ocrConfidenceMean":null}}
`,
	}
	for view, w := range want {
		b, err := os.ReadFile(filepath.Join(h.Dir, filepath.FromSlash(view)))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != w {
			gl, wl := strings.Split(string(b), "\n"), strings.Split(w, "\n")
			for i := range wl {
				if i >= len(gl) || gl[i] != wl[i] {
					got := ""
					if i < len(gl) {
						got = gl[i]
					}
					t.Errorf("%s line %d:\n got %s\nwant %s", view, i+1, got, wl[i])
				}
			}
		}
	}
}
