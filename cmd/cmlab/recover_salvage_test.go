package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// recDamagedHome writes 60 events over several small segments and flips
// one byte in the middle of the first segment (not a torn tail). It
// returns the home and the damaged segment's name.
func recDamagedHome(t *testing.T) (home.Home, string) {
	t.Helper()
	h, _ := smallSegmentHome(t)
	ents, err := os.ReadDir(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range ents {
		if len(e.Name()) == 20 && strings.Trim(e.Name(), "0123456789") == "" {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	if len(segs) < 3 {
		t.Fatalf("only %d segments", len(segs))
	}
	p := filepath.Join(h.WALDir(), segs[0])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xFF
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return h, segs[0]
}

func TestRecoverCorruptionExit3(t *testing.T) {
	h, seg := recDamagedHome(t)
	code, out, errOut := cli(t, "recover", "--home", h.Dir)
	if code != exitCorrupt || !strings.Contains(errOut, "segment "+seg+" offset") || !strings.Contains(errOut, "seq 5") ||
		!strings.Contains(errOut, "1 damaged place(s)") || !strings.Contains(errOut, "--salvage --apply") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestRecoverSalvage: --salvage --apply keeps every other event, lists the
// lost seq, leaves the damaged bytes in quarantine/ and a placeholder at
// the lost seq; the log opens again.
func TestRecoverSalvage(t *testing.T) {
	h, _ := recDamagedHome(t)
	code, out, errOut := cli(t, "recover", "--salvage", "--apply", "--json", "--home", h.Dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var plan struct {
		Salvaged []struct {
			Seq   uint64 `json:"seq"`
			Where string `json:"where"`
		} `json:"salvaged"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Salvaged) != 1 || plan.Salvaged[0].Seq != 5 || !strings.Contains(plan.Salvaged[0].Where, "quarantine/") {
		t.Fatalf("salvaged %+v (%v)\n%s", plan.Salvaged, err, out)
	}
	q, err := os.ReadDir(h.QuarantineDir())
	if err != nil || len(q) == 0 {
		t.Fatalf("quarantine: %v %v", q, err)
	}
	var qbytes int
	for _, e := range q {
		b, _ := os.ReadFile(filepath.Join(h.QuarantineDir(), e.Name()))
		qbytes += len(b)
	}
	if qbytes == 0 {
		t.Fatal("quarantined bytes are empty")
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := 0
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case ev.Seq == 5:
			p, err := events.DecodeAs[*events.WalSalvaged](ev)
			if err != nil || p.LostSeq != 5 {
				t.Fatalf("seq 5 = %s %+v %v", ev.Type, p, err)
			}
		case ev.Type != events.TypeRecoveryApplied:
			t.Fatalf("seq %d is %s", ev.Seq, ev.Type)
		default:
			p, err := events.DecodeAs[*events.RecoveryApplied](ev)
			if err != nil || p.Decisions[0].Reason != strings.Repeat("x", 100)+string(rune('a'+(ev.Seq-1)%26)) {
				t.Fatalf("seq %d altered: %+v %v", ev.Seq, p, err)
			}
		}
	}
	if n != 60 {
		t.Fatalf("%d events after salvage, want 60", n)
	}
	eng.Close()
	if code, _, errOut := cli(t, "recover", "--home", h.Dir); code != 0 {
		t.Fatalf("recover after salvage: exit %d %s", code, errOut)
	}
}

// salvageFeedbackHome posts 300 feedback entries (each with a request id,
// so three views: feedback.jsonl, the session's events and idempotency
// map) over several 16 KiB segments, closes the home, and flips one byte
// inside an entry in the middle of a middle segment. It returns the home
// and feedback.jsonl as it was.
func salvageFeedbackHome(t *testing.T) (home.Home, []byte) {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		ev := events.MustNew("lab_s1", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: fmt.Sprintf("fb_%04d", i), SessionID: "lab_s1", Notes: strings.Repeat("n", 40)}})
		ev.Req = fmt.Sprintf("req_%04d", i)
		if _, err := eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	fb, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	segs := walEdgeSegments(t, h.WALDir())
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	p := filepath.Join(h.WALDir(), segs[len(segs)/2])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xFF
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return h, fb
}

// checkViewsFollowLog asserts what must hold right after a salvage (or
// the recovery finishing an interrupted one): rebuild --check, replay
// --check and wal verify all pass, and feedback ids are unique.
func checkViewsFollowLog(t *testing.T, h home.Home) {
	t.Helper()
	for _, args := range [][]string{{"rebuild", "--check"}, {"replay", "--check"}, {"wal", "verify"}} {
		if code, out, errs := cli(t, append(args, "--home", h.Dir)...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	fb, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(string(fb)) {
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.ID == "" || seen[e.ID] {
			t.Fatalf("feedback line %q: id %q (%v), seen before: %v", line, e.ID, err, seen[e.ID])
		}
		seen[e.ID] = true
	}
}

// lostFeedbackLine is the one line of before that after lacks (by content).
func lostFeedbackLine(t *testing.T, before, after []byte) (line string, offset int64) {
	t.Helper()
	have := map[string]bool{}
	for l := range strings.Lines(string(after)) {
		have[l] = true
	}
	var lost []string
	var off int64
	for l := range strings.Lines(string(before)) {
		if !have[l] {
			lost = append(lost, l)
			offset = off
		}
		off += int64(len(l))
	}
	if len(lost) != 1 {
		t.Fatalf("%d feedback lines lost, want 1: %q", len(lost), lost)
	}
	return lost[0], offset
}

// TestSalvageRegeneratesViews is the repro of issue 14 §2: after recover
// --salvage --apply, rebuild --check, replay --check and wal verify pass;
// the report names each changed view, its first changed line and the
// offset past which cursors are invalid, and the lost entry's feedback
// line is kept in quarantine/; a cursor past the new end of feedback.jsonl
// is INVALID_CURSOR (seed 000 rule 7).
func TestSalvageRegeneratesViews(t *testing.T) {
	h, before := salvageFeedbackHome(t)
	code, out, errs := cli(t, "recover", "--salvage", "--apply", "--json", "--home", h.Dir)
	if code != 0 {
		t.Fatalf("recover --salvage --apply: exit %d\n%s%s", code, out, errs)
	}
	var rep struct {
		Salvaged []struct {
			Seq uint64 `json:"seq"`
		} `json:"salvaged"`
		Views projections.RegenerateReport `json:"views"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Salvaged) != 1 {
		t.Fatalf("salvaged %+v", rep.Salvaged)
	}
	lostSeq := rep.Salvaged[0].Seq
	checkViewsFollowLog(t, h)

	after, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	line, off := lostFeedbackLine(t, before, after)
	if want := fmt.Sprintf(`"id":"fb_%04d"`, lostSeq-1); !strings.Contains(line, want) {
		t.Fatalf("lost line %q is not seq %d's %s", line, lostSeq, want)
	}
	if len(after) != len(before)-len(line) {
		t.Fatalf("feedback.jsonl %d bytes, want %d", len(after), len(before)-len(line))
	}
	views := map[string]projections.ViewChange{}
	for _, c := range rep.Views.Changes {
		views[c.View] = c
	}
	fc := views[projections.FeedbackView]
	if len(views) != 3 || fc.Offset != off || fc.FirstLine != int(lostSeq) || fc.Removed != 1 || fc.Added != 0 ||
		fc.OldSize != int64(len(before)) || fc.NewSize != int64(len(after)) {
		t.Fatalf("changes %+v; want 3 views, feedback from line %d at %d, 1 removed", rep.Views.Changes, lostSeq, off)
	}
	for _, v := range []string{"lab/sessions/lab_s1/events.jsonl", "lab/sessions/lab_s1/idempotency.jsonl"} {
		c, ok := views[v]
		if !ok || c.FirstLine != int(lostSeq) || c.Removed != 1 || c.Added != 0 || c.Quarantine == "" {
			t.Fatalf("%s: %+v", v, c)
		}
		q, err := os.ReadFile(filepath.Join(h.Dir, c.Quarantine))
		if err != nil || strings.Count(string(q), "\n") != 1 || !strings.Contains(string(q), fmt.Sprintf("req_%04d", lostSeq-1)) {
			t.Fatalf("%s: quarantined %q %v", v, q, err)
		}
	}
	if len(rep.Views.SetAside) != 1 || rep.Views.SetAside[0].Offset != off || rep.Views.SetAside[0].Reason != projections.SetAsideReplaced {
		t.Fatalf("set aside %+v", rep.Views.SetAside)
	}
	if q, err := os.ReadFile(filepath.Join(h.Dir, rep.Views.SetAside[0].Quarantine)); err != nil || string(q) != line {
		t.Fatalf("quarantined feedback line %q %v, want %q", q, err, line)
	}
	// The text report says the same.
	h2, _ := salvageFeedbackHome(t)
	code, out, errs = cli(t, "recover", "--salvage", "--apply", "--home", h2.Dir)
	wantText := fmt.Sprintf("feedback/feedback.jsonl: 1 line(s) removed, 0 added, first at line %d (byte %d); cursors past byte %d are invalid", lostSeq, off, off)
	if code != 0 || !strings.Contains(out, "3 view file(s) changed") || !strings.Contains(out, wantText) ||
		!strings.Contains(out, fmt.Sprintf("feedback/feedback.jsonl line %d (byte %d): replaced, moved to quarantine/", lostSeq, off)) {
		t.Fatalf("text report: exit %d, want %q\n%s%s", code, wantText, out, errs)
	}

	// Cursors: one past the new end is INVALID_CURSOR; the new end is fine.
	code, out, errs = cli(t, "feedback", "poll", "--since", fmt.Sprint(len(before)), "--json", "--home", h.Dir)
	if code == 0 || !strings.Contains(out+errs, "INVALID_CURSOR") {
		t.Fatalf("poll past the new end: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cli(t, "feedback", "poll", "--since", fmt.Sprint(len(after)), "--json", "--home", h.Dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"nextCursor": "%d"`, len(after))) {
		t.Fatalf("poll at the new end: exit %d\n%s%s", code, out, errs)
	}
}

// The salvage child (TestSalvageSwapChild) salvages the home named by
// salvageChildHome and SIGKILLs itself at point salvageChildKill: 0 right
// after the log was rewritten (views not regenerated yet), k > 0 right
// after the k-th rename of the view swap (the last one is the checkpoint).
const (
	salvageChildKill = "CMLAB_TEST_SALVAGE_KILL"
	salvageChildHome = "CMLAB_TEST_SALVAGE_HOME"
)

// TestSalvageSwapChild is not a test: it is the process that
// TestSalvageKilledMidSwap kills. It does what recover --salvage --apply
// does (salvageLog, then the view regeneration under the log's lock) with
// a kill at the chosen point.
func TestSalvageSwapChild(t *testing.T) {
	if os.Getenv(salvageChildKill) == "" {
		t.Skip("helper process for TestSalvageKilledMidSwap")
	}
	kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	h := home.Home{Dir: os.Getenv(salvageChildHome)}
	k, _ := strconv.Atoi(os.Getenv(salvageChildKill))
	if _, rewritten, err := salvageLog(h); err != nil || !rewritten {
		fmt.Fprintln(os.Stderr, "salvage:", rewritten, err)
		os.Exit(2)
	}
	if k == 0 {
		kill()
	}
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := 0
	_, err = projections.Regenerate(context.Background(), l.Events(1), h, projections.RegenerateOptions{UpTo: l.LastSeq(), AfterSwap: func(string) {
		if n++; n == k {
			kill()
		}
	}})
	fmt.Fprintln(os.Stderr, "not killed:", err)
	os.Exit(3)
}

// TestSalvageKilledMidSwap kills a salvage after the log was rewritten
// and after each rename of the view swap; each time the next `cmlab
// recover` (no --salvage) leaves the views equal to the log and
// feedback.jsonl byte-identical to an uninterrupted salvage's.
func TestSalvageKilledMidSwap(t *testing.T) {
	damaged, _ := salvageFeedbackHome(t)
	ref := filepath.Join(t.TempDir(), "ref")
	if err := os.CopyFS(ref, os.DirFS(damaged.Dir)); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cli(t, "recover", "--salvage", "--apply", "--home", ref); code != 0 {
		t.Fatalf("reference salvage: exit %d\n%s%s", code, out, errs)
	}
	want, err := os.ReadFile(filepath.Join(ref, projections.FeedbackView))
	if err != nil {
		t.Fatal(err)
	}
	// 3 views, then the checkpoint: kill points 0..4.
	for k := 0; k <= 4; k++ {
		dir := filepath.Join(t.TempDir(), "home")
		if err := os.CopyFS(dir, os.DirFS(damaged.Dir)); err != nil {
			t.Fatal(err)
		}
		h := home.Home{Dir: dir}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSalvageSwapChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", salvageChildKill, k), salvageChildHome+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("kill point %d: child ended with %v, want SIGKILL\n%s", k, err, stderr.String())
		}
		_, markerErr := os.Stat(filepath.Join(dir, "state", "regen.json"))
		if (k > 0) != (markerErr == nil) {
			t.Fatalf("kill point %d: swap marker present = %v", k, markerErr == nil)
		}
		if !projections.ViewsStale(h) {
			t.Fatalf("kill point %d: views not marked stale", k)
		}
		code, out, errs := cli(t, "recover", "--home", dir)
		if code != 0 {
			t.Fatalf("kill point %d: recover: exit %d\n%s%s", k, code, out, errs)
		}
		if projections.ViewsStale(h) {
			t.Fatalf("kill point %d: views still marked stale after recover", k)
		}
		if _, err := os.Stat(filepath.Join(dir, "state", "regen")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("kill point %d: state/regen left behind: %v", k, err)
		}
		checkViewsFollowLog(t, h)
		got, err := os.ReadFile(h.FeedbackFile())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("kill point %d: feedback.jsonl differs from an uninterrupted salvage's (%v)", k, err)
		}
	}
}

// smallSegmentHome writes 60 events of about 150 bytes over 2 KiB
// segments, closes the engine cleanly (the checkpoint covers them all) and
// returns the home and its last seq.
func smallSegmentHome(t *testing.T) (home.Home, uint64) {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h, SegmentSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		ev := events.MustNew("recovery", &events.RecoveryApplied{Decisions: []events.RecoveryDecision{{Action: "none", Reason: strings.Repeat("x", 100) + string(rune('a'+i%26))}}})
		if _, err := eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	last := eng.Log().LastSeq()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return h, last
}
