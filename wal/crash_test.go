package wal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/internal/crashchild"
)

// The crash test re-executes this test binary as a child that appends
// with 16 concurrent appenders and records every acknowledged sequence in
// a side file; the parent SIGKILLs it at a random moment, reopens the log
// and checks it.

const (
	envCrashDir   = "CMLAB_WAL_CRASH_DIR"
	envCrashRound = "CMLAB_WAL_CRASH_ROUND"
	envLockDir    = "CMLAB_WAL_LOCK_DIR"
	envCrashSeg   = "CMLAB_WAL_CRASH_SEGMENT"
	crashSegSize  = 32 << 10
	crashWorkers  = 16
)

// crashEvent is the event appender w of round r submits as its i-th: fully
// determined by (r, w, i), so the parent can rebuild its exact bytes.
func crashEvent(r, w, i int) *events.Event {
	ev := events.MustNew(fmt.Sprintf("w%d", w), &events.WalSalvaged{
		LostSeq: uint64(i), Segment: fmt.Sprintf("r%d", r), Reason: strings.Repeat("x", 100+(w*7+i)%60),
	})
	ev.ID = fmt.Sprintf("r%d-w%d-i%d", r, w, i)
	ev.TS = fixedNow().UnixMilli()
	return ev
}

// TestCrashChild is the child's body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := crashchild.Role(t, envCrashDir, "TestCrashSIGKILL")
	round, _ := strconv.Atoi(os.Getenv(envCrashRound))
	segSize, _ := strconv.Atoi(os.Getenv(envCrashSeg))
	l, err := Open(Options{Dir: filepath.Join(dir, "wal"), SegmentSize: segSize, Now: fixedNow})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	side, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("acked-%d", round)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(2)
	}
	var mu sync.Mutex
	fmt.Println("ready")
	var wg sync.WaitGroup
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				evs := []*events.Event{crashEvent(round, w, i)}
				if i%10 == 9 { // now and then a multi-event append
					evs = append(evs, crashEvent(round, w, i+1))
					i++
				}
				seqs, err := l.Append(context.Background(), evs...)
				if err != nil {
					fmt.Println("append:", err)
					os.Exit(2)
				}
				var line []byte
				for k, s := range seqs {
					line = fmt.Appendf(line, "%d %s\n", s, evs[k].ID)
				}
				mu.Lock()
				side.Write(line)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	crashRounds(t, 20, crashSegSize)
}

// With 2 MiB segments the tail is preallocated: the child dies with zeros
// ahead of its data, regions in flight and fresh segments with holes; torn
// bytes are then written where the next entry would have gone.
func TestCrashSIGKILLPreallocated(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	if n := crashRounds(t, 10, 2<<20); n == 0 {
		t.Fatal("no round left preallocated space behind: the test tests nothing new")
	}
}

// tailPrealloc is the preallocated space ending the log in dir.
func tailPrealloc(t *testing.T, dir string) int64 {
	t.Helper()
	if segs, err := listSegments(dir); err != nil || len(segs) == 0 {
		return 0
	}
	_, _, sc := tailScan(t, dir)
	return sc.Prealloc
}

