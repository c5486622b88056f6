package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/crashchild"
	"github.com/cmlab/cmlab/labapi"
)

const (
	envDaemonHome   = "CMLAB_TEST_DAEMON_HOME"
	envDaemonNofile = "CMLAB_TEST_DAEMON_NOFILE" // RLIMIT_NOFILE of the child, when set
)

// TestHelperDaemon is the child of the crash test: `cmlab serve` on
// 127.0.0.1:0 over the home named by the environment, until killed.
func TestHelperDaemon(t *testing.T) {
	dir := crashchild.Role(t, envDaemonHome, "TestDaemonSIGKILL")
	if n, _ := strconv.ParseUint(os.Getenv(envDaemonNofile), 10, 64); n > 0 {
		// The flood test's child: a low descriptor limit, soft and hard.
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(3)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, Options{Home: home.Home{Dir: dir}, Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemon exited:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// startDaemon re-executes the test binary as a daemon and waits for its
// state/daemon.json.
func startDaemon(t *testing.T, h home.Home, env ...string) (*crashchild.Child, *labapi.DaemonInfo) {
	t.Helper()
	child := crashchild.Start(t, "TestHelperDaemon", append([]string{envDaemonHome + "=" + h.Dir}, env...)...)
	var info *labapi.DaemonInfo
	child.Await(t, "wrote its daemon.json", 60*time.Second, func() bool {
		i, err := labapi.ReadDaemonInfo(h)
		if err == nil && i.Pid == child.Pid() {
			info = i
		}
		return info != nil
	})
	return child, info
}

// daemonToken is the operator token of a started daemon child.
func daemonToken(t *testing.T, info *labapi.DaemonInfo) string {
	t.Helper()
	b, err := os.ReadFile(info.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// killUnderLoad is one round of a SIGKILL test: it starts the daemon child
// on h, calls before (when set) with its address and token, runs clients
// goroutines that each call post(c, 0), post(c, 1), … until post says the
// daemon is gone (alive false), and SIGKILLs the daemon once target posts
// were acknowledged (acked true; or after 30 s). It fails the test when
// the round acknowledged nothing.
func killUnderLoad(t *testing.T, h home.Home, clients int, target int64, before func(info *labapi.DaemonInfo, tok string),
	post func(hc *http.Client, info *labapi.DaemonInfo, tok string, c, i int) (acked, alive bool)) {
	t.Helper()
	cmd, info := startDaemon(t, h)
	tok := daemonToken(t, info)
	if before != nil {
		before(info, tok)
	}
	var nAcks atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 20 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				acked, alive := post(hc, info, tok, c, i)
				if !alive {
					return
				}
				if acked {
					nAcks.Add(1)
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for nAcks.Load() < target && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cmd.Kill(t)
	close(stop)
	wg.Wait()
	if nAcks.Load() == 0 {
		t.Fatal("no acknowledged POST in this round")
	}
}

// TestDaemonSIGKILL kills the daemon with SIGKILL under 32 concurrent POST
// clients, ten times. Every feedbackId that got a 200 must be in
// feedback.jsonl exactly once after restart, and a poll from "0" must
// return each once.
func TestDaemonSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	const rounds, clients = 10, 32
	var mu sync.Mutex
	acked := map[string]bool{}
	for round := range rounds {
		// Kill while requests are in flight, after a varying number of acks.
		killUnderLoad(t, h, clients, int64(40+23*round), nil, func(hc *http.Client, info *labapi.DaemonInfo, tok string, c, i int) (bool, bool) {
			body := fmt.Sprintf(`{"notes":"r%d c%d i%d","ratings":{"overall":%d}}`, round, c, i, i%101)
			status, _, b, ok := postOnce(hc, info, tok, fmt.Sprintf("r%d-c%d-i%d", round, c, i), body)
			if !ok {
				return false, false // the daemon died
			}
			if status != 200 {
				return false, true
			}
			var out struct {
				FeedbackID string `json:"feedbackId"`
			}
			if json.Unmarshal(b, &out) != nil || out.FeedbackID == "" {
				t.Errorf("200 without feedbackId: %s", b)
				return false, false
			}
			mu.Lock()
			acked[out.FeedbackID] = true
			mu.Unlock()
			return true, true
		})
	}
	// Restart (repair + catch-up) and check the store.
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := os.ReadFile(h.FeedbackFile())
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad line in feedback.jsonl: %q", line)
		}
		count[e.ID]++
	}
	for id := range acked {
		if count[id] != 1 {
			t.Fatalf("acknowledged %s appears %d times in feedback.jsonl", id, count[id])
		}
	}
	for id, n := range count {
		if n != 1 {
			t.Fatalf("%s appears %d times", id, n)
		}
	}
	page, err := labapi.PollFeedback(h.FeedbackFile(), "0", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	polled := map[string]int{}
	for _, it := range page.Items {
		var e struct {
			ID string `json:"id"`
		}
		json.Unmarshal(it, &e)
		polled[e.ID]++
	}
	for id := range acked {
		if polled[id] != 1 {
			t.Fatalf("poll from 0 returns %s %d times", id, polled[id])
		}
	}
	if page.NextCursor != fmt.Sprint(len(b)) {
		t.Fatalf("nextCursor %s, file %d bytes", page.NextCursor, len(b))
	}
	t.Logf("%d rounds: %d acknowledged, %d entries in the store", rounds, len(acked), len(count))
}

// TestDaemonSIGTERM: SIGTERM drains, checkpoints and removes daemon.json;
// the process exits 0 and a restart finds every acknowledged entry.
func TestDaemonSIGTERM(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	cmd, info := startDaemon(t, h)
	tok, _ := os.ReadFile(info.TokenFile)
	for i := range 5 {
		req, _ := http.NewRequest("POST", "http://"+info.Listen+"/api/feedback", strings.NewReader(fmt.Sprintf(`{"notes":"n%d"}`, i)))
		req.Header.Set("X-CM-LAB-TOKEN", strings.TrimSpace(string(tok)))
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("POST: %v", err)
		}
		res.Body.Close()
	}
	cmd.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(h.DaemonFile()); !os.IsNotExist(err) {
		t.Fatalf("daemon.json still there: %v", err)
	}
	var cp struct {
		Seq uint64 `json:"seq"`
	}
	b, err := os.ReadFile(h.CheckpointFile())
	if err != nil || json.Unmarshal(b, &cp) != nil {
		t.Fatalf("checkpoint: %v %s", err, b)
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if cp.Seq != eng.Log().LastSeq() {
		t.Fatalf("checkpoint seq %d, log last %d", cp.Seq, eng.Log().LastSeq())
	}
	page, err := labapi.PollFeedback(h.FeedbackFile(), "0", "", 0)
	if err != nil || len(page.Items) != 5 {
		t.Fatalf("after restart: %v %d items", err, len(page.Items))
	}
}
