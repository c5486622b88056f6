package replay

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// TestTraceSubmitRequest: the trace of a submit's request id lists the
// experiment's creation, the submit with each feedback entry it wrote, and
// a later update of the experiment — and nothing else.
func TestTraceSubmitRequest(t *testing.T) {
	ctx := context.Background()
	exp := events.LabExperiment{SchemaVersion: 1, ExperimentID: "exp_a", SessionID: "lab_s", Name: "n",
		BaselineRunID: "run_1", Variants: []events.Variant{{VariantID: "var_1", Label: "v", RunID: "run_2"}}, Questions: []events.Question{}, Status: "queued"}
	done := exp
	done.Status, done.Winner = "done", &events.Winner{VariantID: "var_1", Reason: "r"}
	later := done
	later.Status = "failed"
	other := exp
	other.ExperimentID = "exp_b"
	evs := []*events.Event{
		events.MustNew("lab_s", &events.LabSessionStarted{SessionID: "lab_s", Pid: 1}),
		events.MustNew("lab_s", &events.RunImported{Run: events.LabRun{SchemaVersion: 1, RunID: "run_1", SessionID: "lab_s"}}).WithRequest("imp-1", "h", json.RawMessage(`{"runId":"run_1"}`)),
		events.MustNew("lab_s", &events.ExperimentCreated{Experiment: exp}).WithRequest("create-1", "h", json.RawMessage(`{"experimentId":"exp_a"}`)),
		events.MustNew("lab_s", &events.ExperimentCreated{Experiment: other}).WithRequest("create-2", "h", json.RawMessage(`{"experimentId":"exp_b"}`)),
		events.MustNew("lab_s", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_0", RunID: "run_1"}}).WithRequest("fb-req", "h", json.RawMessage(`{"feedbackId":"fb_0"}`)),
		events.MustNew("lab_s", &events.ExperimentSubmitted{Experiment: done, Feedback: []events.FeedbackEntry{
			{SchemaVersion: 1, ID: "fb_1", RunID: "run_1", ExperimentID: "exp_a", VariantID: "baseline"},
			{SchemaVersion: 1, ID: "fb_2", RunID: "run_2", ExperimentID: "exp_a", VariantID: "var_1"},
		}}).WithRequest("submit-1", "h", json.RawMessage(`{"experimentId":"exp_a","feedbackIds":["fb_1","fb_2"]}`)),
		events.MustNew("lab_s", &events.ExperimentUpdated{Experiment: later}),
		events.MustNew("lab_s", &events.ExperimentUpdated{Experiment: other}),
	}
	h := liveHome(t, filepath.Join(t.TempDir(), "h"), evs, nil)
	log, err := OpenLog(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Trace(ctx, log, "submit-1")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, hit := range tr.Hits {
		seqs = append(seqs, hit.Event.Seq)
	}
	if !slices.Equal(seqs, []uint64{3, 6, 7}) {
		t.Fatalf("trace seqs %v, want [3 6 7] (create, submit, update)", seqs)
	}
	if !slices.Equal(tr.Related, []string{"exp_a", "fb_1", "fb_2"}) {
		t.Fatalf("related %v", tr.Related)
	}
	want := []string{"req=submit-1", "resp.experimentId=exp_a", "resp.feedbackIds[0]=fb_1", "resp.feedbackIds[1]=fb_2",
		"data.experiment.experimentId=exp_a", "data.feedback[0].experimentId=exp_a", "data.feedback[0].id=fb_1",
		"data.feedback[1].experimentId=exp_a", "data.feedback[1].id=fb_2"}
	if got := tr.Hits[1].Via; !slices.Equal(got, want) {
		t.Fatalf("submit via\n%v\nwant\n%v", got, want)
	}
	if got := strings.Join(tr.Hits[2].Via, " "); got != "data.experiment.experimentId=exp_a" {
		t.Fatalf("update via %q", got)
	}

	// A run id: its import and every event naming it (feedback, experiments).
	tr, err = Trace(ctx, log, "run_2")
	if err != nil {
		t.Fatal(err)
	}
	seqs = seqs[:0]
	for _, hit := range tr.Hits {
		seqs = append(seqs, hit.Event.Seq)
	}
	if !slices.Equal(seqs, []uint64{3, 4, 6, 7, 8}) || len(tr.Related) != 0 {
		t.Fatalf("trace run_2: seqs %v related %v", seqs, tr.Related)
	}
	if _, err := Trace(ctx, log, "nothing"); err == nil {
		t.Fatal("trace of an unknown id succeeded")
	}
}

func TestFilterMatch(t *testing.T) {
	ev := &events.Event{Seq: 10, TS: 5000, Type: "pty.output", Stream: "c1", Req: "r1"}
	tests := []struct {
		name string
		f    Filter
		want bool
	}{
		{"zero", Filter{}, true},
		{"exact type", Filter{Types: []string{"pty.output"}}, true},
		{"other type", Filter{Types: []string{"pty.input"}}, false},
		{"dot prefix", Filter{Types: []string{"pty."}}, true},
		{"star prefix", Filter{Types: []string{"pty.*"}}, true},
		{"no partial word", Filter{Types: []string{"pty.out"}}, false},
		{"any of types", Filter{Types: []string{"step.", "pty.output"}}, true},
		{"stream", Filter{Stream: "c1"}, true},
		{"other stream", Filter{Stream: "c2"}, false},
		{"req", Filter{Req: "r1"}, true},
		{"other req", Filter{Req: "r2"}, false},
		{"seq range", Filter{From: 10, To: 10}, true},
		{"after to", Filter{To: 9}, false},
		{"before from", Filter{From: 11}, false},
		{"since", Filter{Since: msTime(5000)}, true},
		{"since later", Filter{Since: msTime(5001)}, false},
		{"until", Filter{Until: msTime(5000)}, true},
		{"until earlier", Filter{Until: msTime(4999)}, false},
	}
	for _, tc := range tests {
		if got := tc.f.Match(ev); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
