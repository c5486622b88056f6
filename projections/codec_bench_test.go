package projections

import (
	"testing"

	"github.com/cmlab/cmlab/events"
)

// BenchmarkDecodePayload measures the fast payload decoder alone over the
// rebuild benchmark's mixed Lab events (the reflective fallback included
// for the types it does not take).
func BenchmarkDecodePayload(b *testing.B) {
	var evs []*events.Event
	for ev := range Workload(WorkloadMixedLab, 1, 5000) {
		evs = append(evs, ev)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, ev := range evs {
			if _, err := decodePayload(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEncodeLabRecords measures the hand-written JSON encoders of the
// feedback, run and experiment records over the same events.
func BenchmarkEncodeLabRecords(b *testing.B) {
	var ps []events.Payload
	for ev := range Workload(WorkloadMixedLab, 1, 5000) {
		p, err := ev.Decode()
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		for _, p := range ps {
			var err error
			switch p := p.(type) {
			case *events.FeedbackSubmitted:
				buf, err = appendFeedbackEntry(buf[:0], &p.Entry)
			case *events.RunImported:
				buf, err = appendLabRun(buf[:0], &p.Run)
			case *events.ExperimentCreated:
				buf, err = appendLabExperiment(buf[:0], &p.Experiment)
			case *events.ExperimentSubmitted:
				buf, err = appendLabExperiment(buf[:0], &p.Experiment)
				for j := range p.Feedback {
					buf, err = appendFeedbackEntry(buf, &p.Feedback[j])
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(buf)
		}
		b.SetBytes(int64(n))
	}
}

// TestEncodersKeepTheRecordOnTheStack: a rebuild encodes a copy of each
// record (its times filled in); the table encoder must not make that copy
// escape to the heap (it did when reflect saw a field's address: one
// allocation more per record).
func TestEncodersKeepTheRecordOnTheStack(t *testing.T) {
	one := 1
	e := events.FeedbackEntry{SchemaVersion: 1, ID: "fb_1", RunID: "run_1", Ratings: &events.Ratings{Overall: &one},
		Tags: []string{"a"}, Reports: &events.FeedbackReports{ScorePath: "s"}}
	r := events.LabRun{RunID: "run_1", Fingerprint: &events.RunFingerprint{Video: &events.FileStat{Path: "v"}}}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		x, y := e, r
		buf, _ = appendFeedbackEntry(buf[:0], &x)
		buf, _ = appendLabRun(buf[:0], &y)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record pair, want 0", allocs)
	}
}
