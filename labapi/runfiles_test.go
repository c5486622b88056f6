package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Serving run files: a file in a run directory is opened once, beneath the
// run's real path, following no symlink, and must be a regular file; what
// is served is the opened file (issue 15 §2).

// TestRunFilesSymlinkSwap swaps video.mp4 and score.json between a regular
// file and a symlink to a secret outside the allowed root while requests
// for both run: no answer may carry the secret's bytes.
func TestRunFilesSymlinkSwap(t *testing.T) {
	tl := newTestLab(t)
	secretDir := t.TempDir()
	secret := []byte(`{"overall":13,"secret":"S3CRET-outside-the-root"}`)
	secretPath := filepath.Join(secretDir, "secret.json")
	if err := os.WriteFile(secretPath, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	goodVideo, goodScore := "GOOD-VIDEO-BYTES", `{"overall":80}`
	dir := tl.mkRun("swap", map[string]string{"video.mp4": goodVideo, "score.json": goodScore,
		"master.mp4": goodVideo, "master.json": goodScore})
	runID := tl.importRun(dir)

	const wantRequests, wantSwaps = 20000, 10000
	deadline := time.Now().Add(60 * time.Second)
	var requests, swaps, leaks, served, refused atomic.Int64
	stop := make(chan struct{})
	var swapWG sync.WaitGroup
	swapWG.Add(1)
	go func() {
		defer swapWG.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, f := range []struct{ name, master string }{{"video.mp4", "master.mp4"}, {"score.json", "master.json"}} {
				tmp := filepath.Join(dir, ".swap-"+f.name)
				os.Remove(tmp)
				var err error
				if i%2 == 0 {
					err = os.Symlink(secretPath, tmp)
				} else {
					err = os.Link(filepath.Join(dir, f.master), tmp)
				}
				if err == nil {
					err = os.Rename(tmp, filepath.Join(dir, f.name))
				}
				if err != nil {
					t.Errorf("swap: %v", err)
					return
				}
			}
			swaps.Add(1)
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; ; n++ {
				if (requests.Load() >= wantRequests && swaps.Load() >= wantSwaps) || time.Now().After(deadline) {
					return
				}
				path := "/api/runs/" + runID + "/video"
				if n%2 == 1 {
					path = "/api/runs/" + runID + "/artifact/score.json"
				}
				res, err := client.Get(tl.hs.URL + path)
				if err != nil {
					t.Errorf("GET %s: %v", path, err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				requests.Add(1)
				switch {
				case bytes.Contains(b, []byte("S3CRET")):
					leaks.Add(1)
				case res.StatusCode == 200:
					served.Add(1)
				case res.StatusCode == 404:
					refused.Add(1)
				default:
					t.Errorf("GET %s: %d %s", path, res.StatusCode, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	swapWG.Wait()
	t.Logf("%d requests (%d served, %d refused), %d swaps, %d leaks", requests.Load(), served.Load(), refused.Load(), swaps.Load(), leaks.Load())
	if leaks.Load() != 0 {
		t.Fatalf("%d of %d answers carried bytes from outside the root", leaks.Load(), requests.Load())
	}
	if served.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("the swap did not race the requests: %d served, %d refused", served.Load(), refused.Load())
	}
	if requests.Load() < wantRequests/10 {
		t.Fatalf("only %d requests ran before the deadline", requests.Load())
	}
}

// TestRunFilesSymlinkAtImport: a report that is a symlink to a file
// outside the root is neither read into the run's metrics at import nor
// served.
func TestRunFilesSymlinkAtImport(t *testing.T) {
	tl := newTestLab(t)
	outside := filepath.Join(t.TempDir(), "score.json")
	os.WriteFile(outside, []byte(`{"overall":42}`), 0o600)
	dir := tl.mkRun("linked", map[string]string{"video.mp4": "v"})
	if err := os.Symlink(outside, filepath.Join(dir, "score.json")); err != nil {
		t.Fatal(err)
	}
	runID := tl.importRun(dir)
	r := tl.do("GET", "/api/runs/"+runID, "")
	m := r.json(t)
	if got := m["autoMetricsSummary"].(map[string]any)["proxyScoreOverall"]; got != nil {
		t.Fatalf("import read a symlinked report: proxyScoreOverall = %v", got)
	}
	if got := m["artifacts"].(map[string]any)["score"]; got != false {
		t.Fatalf("artifacts.score = %v for a symlink", got)
	}
	if r := tl.do("GET", "/api/runs/"+runID+"/artifact/score.json", ""); r.status != 404 || bytes.Contains(r.body, []byte(`"overall"`)) {
		t.Fatalf("symlinked artifact: %d %s", r.status, r.body)
	}
}

// TestRunFilesFIFO: a FIFO (or a directory) named like an artifact answers
// 404 at once, and a request for it leaves no thread and no descriptor
// behind; an import whose report is a FIFO does not block.
func TestRunFilesFIFO(t *testing.T) {
	tl := newTestLab(t)
	dir := tl.mkRun("fifo", map[string]string{"video.mp4": "v", "score.json": `{"overall":1}`})
	runID := tl.importRun(dir)
	for _, name := range []string{"video.mp4", "score.json", "sync-report.json"} {
		os.Remove(filepath.Join(dir, name))
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "script.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	fds0, threads0 := countDir(t, "/proc/self/fd"), countDir(t, "/proc/self/task")
	var wg sync.WaitGroup
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/video", "/artifact/score.json", "/artifact/script.json", "/artifact/sync-report.json"}[i%4]
			start := time.Now()
			res, err := client.Get(tl.hs.URL + "/api/runs/" + runID + path)
			if err != nil {
				errs <- fmt.Errorf("GET %s: %v", path, err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 404 || time.Since(start) > 2*time.Second {
				errs <- fmt.Errorf("GET %s: %d after %v: %s", path, res.StatusCode, time.Since(start), b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The server closes its side of each connection once the handler is
	// done: poll for the descriptors to come back.
	deadline := time.Now().Add(5 * time.Second)
	for countDir(t, "/proc/self/fd") > fds0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if fds := countDir(t, "/proc/self/fd"); fds > fds0 {
		t.Errorf("descriptors: %d before, %d after the FIFO requests", fds0, fds)
	}
	if threads := countDir(t, "/proc/self/task"); threads > threads0+4 {
		t.Errorf("threads: %d before, %d after %d FIFO requests", threads0, threads, n)
	}

	// An import reading a FIFO report returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b, _ := json.Marshal(map[string]string{"path": dir})
	req, _ := http.NewRequestWithContext(ctx, "POST", tl.hs.URL+"/api/runs/import", bytes.NewReader(b))
	req.Header.Set("X-CM-LAB-TOKEN", tl.token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("import with FIFO reports: %v", err)
	}
	res.Body.Close()
}

func countDir(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
