package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/cmhome"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// checkViews fails unless every file of want holds exactly its bytes.
func checkViews(t *testing.T, h home.Home, want map[string][]byte) {
	t.Helper()
	got := cmhome.Snapshot(h.Dir, want)
	files := make([]string, 0, len(want))
	for f := range want {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if !bytes.Equal(got[f], want[f]) {
			t.Errorf("%s after adoption:\n%s\nwant (as content-machine wrote it):\n%s", f, got[f], want[f])
		}
	}
}

// logTypes counts the events of the log of h by type.
func logTypes(t *testing.T, h home.Home) map[string]int {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n[ev.Type]++
	}
	return n
}

func quarantined(t *testing.T, h home.Home) []string {
	t.Helper()
	ents, _ := os.ReadDir(h.QuarantineDir())
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestAdoptContentMachineHome: a home content-machine's Lab wrote (every
// optional field of their records present in one and absent from another,
// unicode, large numbers) is adopted at the first open: the views are
// byte-identical to their files, every line is one event, the report
// names what was taken, their reader still reads the home, the Lab read
// model sees their runs; a re-open adopts nothing again. Before adoption,
// the open moved lab/runs.jsonl and lab/experiments.jsonl to quarantine/.
func TestAdoptContentMachineHome(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	want, err := cmhome.Write(h.Dir, "/srv/cm")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	checkViews(t, h, want)
	rep := e.Adopted()
	if rep == nil {
		t.Fatal("no adoption report")
	}
	wantLines := map[string]int{"lab/runs.jsonl": 3, "lab/experiments.jsonl": 4, "lab/sessions/" + cmhome.Session + "/idempotency.jsonl": 2, "feedback/feedback.jsonl": 3}
	for _, f := range rep.Files {
		if f.Adopted != wantLines[f.File] || f.Lines != f.Adopted || f.SetAside != 0 || f.Earlier != 0 {
			t.Errorf("report for %s: %+v, want %d adopted", f.File, f, wantLines[f.File])
		}
		delete(wantLines, f.File)
	}
	if len(wantLines) > 0 || rep.Events != 12 || rep.Resumed || len(rep.SetAside) != 0 {
		t.Errorf("report %+v; files missing from it: %v", rep, wantLines)
	}
	if s := rep.Summary(); !strings.Contains(s, "3 run(s) (3 line(s) of lab/runs.jsonl), 2 experiment(s) (4 line(s) of lab/experiments.jsonl)") {
		t.Errorf("summary: %s", s)
	}
	if q := quarantined(t, h); len(q) != 0 {
		t.Errorf("quarantine/ holds %v", q)
	}
	onDisk, err := ReadAdoptReport(h)
	if err != nil || onDisk == nil || onDisk.Events != 12 {
		t.Errorf("state/adopted.json: %+v, %v", onDisk, err)
	}
	last := e.Log().LastSeq()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	n := logTypes(t, h)
	if n[events.TypeRunAdopted] != 3 || n[events.TypeExperimentAdopted] != 4 || n[events.TypeSessionAdopted] != 2 || n[events.TypeFeedbackIngested] != 3 {
		t.Errorf("log holds %v", n)
	}
	c, err := cmhome.Read(h.Dir)
	if err != nil {
		t.Fatalf("their reader: %v", err)
	}
	if fmt.Sprint(c.Runs) != fmt.Sprint([]string{cmhome.RunFull, cmhome.RunMin, cmhome.RunBig}) || len(c.Experiments) != 4 || len(c.Feedback) != 3 || len(c.Idempotency) != 2 {
		t.Errorf("their reader read %+v", c)
	}

	// Re-open: nothing adopted again, the views unchanged.
	e, err = Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if e.Adopted() != nil || e.Log().LastSeq() != last {
		t.Errorf("re-open adopted again: %+v, last seq %d → %d", e.Adopted(), last, e.Log().LastSeq())
	}
	checkViews(t, h, want)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// And a rebuild from the log gives the same bytes.
	e, err = Open(context.Background(), Options{Home: h, RebuildViews: true})
	if err != nil {
		t.Fatal(err)
	}
	if rg := e.Regenerated(); rg == nil || len(rg.Changes) != 0 {
		t.Errorf("rebuild changed the views: %+v", rg)
	}
	e.Close()
	checkViews(t, h, want)
}

// TestAdoptParsesTheirRecords: the read model's records of adopted lines
// carry their values (Node's fractional mtimeMs to the nanosecond, the
// metrics keys their summary had).
func TestAdoptParsesTheirRecords(t *testing.T) {
	lines := cmhome.Lines("/srv/cm")
	run, err := events.ParseRun([]byte(lines["lab/runs.jsonl"][0]))
	if err != nil {
		t.Fatal(err)
	}
	v := run.Fingerprint.Video
	if run.RunID != cmhome.RunFull || v.SizeBytes != 123456789 || v.MtimeMs != 1700000000123 || v.MtimeNs != 1700000000123456800 || run.SupersedesRunID != cmhome.RunMin {
		t.Errorf("run %+v video %+v", run, v)
	}
	b, _ := run.AutoMetricsSummary.MarshalJSON()
	if string(b) != `{"syncRating":88,"syncLabel":"good","meanDriftMs":12.25,"maxDriftMs":40,"captionOverall":90,"captionCoverageRatio":0.8,"ocrConfidenceMean":0.95,"proxyScoreOverall":71}` {
		t.Errorf("summary %s", b)
	}
	big, err := events.ParseRun([]byte(lines["lab/runs.jsonl"][2]))
	if err != nil || big.Fingerprint.Video.SizeBytes != 9007199254740991 || big.Fingerprint.Video.MtimeMs != 0 {
		t.Errorf("big: %+v %v", big.Fingerprint.Video, err)
	}
	x, err := events.ParseExperiment([]byte(lines["lab/experiments.jsonl"][3]))
	if err != nil {
		t.Fatal(err)
	}
	xb, _ := x.MarshalJSON()
	if string(xb)+"" != lines["lab/experiments.jsonl"][3] {
		t.Errorf("experiment re-encoded:\n%s\nwant\n%s", xb, lines["lab/experiments.jsonl"][3])
	}
	for _, bad := range []string{`[]`, `{"runId":7}`, `{"schemaVersion":1}`, `not json`, `{"runId":""}`} {
		if _, err := events.ParseRun([]byte(bad)); err == nil {
			t.Errorf("ParseRun(%s) took it", bad)
		}
	}
}

// TestAdoptSetsAsideWhatItCannotRead: corrupt lines, a duplicate run id
// and a torn last line are copied to quarantine/ under their offsets, the
// report lists each, the rest is adopted and the views are their files
// without those lines; an unfinished last feedback line stays in place.
func TestAdoptSetsAsideWhatItCannotRead(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	lines := cmhome.Lines("/srv/cm")
	runs := lines["lab/runs.jsonl"]
	exps := lines["lab/experiments.jsonl"]
	fb := lines["feedback/feedback.jsonl"]
	runsFile := runs[0] + "\n" + "{not json\n" + runs[1] + "\n" + runs[0] + "\n" + runs[2] + "\n"
	expsFile := exps[0] + "\n" + exps[1] + "\n" + `{"schemaVersion":1,"experimentId":"exp_torn","na`
	fbFile := fb[0] + "\n" + "[1,2]\n" + fb[1] + "\n" + fb[0] + "\n" + fb[2] + "\n" + `{"schemaVersion":1,"id":"in-progress"`
	for f, b := range map[string]string{"lab/runs.jsonl": runsFile, "lab/experiments.jsonl": expsFile, "feedback/feedback.jsonl": fbFile} {
		os.MkdirAll(filepath.Dir(filepath.Join(h.Dir, f)), 0o700)
		if err := os.WriteFile(filepath.Join(h.Dir, f), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rep := e.Adopted()
	var aside []string
	for _, s := range rep.SetAside {
		aside = append(aside, s.String())
	}
	o1 := len(runs[0]) + 1
	o3 := o1 + len("{not json\n") + len(runs[1]) + 1
	e2 := len(exps[0]) + len(exps[1]) + 2
	f1 := len(fb[0]) + 1
	f3 := f1 + len("[1,2]\n") + len(fb[1]) + 1
	want := []string{
		fmt.Sprintf("feedback/feedback.jsonl line 2 (byte %d): unreadable, copied to quarantine/feedback_feedback.jsonl-adopted-at-%d.unreadable", f1, f1),
		fmt.Sprintf("feedback/feedback.jsonl line 4 (byte %d): duplicate_id, copied to quarantine/feedback_feedback.jsonl-adopted-at-%d.duplicate_id", f3, f3),
		fmt.Sprintf("lab/experiments.jsonl line 3 (byte %d): unfinished, copied to quarantine/lab_experiments.jsonl-adopted-at-%d.unfinished", e2, e2),
		fmt.Sprintf("lab/runs.jsonl line 2 (byte %d): unreadable, copied to quarantine/lab_runs.jsonl-adopted-at-%d.unreadable", o1, o1),
		fmt.Sprintf("lab/runs.jsonl line 4 (byte %d): duplicate_id, copied to quarantine/lab_runs.jsonl-adopted-at-%d.duplicate_id", o3, o3),
	}
	if strings.Join(aside, "\n") != strings.Join(want, "\n") {
		t.Errorf("set aside:\n%s\nwant:\n%s", strings.Join(aside, "\n"), strings.Join(want, "\n"))
	}
	// Each quarantined copy holds exactly the line; nothing else is there.
	q := quarantined(t, h)
	if len(q) != 5 {
		t.Errorf("quarantine/ holds %v", q)
	}
	if b, _ := os.ReadFile(filepath.Join(h.QuarantineDir(), fmt.Sprintf("lab_runs.jsonl-adopted-at-%d.unreadable", o1))); string(b) != "{not json\n" {
		t.Errorf("quarantined line: %q", b)
	}
	checkViews(t, h, map[string][]byte{
		"lab/runs.jsonl":          []byte(runs[0] + "\n" + runs[1] + "\n" + runs[2] + "\n"),
		"lab/experiments.jsonl":   []byte(exps[0] + "\n" + exps[1] + "\n"),
		"feedback/feedback.jsonl": []byte(fb[0] + "\n" + fb[1] + "\n" + fb[2] + "\n" + `{"schemaVersion":1,"id":"in-progress"`),
	})
	for _, f := range rep.Files {
		if f.File == "feedback/feedback.jsonl" && (f.UnfinishedAt == nil || *f.UnfinishedAt != int64(len(fbFile)-len(`{"schemaVersion":1,"id":"in-progress"`))) {
			t.Errorf("feedback report %+v", f)
		}
	}
}

// TestAdoptLeavesTheLogsOwnLines: a cmlab home whose checkpoint was lost
// is not taken for content-machine's: lines whose ids the log holds are
// its own output, never appended again.
func TestAdoptLeavesTheLogsOwnLines(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	run := events.LabRun{SchemaVersion: 1, RunID: "run_own", SessionID: "lab_s", ArtifactsDir: "/a", ArtifactsDirRealpath: "/a"}
	fbe := events.FeedbackEntry{SchemaVersion: 1, ID: "fb_own", RunID: "run_own"}
	if _, err := e.Append(context.Background(), events.MustNew("lab_s", &events.RunImported{Run: run}), events.MustNew("lab_s", &events.FeedbackSubmitted{Entry: fbe})); err != nil {
		t.Fatal(err)
	}
	e.Close()
	last := logTypes(t, h)
	os.Remove(h.CheckpointFile())
	e, err = Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if rep := e.Adopted(); rep == nil || rep.Events != 0 {
		t.Errorf("adoption report %+v", rep)
	}
	if got := logTypes(t, h); fmt.Sprint(got) != fmt.Sprint(last) {
		t.Errorf("log %v, was %v", got, last)
	}
}

const adoptCrashEnv = "CMLAB_ADOPT_CRASH_CHILD"

// TestAdoptCrashChild is the child of TestAdoptResumesAfterSIGKILL: it
// opens the home with adoption appending two events at a time and
// SIGKILLs itself right after its third append.
func TestAdoptCrashChild(t *testing.T) {
	dir := os.Getenv(adoptCrashEnv)
	if dir == "" {
		t.Skip("only run as the child of TestAdoptResumesAfterSIGKILL")
	}
	Open(context.Background(), Options{Home: home.Home{Dir: dir}, adoptBatch: 2, adoptHook: func(n int) {
		if n == 3 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}})
	os.Exit(5) // never reached: the kill lands first
}

// TestAdoptResumesAfterSIGKILL: a real SIGKILL in the middle of adoption
// (after 6 of its 12 events) leaves the files as content-machine wrote
// them and no checkpoint; the next open adopts the rest, every line
// exactly once, and the views are their files byte for byte.
func TestAdoptResumesAfterSIGKILL(t *testing.T) {
	if os.Getenv(adoptCrashEnv) != "" {
		t.Skip("child")
	}
	h := home.Home{Dir: t.TempDir()}
	want, err := cmhome.Write(h.Dir, "/srv/cm")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAdoptCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), adoptCrashEnv+"="+h.Dir)
	err = cmd.Run()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	n := logTypes(t, h)
	if n[events.TypeRunAdopted] != 3 || n[events.TypeExperimentAdopted] != 3 || n[events.TypeSessionAdopted] != 0 {
		t.Fatalf("after the kill the log holds %v, want the first 6 lines", n)
	}
	if _, err := os.Stat(h.CheckpointFile()); !os.IsNotExist(err) {
		t.Fatalf("a checkpoint after the kill: %v", err)
	}
	checkViews(t, h, want) // untouched by the interrupted pass

	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.Adopted()
	if rep == nil || !rep.Resumed || rep.Events != 6 {
		t.Fatalf("resumed adoption report %+v", rep)
	}
	earlier := 0
	for _, f := range rep.Files {
		earlier += f.Earlier
	}
	if earlier != 6 {
		t.Errorf("report counts %d lines adopted before the kill, want 6: %+v", earlier, rep.Files)
	}
	e.Close()
	checkViews(t, h, want)
	n = logTypes(t, h)
	if n[events.TypeRunAdopted] != 3 || n[events.TypeExperimentAdopted] != 4 || n[events.TypeSessionAdopted] != 2 || n[events.TypeFeedbackIngested] != 3 {
		t.Errorf("log holds %v: a line twice or missing", n)
	}
	if _, err := cmhome.Read(h.Dir); err != nil {
		t.Errorf("their reader: %v", err)
	}
	if q := quarantined(t, h); len(q) != 0 {
		t.Errorf("quarantine/ holds %v", q)
	}
	_ = projections.RunsView
}

// TestAdoptLateLines: lines content-machine's own server appends to an
// adopted home's runs and experiments after cmlab's checkpoint are
// adopted at the next open instead of being cut by the catch-up (before:
// cut back to the checkpoint, silently), while the log's own output past
// the checkpoint (a crash's) is recognised and never adopted; a crash
// before the next checkpoint adopts nothing twice.
func TestAdoptLateLines(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	if _, err := cmhome.Write(h.Dir, "/srv/cm"); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	oldCP, err := os.ReadFile(h.CheckpointFile())
	if err != nil {
		t.Fatal(err)
	}
	// cmlab's own import, then its checkpoint lost (a crash before it).
	e, err = Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	run := events.LabRun{SchemaVersion: 1, RunID: "run_cmlab", SessionID: "lab_s", CreatedAt: "2026-03-01T00:00:00.000Z", ArtifactsDir: "/a", ArtifactsDirRealpath: "/a"}
	if _, err := e.Append(context.Background(), events.MustNew("lab_s", &events.RunImported{Run: run})); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if err := os.WriteFile(h.CheckpointFile(), oldCP, 0o600); err != nil {
		t.Fatal(err)
	}
	// Their server appends a run and an experiment record.
	late := `{"schemaVersion":1,"runId":"run_late","sessionId":"` + cmhome.Session + `","createdAt":"2026-03-02T00:00:00.000Z","topic":"ünï late","artifactsDir":"/l","artifactsDirRealpath":"/l"}`
	lateExp := `{"schemaVersion":1,"experimentId":"exp_late","sessionId":"` + cmhome.Session + `","createdAt":"2026-03-02T00:00:00.000Z","name":"late","baselineRunId":"run_late","variants":[],"status":"queued"}`
	appendTo := func(f, line string) {
		fh, err := os.OpenFile(filepath.Join(h.Dir, f), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(line + "\n")
		fh.Close()
	}
	appendTo("lab/runs.jsonl", late)
	appendTo("lab/experiments.jsonl", lateExp)
	before, _ := os.ReadFile(filepath.Join(h.Dir, "lab/runs.jsonl"))
	if _, err := Open(context.Background(), Options{Home: h, ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "fix: open it once without --read-only") {
		t.Errorf("read-only open with late lines = %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(h.Dir, "lab/runs.jsonl")); !bytes.Equal(got, before) {
		t.Errorf("the refused read-only open changed runs.jsonl:\n%s", got)
	}
	e, err = Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.Adopted()
	if rep == nil || !rep.Late || rep.Events != 2 || rep.Previous == nil || rep.Previous.Events != 12 {
		t.Fatalf("late adoption report %+v", rep)
	}
	e.Close()
	after, _ := os.ReadFile(filepath.Join(h.Dir, "lab/runs.jsonl"))
	if !bytes.Equal(after, before) {
		t.Errorf("runs.jsonl:\n%s\nwant (the file as it was):\n%s", after, before)
	}
	n := logTypes(t, h)
	if n[events.TypeRunAdopted] != 4 || n[events.TypeExperimentAdopted] != 5 || n[events.TypeRunImported] != 1 {
		t.Errorf("log holds %v", n)
	}
	// A crash before the checkpoint covered them: nothing adopted twice.
	if err := os.WriteFile(h.CheckpointFile(), oldCP, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err = Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if e.Adopted() != nil {
		t.Errorf("adopted again: %+v", e.Adopted())
	}
	e.Close()
	if got := logTypes(t, h); fmt.Sprint(got) != fmt.Sprint(n) {
		t.Errorf("log %v, was %v", got, n)
	}
	if after, _ := os.ReadFile(filepath.Join(h.Dir, "lab/runs.jsonl")); !bytes.Equal(after, before) {
		t.Errorf("runs.jsonl after the second open:\n%s", after)
	}
}

// TestAdoptLateTrustsOnlyAVouchedSize: a checkpoint whose size for
// lab/runs.jsonl its own tail checksum, whole-view CRC or line boundary
// does not vouch for (damage, tampering) makes the projector rebuild the
// view from the log, so the bytes past that size are the log's own, not
// another program's late lines. Before, adoptLate took them as late
// lines: a size one byte short of a line's end made the '\n' a blank
// line, adopted into the log as a run.adopted (runs.jsonl then had one
// '\n' more than a rebuild: TestFindingLyingCheckpoint failed when the
// temp dir and timestamps gave the first run line that length); any other
// cut set the log's own lines aside to quarantine/ and wrote a late
// adoption report; a read-only open was refused.
func TestAdoptLateTrustsOnlyAVouchedSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cut  func(firstLine int64) int64 // the lying size of runs.jsonl
	}{
		{"one byte before the end of a line", func(n int64) int64 { return n - 1 }},
		{"mid-line", func(n int64) int64 { return n / 2 }},
		{"on a line boundary, the checksums of another size", func(n int64) int64 { return n }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := home.Home{Dir: t.TempDir()}
			e, err := Open(ctx, Options{Home: h, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"run_a", "run_b"} {
				run := events.LabRun{SchemaVersion: 1, RunID: id, SessionID: "lab_s", CreatedAt: "2026-03-01T00:00:00.000Z", ArtifactsDir: "/a", ArtifactsDirRealpath: "/a"}
				if _, err := e.Append(ctx, events.MustNew("lab_s", &events.RunImported{Run: run})); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			runs := filepath.Join(h.Dir, filepath.FromSlash(projections.RunsView))
			want, err := os.ReadFile(runs)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := projections.ReadCheckpoint(h)
			if err != nil || cp == nil {
				t.Fatalf("checkpoint: %+v %v", cp, err)
			}
			// The lie, re-sealed: only the per-view checks can catch it.
			cp.Views[projections.RunsView] = tc.cut(int64(bytes.IndexByte(want, '\n') + 1))
			cp.Sum = 0
			unsealed, _ := json.Marshal(cp)
			cp.Sum = crc32.Checksum(unsealed, crc32.MakeTable(crc32.Castagnoli))
			lie, _ := json.Marshal(cp)
			if err := os.WriteFile(h.CheckpointFile(), lie, 0o600); err != nil {
				t.Fatal(err)
			}
			types := logTypes(t, h)

			if ro, err := Open(ctx, Options{Home: h, NoSync: true, ReadOnly: true}); err != nil {
				t.Errorf("read-only open: %v", err)
			} else {
				ro.Close()
			}
			e, err = Open(ctx, Options{Home: h, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep := e.Adopted(); rep != nil {
				t.Errorf("adopted: %+v", rep)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if got := logTypes(t, h); fmt.Sprint(got) != fmt.Sprint(types) {
				t.Errorf("log %v, was %v", got, types)
			}
			if q := quarantined(t, h); len(q) != 0 {
				t.Errorf("quarantine/ holds %v", q)
			}
			if got, _ := os.ReadFile(runs); !bytes.Equal(got, want) {
				t.Errorf("runs.jsonl:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

// TestAdoptRefusedReadOnly: a read-only open of a content-machine home
// cannot adopt it and refuses, naming the fix, leaving their files as
// they are (before: the views were regenerated from the empty log and
// their runs and experiments moved to quarantine/).
func TestAdoptRefusedReadOnly(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	want, err := cmhome.Write(h.Dir, "/srv/cm")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Options{Home: h, ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "has not adopted yet") || !strings.Contains(err.Error(), "fix: open it once without --read-only") {
		t.Fatalf("read-only open = %v", err)
	}
	checkViews(t, h, want)
	if q := quarantined(t, h); len(q) != 0 {
		t.Errorf("quarantine/ holds %v", q)
	}
	if _, err := os.Stat(h.CheckpointFile()); !os.IsNotExist(err) {
		t.Errorf("checkpoint after a refused open: %v", err)
	}
}
