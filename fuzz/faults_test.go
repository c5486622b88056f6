package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/fuzz/torture"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/wal"
)

// faultKinds are the disk faults the WAL's file seam can inject.
var faultKinds = []struct {
	name string
	arm  func(f *wal.Faults)
}{
	{"write ENOSPC", func(f *wal.Faults) { f.FailWrite(syscall.ENOSPC) }},
	{"short write ENOSPC", func(f *wal.Faults) { f.ShortWrite(syscall.ENOSPC) }},
	{"fsync EIO", func(f *wal.Faults) { f.FailSync(syscall.EIO) }},
	{"dir fsync EIO", func(f *wal.Faults) { f.FailDirSync(syscall.EIO) }},
}

// TestDiskFaultsThroughTheAPI injects each disk fault at random points of a
// concurrent feedback load served over HTTP (127.0.0.1) and checks: the
// failed write is never acknowledged (its clients get 503 DEGRADED, never
// 200 or another 5xx); health turns degraded, reads keep working, and
// every later write is refused; the home reopens (tail repaired) with every
// acknowledged entry present exactly once, every unacknowledged one at
// most once, and views byte-identical to a rebuild.
func TestDiskFaultsThroughTheAPI(t *testing.T) {
	const trials = 3
	for _, fk := range faultKinds {
		for trial := 0; trial < trials; trial++ {
			t.Run(fmt.Sprintf("%s/%d", fk.name, trial), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(trial), uint64(len(fk.name))))
				armAfter := 1 + rng.IntN(40)
				runFaultTrial(t, fk.arm, armAfter)
			})
		}
	}
}

type faultOutcome struct {
	acked   map[string]string // feedbackId → notes
	unacked map[string]bool   // notes of posts that failed
}

func runFaultTrial(t *testing.T, arm func(*wal.Faults), armAfter int) {
	ctx := context.Background()
	h := home.Home{Dir: t.TempDir()}
	faults := &wal.Faults{}
	eng, err := engine.Open(ctx, engine.Options{Home: h, Faults: faults, SegmentSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: "tok", SessionID: "lab_faults"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	// Keep the four clients' connections alive: a new connection per request
	// could run the shared machine out of loopback ports.
	ts.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 16
	post := func(notes, req string) (int, []byte) {
		body := fmt.Sprintf(`{"ratings":{"overall":%d},"notes":%q}`, len(notes)%101, notes)
		hr, _ := http.NewRequest("POST", ts.URL+"/api/feedback", bytes.NewReader([]byte(body)))
		hr.Header.Set("X-CM-LAB-TOKEN", "tok")
		if req != "" {
			hr.Header.Set("X-CM-LAB-REQUEST-ID", req)
		}
		resp, err := ts.Client().Do(hr)
		if err != nil {
			t.Errorf("post: %v", err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	out := faultOutcome{acked: map[string]string{}, unacked: map[string]bool{}}
	var mu sync.Mutex
	var armed, failedSeen bool
	sinceArm := 0 // requests answered after arming while no failure was seen
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				notes := fmt.Sprintf("w%d n%d", w, n)
				req := ""
				if n%2 == 0 {
					req = "req-" + notes
				}
				mu.Lock()
				sentAfterFailure := failedSeen
				mu.Unlock()
				status, body := post(notes, req)
				mu.Lock()
				switch {
				case status == http.StatusOK:
					var r struct {
						FeedbackID string `json:"feedbackId"`
					}
					if json.Unmarshal(body, &r) != nil || r.FeedbackID == "" {
						t.Errorf("200 without feedbackId: %s", body)
					}
					if sentAfterFailure {
						t.Errorf("write %q sent after a client saw the failure was acknowledged: %s", notes, body)
					}
					out.acked[r.FeedbackID] = notes
					if len(out.acked) == armAfter && !armed {
						armed = true
						arm(faults)
					}
				case status == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"DEGRADED"`)):
					failedSeen = true
					out.unacked[notes] = true
				default:
					t.Errorf("post %q: %d %s, want 200 or 503 DEGRADED", notes, status, body)
					out.unacked[notes] = true
				}
				if armed && !failedSeen {
					sinceArm++
				}
				enough := failedSeen && len(out.unacked) >= 8 || sinceArm > 400
				mu.Unlock()
				if enough {
					return
				}
			}
		}()
	}
	deadline := time.After(15 * time.Second)
	go func() {
		// The dir-fsync fault fires only when a segment is created: keep going until it did.
		for {
			mu.Lock()
			done := failedSeen && len(out.unacked) >= 8 || sinceArm > 400
			mu.Unlock()
			if done {
				close(stop)
				return
			}
			select {
			case <-deadline:
				close(stop)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	if !armed || faults.Fired() == 0 || !failedSeen {
		// Fired 0 after hundreds of writes means the seam is not wired:
		// engine.Open must pass engine.Options.Faults to wal.Open.
		t.Fatalf("fault armed %v, fired %d, failure seen %v (acked %d): the WAL fault seam is not reached through engine.Options.Faults", armed, faults.Fired(), failedSeen, len(out.acked))
	}

	// Degraded: health says so, reads work, writes are refused.
	resp, err := ts.Client().Get(ts.URL + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(hb, []byte(`"degraded"`)) {
		t.Errorf("health after the fault: %s", hb)
	}
	if resp, err := ts.Client().Get(ts.URL + "/api/feedback?since=0"); err != nil || resp.StatusCode != 200 {
		t.Errorf("reads stopped working after the fault: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if status, body := post("after", ""); status != http.StatusServiceUnavailable {
		t.Errorf("write after the fault: %d %s, want 503", status, body)
	}
	ts.Close()
	srv.Close()
	eng.Close() // may report the failure; the home must reopen regardless

	// Reopen without faults.
	eng2, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatalf("home does not reopen after the fault: %v", err)
	}
	if err := eng2.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	byID, byNotes := map[string]int{}, map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e struct {
			ID    string `json:"id"`
			Notes string `json:"notes"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("feedback line is not JSON: %q", line)
		}
		byID[e.ID]++
		byNotes[e.Notes]++
	}
	for id, notes := range out.acked {
		if byID[id] != 1 || byNotes[notes] != 1 {
			t.Errorf("acknowledged %s (%q) present %d times (notes %d)", id, notes, byID[id], byNotes[notes])
		}
	}
	for notes := range out.unacked {
		if byNotes[notes] > 1 {
			t.Errorf("unacknowledged %q present %d times", notes, byNotes[notes])
		}
	}
	rebuilt, err := torture.RebuildViews(ctx, h.Dir, t.TempDir())
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if d := torture.DiffViews(h.Dir, rebuilt); len(d) > 0 {
		t.Errorf("views differ from a rebuild after the fault: %v", d)
	}
	rep, err := wal.Verify(h.WALDir())
	if err != nil || rep.TornTail != nil {
		t.Errorf("log after reopen: %v, torn tail %v", err, rep.TornTail)
	}
}
