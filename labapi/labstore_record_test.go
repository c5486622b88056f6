package labapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/events"
)

// genRun is a run with a random subset of its fields set (createdAt often
// empty: filled from the event's ts).
func genRun(r *rand.Rand, i int) events.LabRun {
	s := func(p string) string {
		if r.IntN(3) == 0 {
			return ""
		}
		return fmt.Sprintf("%s%d%s", p, r.IntN(1000), strings.Repeat("é", r.IntN(3)))
	}
	ip := func() *int {
		if r.IntN(2) == 0 {
			return nil
		}
		v := r.IntN(201) - 100
		return &v
	}
	fp := func() *float64 {
		if r.IntN(2) == 0 {
			return nil
		}
		v := r.NormFloat64() * 1e3
		return &v
	}
	run := events.LabRun{SchemaVersion: r.IntN(3), RunID: fmt.Sprintf("run_%d", i), SessionID: s("lab_"), CreatedAt: s("2026-03-0"),
		Topic: s("topic "), ArtifactsDir: s("/out/"), ArtifactsDirRealpath: s("/real/"), SupersedesRunID: s("run_"), VideoPath: s("/v/")}
	if r.IntN(2) == 0 {
		run.Fingerprint = &events.RunFingerprint{Video: &events.FileStat{Path: s("v"), SizeBytes: r.Int64N(1 << 40), MtimeMs: r.Int64(), MtimeNs: r.Int64N(3) * r.Int64()}}
		if r.IntN(2) == 0 {
			run.Fingerprint.Script = &events.FileStat{SizeBytes: -1}
		}
	}
	if r.IntN(3) == 0 {
		run.Reports = &events.RunReports{SyncReportPath: s("s"), Caption: s("c")}
	}
	if r.IntN(2) == 0 {
		run.AutoMetricsSummary = &events.AutoMetricsSummary{SyncRating: ip(), SyncLabel: s("l"), MeanDriftMs: fp(), CaptionOverall: ip(),
			OcrConfidenceMean: fp(), ProxyScoreOverall: ip()}
		if r.IntN(2) == 0 {
			run.AutoMetricsSummary.Read = &events.MetricsRead{Sync: r.IntN(2) == 0, Caption: r.IntN(2) == 0}
		}
	}
	return run
}

// genExperiment is an experiment with a random subset of its fields set
// (nil and empty lists alike; createdAt and updatedAt often empty).
func genExperiment(r *rand.Rand, i int) events.LabExperiment {
	s := func(p string) string {
		if r.IntN(3) == 0 {
			return ""
		}
		return fmt.Sprintf("%s%d", p, r.IntN(1000))
	}
	x := events.LabExperiment{SchemaVersion: 1, ExperimentID: fmt.Sprintf("exp_%d", i), SessionID: s("lab_"), CreatedAt: s("2026-03-0"),
		Name: s("name "), Hypothesis: s("h"), Topic: s("t"), BaselineRunID: s("run_"), Status: s("queued"), UpdatedAt: s("2026-04-0"),
		Sparse: r.IntN(2) == 0}
	switch r.IntN(3) {
	case 0:
		x.Variants = []events.Variant{}
	case 1:
		for range r.IntN(4) + 1 {
			x.Variants = append(x.Variants, events.Variant{VariantID: s("v"), Label: s("B"), RunID: s("run_")})
		}
	}
	switch r.IntN(3) {
	case 0:
		x.Questions = []events.Question{}
	case 1:
		x.Questions = []events.Question{{ID: "q1", Prompt: s("p"), Type: "text"}}
	}
	if r.IntN(2) == 0 {
		x.Winner = &events.Winner{VariantID: s("v"), Reason: s("r")}
	}
	if r.IntN(2) == 0 {
		x.Answers = json.RawMessage(fmt.Sprintf(`{"q1":"%d"}`, r.IntN(10)))
	}
	return x
}