// writeTorn puts garbage where a torn write would leave it: over the
// preallocated zeros right after the entries, or else at the end of the
// last segment. Zero garbage always goes at the end: inside preallocated
// space it would be indistinguishable from it.
func writeTorn(t *testing.T, dir string, garbage []byte) {
	t.Helper()
	path, data, sc := tailScan(t, dir)
	if sc.Prealloc < int64(len(garbage)) || allZero(garbage) || len(sc.Bad) > 0 {
		if err := appendToTail(dir, garbage); err != nil {
			t.Fatal(err)
		}
		return
	}
	copy(data[sc.Size-sc.Prealloc:], garbage)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// crashRounds runs the rounds and returns in how many the killed child
// left preallocated space behind.
func crashRounds(t *testing.T, rounds, segSize int) (preallocated int) {
	home := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var totalAcked int
	for r := 0; r < rounds; r++ {
		child := crashchild.StartPiped(t, "TestCrashChild", envCrashDir+"="+home, envCrashRound+"="+strconv.Itoa(r), envCrashSeg+"="+strconv.Itoa(segSize))
		if line, _ := child.Line(); line != "ready" {
			child.Stop()
			t.Fatalf("round %d: child said %q: %s", r, line, child.Output())
		}
		child.Drain()
		// Let it append for a random while, then kill it mid-flight.
		time.Sleep(time.Duration(10+rng.IntN(150)) * time.Millisecond)
		child.Kill(t)

		acked := readAcked(t, filepath.Join(home, fmt.Sprintf("acked-%d", r)))
		totalAcked += len(acked)
		// A SIGKILL leaves whole write(2)s; a power cut can leave a torn
		// one. Every third round the parent adds what one looks like.
		if tailPrealloc(t, filepath.Join(home, "wal")) > 0 {
			preallocated++
		}
		tornRound := r%3 == 2
		if tornRound {
			garbage := make([]byte, 1+rng.IntN(300))
			if r%2 == 0 {
				for i := range garbage {
					garbage[i] = byte(rng.IntN(256))
				}
				garbage[0] = 0xd0 // a frame length running past the end of file
				garbage = append([]byte{0xd0, 0x01}, garbage...)
			} // else: zero fill
			writeTorn(t, filepath.Join(home, "wal"), garbage)
		}
		l, err := Open(Options{Dir: filepath.Join(home, "wal"), SegmentSize: segSize, Now: fixedNow})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", r, err)
		}
		if tornRound && l.Repaired() == nil {
			t.Fatalf("round %d: torn tail not repaired", r)
		}
		byseq := map[uint64]*events.Event{}
		var prev uint64
		lastI := map[string]int{}
		for ev, err := range l.Events(1) {
			if err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			if ev.Seq != prev+1 {
				t.Fatalf("round %d: seq %d after %d", r, ev.Seq, prev)
			}
			prev = ev.Seq
			byseq[ev.Seq] = ev
			if ev.Type == events.TypeWalRepaired {
				continue
			}
			var er, ew, ei int
			if _, err := fmt.Sscanf(ev.ID, "r%d-w%d-i%d", &er, &ew, &ei); err != nil {
				t.Fatalf("round %d: seq %d has id %q that was never submitted", r, ev.Seq, ev.ID)
			}
			want := crashEvent(er, ew, ei)
			want.Seq = ev.Seq
			if !bytes.Equal(entryBytes(t, ev), entryBytes(t, want)) {
				t.Fatalf("round %d: seq %d (%s) is not the submitted event", r, ev.Seq, ev.ID)
			}
			// Each appender appends in order, one at a time.
			key := fmt.Sprintf("r%d-w%d", er, ew)
			if li, ok := lastI[key]; ok && ei <= li {
				t.Fatalf("round %d: %s out of order or duplicated", r, ev.ID)
			}
			lastI[key] = ei
		}
		if rep, err := Verify(filepath.Join(home, "wal")); err != nil || rep.TornTail != nil || rep.Last != prev {
			t.Fatalf("round %d: Verify after reopen: %+v %v", r, rep, err)
		}
		if prev != l.LastSeq() {
			t.Fatalf("round %d: events end at %d, LastSeq %d", r, prev, l.LastSeq())
		}
		for seq, id := range acked {
			ev, ok := byseq[seq]
			if !ok || ev.ID != id {
				t.Fatalf("round %d: acknowledged seq %d (%s) lost", r, seq, id)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if totalAcked == 0 {
		t.Fatal("no append was ever acknowledged")
	}
	t.Logf("%d rounds (every third with a torn tail added, %d left preallocated space), %d acknowledged appends checked", rounds, preallocated, totalAcked)
	return preallocated
}

// readAcked parses a side file; a last line cut by the kill is ignored.
func readAcked(t *testing.T, path string) map[uint64]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	m := map[uint64]string{}
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			break
		}
		var seq uint64
		var id string
		if _, err := fmt.Sscanf(string(b[:nl]), "%d %s", &seq, &id); err != nil {
			t.Fatalf("side file line %q: %v", b[:nl], err)
		}
		m[seq] = id
		b = b[nl+1:]
	}
	return m
}

// TestLockChild holds the lock until killed; it does nothing in a normal run.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(envLockDir)
	if dir == "" {
		t.Skip("lock child only")
	}
	l, err := Open(Options{Dir: dir})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	defer l.Close()
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or kills us
}

func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envLockDir+"="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = Open(Options{Dir: dir})
	want := fmt.Sprintf("held by pid %d", cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while the child holds the lock: %v (want ErrLocked naming %q)", err, want)
	}
	if LockHolder(dir) != cmd.Process.Pid {
		t.Fatalf("LockHolder %d, child %d", LockHolder(dir), cmd.Process.Pid)
	}
	// Readers need no lock.
	if _, err := Verify(dir); err != nil {
		t.Fatalf("Verify of a held log: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open after the holder died: %v", err)
	}
	l.Close()
}
