package wal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/internal/crashchild"
)

// The compaction crash test re-executes this test binary as a child that
// appends with four appenders (recording every acknowledged seq in a side
// file) and compacts meanwhile; a CompactOptions.Hook makes the child
// SIGKILL itself at the chosen phase. The parent then checks the log:
// verify clean, Open works and finishes the compaction, the first
// retained seq is the old one (killed before the manifest) or the new
// one (after), and no acknowledged seq is missing.

const (
	envCompactDir     = "CMLAB_WAL_COMPACT_DIR"
	envCompactKill    = "CMLAB_WAL_COMPACT_KILL"    // phase:k, or "none"
	envCompactArchive = "CMLAB_WAL_COMPACT_ARCHIVE" // archive directory, "" deletes
	compactBefore     = 25
)

// TestCompactCrashChild is the child's body; it does nothing in a normal run.
func TestCompactCrashChild(t *testing.T) {
	home := crashchild.Role(t, envCompactDir, "TestCompactCrashAtEveryPhase")
	phase, kText, _ := strings.Cut(os.Getenv(envCompactKill), ":")
	k, _ := strconv.Atoi(kText)
	l, err := Open(Options{Dir: filepath.Join(home, "wal"), SegmentSize: 1024, Now: fixedNow})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	side, err := os.OpenFile(filepath.Join(home, "acked"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(2)
	}
	var mu sync.Mutex
	acked := make(chan struct{}, 1024)
	for w := 0; w < 4; w++ {
		go func() {
			for i := 0; ; i++ {
				ev := crashEvent(9, w, i)
				seqs, err := l.Append(context.Background(), ev)
				if err != nil {
					return
				}
				mu.Lock()
				fmt.Fprintf(side, "%d %s\n", seqs[0], ev.ID)
				mu.Unlock()
				select {
				case acked <- struct{}{}:
				default:
				}
			}
		}()
	}
	for range 20 { // compaction runs beside appends
		<-acked
	}
	seen := map[CompactPhase]int{}
	_, err = l.Compact(context.Background(), CompactOptions{Before: compactBefore, Archive: os.Getenv(envCompactArchive), Now: fixedNow, HomeID: "crash-home",
		Hook: func(p CompactPhase, _ string) error {
			if string(p) == phase && seen[p] == k {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			seen[p]++
			return nil
		}})
	if err != nil {
		fmt.Println("compact:", err)
		os.Exit(2)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL) // "none": killed after the compaction
	select {}
}

func TestCompactCrashAtEveryPhase(t *testing.T) {
	if os.Getenv(envCompactDir) != "" {
		t.Skip("in the child")
	}
	kills := map[bool][]string{
		true:  {"archive:0", "archive:1", "archive:2", "verify:0", "verify:2", "manifest:0", "remove:0", "remove:1", "remove:2", "sync:0", "none"},
		false: {"manifest:0", "remove:0", "remove:1", "sync:0", "none"},
	}
	for _, archived := range []bool{true, false} {
		for _, kill := range kills[archived] {
			t.Run(fmt.Sprintf("archive=%v/%s", archived, kill), func(t *testing.T) {
				compactCrashRound(t, archived, kill)
			})
		}
	}
}

func compactCrashRound(t *testing.T, archived bool, kill string) {
	home := t.TempDir()
	dir := filepath.Join(home, "wal")
	l := openT(t, Options{Dir: dir, SegmentSize: 1024})
	built := appendN(t, l, 60)
	l.Close()
	var newFirst uint64
	segs, _ := listSegments(dir)
	for _, s := range segs {
		if s.First <= compactBefore {
			newFirst = s.First
		}
	}
	if newFirst < 10 {
		t.Fatalf("segments %v: compaction would remove too little", segs)
	}
	archive := ""
	if archived {
		archive = filepath.Join(home, "archive")
	}
	// The child kills itself at the phase; Killed checks SIGKILL ended it.
	crashchild.Start(t, "TestCompactCrashChild", envCompactDir+"="+home, envCompactKill+"="+kill, envCompactArchive+"="+archive).Killed(t)

	rep, err := Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify after the kill: %+v %v", rep, err)
	}
	wantFirst := newFirst
	if strings.HasPrefix(kill, "archive") || strings.HasPrefix(kill, "verify") || strings.HasPrefix(kill, "manifest") {
		wantFirst = 1
	}
	if rep.First != wantFirst {
		t.Fatalf("verify: first retained seq %d, want %d", rep.First, wantFirst)
	}
	l2, err := Open(Options{Dir: dir, SegmentSize: 1024, Now: fixedNow})
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer l2.Close()
	if l2.FirstSeq() != wantFirst {
		t.Fatalf("FirstSeq %d, want %d", l2.FirstSeq(), wantFirst)
	}
	if got := segmentNames(t, dir); got[0] != segmentName(wantFirst) {
		t.Fatalf("after open the log holds %v, want it to start at %d", got, wantFirst)
	}
	if archived && wantFirst > 1 {
		var names []string
		for _, s := range segs {
			if s.First < wantFirst {
				names = append(names, s.Name)
			}
		}
		if got := segmentNames(t, archive); !slices.Equal(got, names) {
			t.Fatalf("archive holds %v, want %v", got, names)
		}
		// Every archived range is there, this home's, sound frame by frame.
		if arep, err := VerifyArchives(dir, "", true); err != nil || !arep.OK() || arep.Entries != wantFirst-1 {
			t.Fatalf("archive after the kill: %+v %v", arep, err)
		}
	}
	// Every acknowledged event and every built one is there, in order.
	want := map[uint64]string{}
	for i, ev := range built {
		want[uint64(i+1)] = ev.ID
	}
	f, err := os.Open(filepath.Join(home, "acked"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var seq uint64
		var id string
		if _, err := fmt.Sscanf(sc.Text(), "%d %s", &seq, &id); err == nil {
			want[seq] = id
		}
	}
	f.Close()
	from := uint64(1)
	if !archived {
		from = wantFirst
	}
	got := map[uint64]string{}
	next := from
	for ev, err := range l2.Events(from) {
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		if ev.Seq != next {
			t.Fatalf("seq %d after %d", ev.Seq, next-1)
		}
		next++
		got[ev.Seq] = ev.ID
	}
	for seq, id := range want {
		if seq < from {
			continue
		}
		if got[seq] != id {
			t.Fatalf("acknowledged seq %d (%s) reads as %q", seq, id, got[seq])
		}
	}
	// The log goes on: another compaction and appends work.
	if _, err := l2.Append(context.Background(), events.MustNew("after", &events.WalSalvaged{LostSeq: 1})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l2.Compact(ctx, CompactOptions{Before: compactBefore + 10, Archive: archive}); err != nil {
		t.Fatal(err)
	}
}

func TestStaleManifestTempIsHarmless(t *testing.T) {
	l, _ := compactLog(t, 40, Options{})
	dir := l.Dir()
	res, err := l.Compact(context.Background(), CompactOptions{Before: 20})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	// A kill between the temporary manifest's write and its rename.
	if err := os.WriteFile(filepath.Join(dir, "."+manifestName+".tmp"), []byte(`{"version":1,"first_seq":999`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, Options{Dir: dir, SegmentSize: 1024})
	if l2.FirstSeq() != res.NewFirstSeq {
		t.Fatalf("first %d, want %d", l2.FirstSeq(), res.NewFirstSeq)
	}
}