// TestLabRecordCodec: over generated records of every kind of event the
// store reads, a record written by the store and read back is the record
// the heap model (labstore_ref_test.go) keeps for that event, field for
// field and in its JSON bytes; the build takes the record's bytes from
// the payload (no encode) wherever the event is of the current version.
func TestLabRecordCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	raw := 0
	for i := range 3000 {
		var p events.Payload
		switch k := i % 6; k {
		case 0:
			p = &events.RunImported{Run: genRun(r, i)}
		case 1:
			p = &events.ExperimentCreated{Experiment: genExperiment(r, i)}
		case 2:
			p = &events.ExperimentSubmitted{Experiment: genExperiment(r, i),
				Feedback: []events.FeedbackEntry{{SchemaVersion: 1, ID: fmt.Sprint("fb_", i), Notes: "n"}}}
		case 3:
			p = &events.ExperimentUpdated{Experiment: genExperiment(r, i)}
		case 4:
			line, err := json.Marshal(genRun(r, i))
			if err != nil {
				t.Fatal(err)
			}
			p = &events.RunAdopted{Raw: line}
		case 5:
			line, err := json.Marshal(genExperiment(r, i))
			if err != nil {
				t.Fatal(err)
			}
			p = &events.ExperimentAdopted{Raw: line}
		}
		ev := events.MustNew("lab_g", p)
		ev.TS = r.Int64N(4e12)
		want := newRefLabState()
		want.Observe(ev)

		op := labOpOf(ev)
		if op == nil {
			if len(want.runs)+len(want.exps) != 0 {
				t.Fatalf("event %d (%s): no change, the heap model has one", i, ev.Type)
			}
			continue
		}
		if op.body != nil {
			raw++
		}
		var got, wantRec, rec any
		switch {
		case op.run != nil:
			got, wantRec, rec = &events.LabRun{}, want.runs[op.run.RunID], op.run
		default:
			got, wantRec, rec = &events.LabExperiment{}, want.exps[op.exp.ExperimentID], op.exp
		}
		k := []byte("key")
		v, err := lsRecordValue(k, op, rec)
		if err != nil {
			t.Fatal(err)
		}
		body, err := lsValue(k, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeRecord(body, got); err != nil {
			t.Fatalf("event %d (%s): %v", i, ev.Type, err)
		}
		if !reflect.DeepEqual(got, wantRec) || !reflect.DeepEqual(rec, wantRec) {
			t.Fatalf("event %d (%s):\n read %+v\n kept %+v\n want %+v", i, ev.Type, got, rec, wantRec)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(wantRec)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("event %d (%s): JSON\n got %s\nwant %s", i, ev.Type, gj, wj)
		}
	}
	if raw < 1500 {
		t.Fatalf("only %d of 3000 records taken from their payload's bytes", raw)
	}
}

// TestLabRecordRefusesAForeignValue: a value without a record head (as
// format 1 stored them) or with unknown fill bits is an error, never a
// record read wrong.
func TestLabRecordRefusesAForeignValue(t *testing.T) {
	v1, err := events.Marshal(events.LabRun{RunID: "run_1", CreatedAt: "2026-01-01T00:00:00.000Z"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]byte{v1, {}, {lsFillCreated, 0, 0}, append([]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0}, v1...)} {
		var run events.LabRun
		if err := decodeRecord(v, &run); err == nil {
			t.Errorf("% x read as %+v", v, run)
		}
	}
}

// TestLabStoreOfFormat1IsRebuilt: a store written by the previous format
// (records as the store encoded them, no head; format cmlab-labstore-1) is
// rebuilt from the log at open, not read, and answers as the log says.
func TestLabStoreOfFormat1IsRebuilt(t *testing.T) {
	h := storedHome(t)
	editStore(t, LabStoreFile(h), func(meta *bolt.Bucket) error {
		tx := meta.Tx()
		for _, idx := range [][]byte{lsRunIdx, lsExpIdx} {
			b := tx.Bucket(idx)
			var keys, vals [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				body, err := lsValue(k, v)
				if err != nil {
					return err
				}
				var rec any = &events.LabRun{}
				if bytes.Equal(idx, lsExpIdx) {
					rec = &events.LabExperiment{}
				}
				if err := decodeRecord(body, rec); err != nil {
					return err
				}
				old, err := events.Marshal(rec)
				keys, vals = append(keys, bytes.Clone(k)), append(vals, old)
				return err
			}); err != nil {
				return err
			}
			for i := range keys {
				if err := lsPut(b, keys[i], vals[i]); err != nil {
					return err
				}
			}
		}
		return lsPut(meta, lsKeyFormat, []byte("cmlab-labstore-1"))
	})
	var logs bytes.Buffer
	srv, eng := openServer(t, h, &logs)
	defer eng.Close()
	defer srv.Close()
	if why := srv.lab.Rebuilt(); !strings.Contains(why, `format "cmlab-labstore-1"`) {
		t.Fatalf("Rebuilt: %q", why)
	}
	sameLabState(t, srv, fullReplay(t, eng))
	if _, err := os.Stat(LabStoreFile(h)); err != nil {
		t.Fatal(err)
	}
}
