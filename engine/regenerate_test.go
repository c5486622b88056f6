package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// feedbackIDs lists the ids of the feedback lines the log produces, in
// order: feedback.submitted entries and feedback.ingested lines.
func feedbackIDs(t *testing.T, h home.Home) []string {
	t.Helper()
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case events.TypeFeedbackSubmitted:
			p, err := events.DecodeAs[*events.FeedbackSubmitted](ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Entry.ID)
		case events.TypeFeedbackIngested:
			p, err := events.DecodeAs[*events.FeedbackIngested](ev)
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ ID string }
			json.Unmarshal(p.Raw, &e)
			out = append(out, "ingested:"+e.ID)
		}
	}
	return out
}

// TestRebuildInPlaceEveryByteFlip is issue 14 §3's test: for every byte of
// a 50-line feedback.jsonl, flipped alone (xor 0x01: it turns an id's
// digit into another line's id, a '"' into '#', '{' into 'z'), an in-place
// rebuild (engine Options.RebuildViews: the code path of `cmlab rebuild`)
// leaves the log exactly as it was — no line ingested, every feedback id
// once — and the view equal to a fresh rebuild; the damaged line goes to
// quarantine/, reported with its offset. A plain open (what `cmlab serve`
// does: the checkpoint's whole-view CRC catches the flip) does the same,
// checked on every serveEvery-th byte. Positions are split between two
// parallel homes.
func TestRebuildInPlaceEveryByteFlip(t *testing.T) {
	ctx := context.Background()
	src := home.Home{Dir: t.TempDir()}
	e, err := Open(ctx, Options{Home: src, NoSync: true, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	// Short lines (about 70 bytes each) keep every position affordable.
	for i := range 50 {
		mustAppend(t, e, events.MustNew("lab_s1", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%02d", i)}}))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(viewPath(src, projections.FeedbackView))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(orig, []byte("\n")); n != 50 {
		t.Fatalf("%d feedback lines", n)
	}
	origCP, err := os.ReadFile(src.CheckpointFile())
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := strings.Join(feedbackIDs(t, src), ",")
	fresh := home.Home{Dir: t.TempDir()}
	r, err := wal.OpenReader(src.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projections.Rebuild(ctx, r.Events(1), fresh, projections.RebuildOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	const parts = 2
	for part := range parts {
		t.Run(fmt.Sprint(part), func(t *testing.T) {
			t.Parallel()
			h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
			if err := os.CopyFS(h.Dir, os.DirFS(src.Dir)); err != nil {
				t.Fatal(err)
			}
			fbPath := viewPath(h, projections.FeedbackView)
			for i := part * rebuildEvery; i < len(orig); i += parts * rebuildEvery {
				for _, rebuild := range []bool{true, false} {
					if !rebuild && i%serveEvery != 0 {
						continue
					}
					where := fmt.Sprintf("byte %d (%q) rebuild=%v", i, orig[i], rebuild)
					damaged := bytes.Clone(orig)
					damaged[i] ^= 0x01
					if err := os.WriteFile(fbPath, damaged, 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(h.CheckpointFile(), origCP, 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.RemoveAll(h.QuarantineDir()); err != nil {
						t.Fatal(err)
					}
					e, err := Open(ctx, Options{Home: h, NoSync: true, RebuildViews: rebuild})
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					rep := e.Regenerated()
					if err := e.Close(); err != nil {
						t.Fatal(err)
					}
					if rep == nil {
						t.Fatalf("%s: the views were not regenerated", where)
					}
					if got := strings.Join(feedbackIDs(t, h), ","); got != wantIDs {
						t.Fatalf("%s: the log's feedback changed:\n%s\nwant\n%s", where, got, wantIDs)
					}
					if d, err := projections.Compare(h, fresh); err != nil || d != nil {
						t.Fatalf("%s: view differs from a fresh rebuild: %v %v", where, d, err)
					}
					// The damaged line(s) are in quarantine/, nothing else.
					start := bytes.LastIndexByte(damaged[:i], '\n') + 1
					var q []byte
					for _, a := range rep.SetAside {
						if a.Reason != projections.SetAsideReplaced {
							t.Fatalf("%s: set aside %+v", where, a)
						}
						b, err := os.ReadFile(filepath.Join(h.Dir, a.Quarantine))
						if err != nil {
							t.Fatal(err)
						}
						q = append(q, b...)
					}
					if len(rep.SetAside) == 0 || rep.SetAside[0].Offset != int64(start) || !bytes.Contains(damaged, q) || !bytes.Contains(q, damaged[start:i+1]) {
						t.Fatalf("%s: set aside %+v holding %q, want the line at %d", where, rep.SetAside, q, start)
					}
					if rep.Foreign != 0 || len(rep.Changes) != 1 || rep.Changes[0].View != projections.FeedbackView || rep.Changes[0].Offset != int64(start) {
						t.Fatalf("%s: foreign %d, changes %+v", where, rep.Foreign, rep.Changes)
					}
				}
			}
		})
	}
}

// A byte flipped anywhere in a view, not only in the last KiB that the
// tail checksum covers, is caught by the checkpoint's whole-view CRC and
// the view rebuilt; a checkpoint written before crcs existed still opens
// without rebuilding anything.
func TestOpenRebuildsViewDamagedAnywhere(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openTest(t, h)
	appendWorkload(t, e, projections.WorkloadEveryType, 7, 600)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil {
		t.Fatal(err)
	}
	if len(cp.CRCs) != len(cp.Tails) || cp.CRCs[projections.RunsView] == 0 {
		t.Fatalf("checkpoint crcs %v, tails %v", cp.CRCs, cp.Tails)
	}
	runs := viewPath(h, projections.RunsView)
	b, err := os.ReadFile(runs)
	if err != nil || len(b) < 3*projections.TailBytes {
		t.Fatalf("runs.jsonl %d bytes (%v)", len(b), err)
	}
	orig := bytes.Clone(b)
	b[10] ^= 0x01
	if err := os.WriteFile(runs, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, h)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(runs); !bytes.Equal(got, orig) {
		t.Fatal("runs.jsonl flipped 10 bytes in was not rebuilt")
	}
	rebuildAndCompare(t, h)

	// An old checkpoint (no crcs; its sum over the rest) is trusted as
	// before: the flip goes unnoticed, nothing is rebuilt.
	raw, err := os.ReadFile(h.CheckpointFile())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "crcs")
	m["sum"] = 0
	noSum, _ := json.Marshal(m)
	var old projections.Checkpoint
	json.Unmarshal(noSum, &old)
	enc, _ := json.Marshal(&old)
	m["sum"] = crc32.Checksum(enc, crc32.MakeTable(crc32.Castagnoli))
	oldCP, _ := json.Marshal(m)
	if err := os.WriteFile(h.CheckpointFile(), oldCP, 0o600); err != nil {
		t.Fatal(err)
	}
	if cp, err := projections.ReadCheckpoint(h); err != nil || cp == nil || cp.CRCs != nil {
		t.Fatalf("old checkpoint: %+v %v", cp, err)
	}
	if err := os.WriteFile(runs, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, h)
	if got, _ := os.ReadFile(runs); !bytes.Equal(got, b) {
		t.Fatal("an old checkpoint's view was rebuilt")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if cp, err := projections.ReadCheckpoint(h); err != nil || cp.CRCs[projections.RunsView] == 0 {
		t.Fatalf("the next checkpoint has no crcs: %+v %v", cp, err)
	}
}

// Legacy ingest takes only JSON-object lines whose id the log does not
// hold: a corrupt line and one repeating a logged id (or an earlier line's
// of the same batch) go to quarantine/, reported with their offsets, and
// are blanked in place (same length: no cursor moves) and ingested blank
// with the reason; the rest is ingested once.
func TestLegacyIngestSetsAsideCorruptAndHeldIDs(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e := openTest(t, h)
	defer e.Close()
	mustAppend(t, e, feedbackEvent("fb_1"))
	end := int64(len(readView(t, h, projections.FeedbackView)))
	corrupt := "{\"id\":\"cm_1\"\n"
	dup := `{"id":"fb_1","notes":"again"}` + "\n"
	good := `{"id":"cm_2"}` + "\n"
	dupGood := `{"id":"cm_2","second":true}` + "\n"
	appendBytes(t, h, projections.FeedbackView, corrupt+dup+good+dupGood)
	if err := e.IngestFeedback(ctx); err != nil {
		t.Fatal(err)
	}
	blank := func(line string) string { return strings.Repeat(" ", len(line)-1) }
	if got := ingested(t, h); len(got) != 4 || got[0] != blank(corrupt) || got[1] != blank(dup) || got[2] != `{"id":"cm_2"}` || got[3] != blank(dupGood) {
		t.Fatalf("ingested %q", got)
	}
	aside := e.FeedbackSetAside()
	wantAt := []int64{end, end + int64(len(corrupt)), end + int64(len(corrupt+dup+good))}
	wantWhy := []string{projections.SetAsideCorrupt, projections.SetAsideDuplicate, projections.SetAsideDuplicate}
	wantLine := []string{corrupt, dup, dupGood}
	if len(aside) != 3 {
		t.Fatalf("set aside %+v", aside)
	}
	for i, a := range aside {
		q, err := os.ReadFile(filepath.Join(h.Dir, a.Quarantine))
		if a.Offset != wantAt[i] || a.Reason != wantWhy[i] || err != nil || string(q) != wantLine[i] {
			t.Fatalf("set aside %d: %+v holding %q (%v), want %s at %d holding %q", i, a, q, err, wantWhy[i], wantAt[i], wantLine[i])
		}
	}
	if fb := string(readView(t, h, projections.FeedbackView)); fb[end:] != blank(corrupt)+"\n"+blank(dup)+"\n"+good+blank(dupGood)+"\n" {
		t.Fatalf("feedback.jsonl:\n%s", fb)
	}
	mustAppend(t, e, feedbackEvent("fb_2"))
	rebuildAndCompare(t, h)
}

// A catch-up that finds, past the checkpoint where its own lines belong,
// one of them damaged (a flipped byte in a line the checkpoint does not
// cover yet) regenerates the views instead of adopting that line and the
// lines after it as another program's: nothing is ingested twice.
func TestCatchUpDamagedOwnLinePastCheckpoint(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e := openTest(t, h)
	cp, fb := crashPastCheckpoint(t, e, h, "fb_2", "fb_3")
	damaged := bytes.Clone(fb)
	at := int(cp.Views[projections.FeedbackView]) + 3
	damaged[at] ^= 0x01
	if err := os.WriteFile(viewPath(h, projections.FeedbackView), damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if e.Regenerated() == nil || len(e.Regenerated().SetAside) != 1 {
		t.Fatalf("regenerated %+v", e.Regenerated())
	}
	if got := ingested(t, h); len(got) != 0 {
		t.Fatalf("own lines ingested as foreign: %q", got)
	}
	if got := readView(t, h, projections.FeedbackView); !bytes.Equal(got, fb) {
		t.Fatalf("feedback.jsonl:\n%s\nwant\n%s", got, fb)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rebuildAndCompare(t, h)
}

// An in-place rebuild of a feedback.jsonl holding, inside the checkpointed
// bytes, a damaged line and, past them, lines of another program (one new,
// one corrupt, one repeating a logged id, and an unfinished one): the new
// line is kept and ingested once, the corrupt and duplicate ones and the
// damaged line are quarantined with their offsets, the unfinished line
// stays last, untouched, and a second rebuild changes nothing.
func TestRebuildInPlaceKeepsForeignLines(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	ctx := context.Background()
	e := openTest(t, h)
	for i := range 5 {
		mustAppend(t, e, feedbackEvent(fmt.Sprintf("fb_%d", i)))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	fb := readView(t, h, projections.FeedbackView)
	end := int64(len(fb))
	damaged := bytes.Clone(fb)
	at := bytes.Index(damaged, []byte(`"fb_2"`)) + 4
	damaged[at] ^= 0x01 // fb_2 → fb_3
	good, corrupt, dup, partial := `{"id":"cm_1"}`+"\n", "cm_2 not json\n", `{"id":"fb_4"}`+"\n", `{"id":"cm_3"`
	if err := os.WriteFile(viewPath(h, projections.FeedbackView), append(damaged, good+corrupt+dup+partial...), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, Options{Home: h, RebuildViews: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.Regenerated()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	start := int64(bytes.LastIndexByte(damaged[:at], '\n') + 1)
	type aside struct {
		off    int64
		reason string
	}
	var got []aside
	for _, a := range rep.SetAside {
		got = append(got, aside{a.Offset, a.Reason})
	}
	want := []aside{{start, projections.SetAsideReplaced}, {end + int64(len(good)), projections.SetAsideCorrupt}, {end + int64(len(good+corrupt)), projections.SetAsideDuplicate}}
	if fmt.Sprint(got) != fmt.Sprint(want) || rep.Foreign != 1 {
		t.Fatalf("set aside %v, want %v; foreign %d", got, want, rep.Foreign)
	}
	if got := ingested(t, h); len(got) != 1 || got[0] != `{"id":"cm_1"}` {
		t.Fatalf("ingested %q", got)
	}
	if got := string(readView(t, h, projections.FeedbackView)); got != string(fb)+good+partial {
		t.Fatalf("feedback.jsonl:\n%s", got)
	}
	rebuildAndCompare(t, h)
	e, err = Open(ctx, Options{Home: h, RebuildViews: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep := e.Regenerated(); len(rep.Changes) != 0 || len(rep.SetAside) != 0 || rep.Foreign != 0 {
		t.Fatalf("second rebuild: %+v", rep)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ingested(t, h); len(got) != 1 {
		t.Fatalf("ingested %q", got)
	}
}
