package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// postOnce sends one feedback POST with request id id; ok is false when
// the daemon is gone.
func postOnce(hc *http.Client, info *labapi.DaemonInfo, tok, id, body string) (status int, replay bool, resp []byte, ok bool) {
	req, _ := http.NewRequest("POST", "http://"+info.Listen+"/api/feedback", strings.NewReader(body))
	req.Header.Set("X-CM-LAB-TOKEN", tok)
	req.Header.Set("X-CM-LAB-REQUEST-ID", id)
	res, err := hc.Do(req)
	if err != nil {
		return 0, false, nil, false
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, false, nil, false
	}
	return res.StatusCode, res.Header.Get("X-CM-LAB-IDEMPOTENT-REPLAY") == "true", bytes.TrimSpace(b), true
}

// TestRequestIndexSIGKILL kills the daemon with SIGKILL while 16 clients
// post feedback with request ids, three times. After every restart each
// acknowledged id must still be deduplicated to the very response it got
// (from state/reqindex.db, caught up from the log), and the log must hold
// each request id at most once.
func TestRequestIndexSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	const rounds, clients = 3, 16
	var mu sync.Mutex
	acked := map[string]ackedPost{}
	checkAll := func(info *labapi.DaemonInfo, tok string) {
		t.Helper()
		hc := &http.Client{Timeout: 20 * time.Second}
		mu.Lock()
		defer mu.Unlock()
		for id, a := range acked {
			status, replay, resp, ok := postOnce(hc, info, tok, id, a.body)
			if !ok || status != 200 || !replay || !bytes.Equal(resp, a.resp) {
				t.Fatalf("retry of acknowledged %s: status %d replay %v ok %v\n got %s\nwant %s", id, status, replay, ok, resp, a.resp)
			}
		}
	}
	for round := range rounds {
		// checkAll: the earlier rounds' ids, after a SIGKILL.
		killUnderLoad(t, h, clients, int64(60+37*round), checkAll, func(hc *http.Client, info *labapi.DaemonInfo, tok string, c, i int) (bool, bool) {
			id := fmt.Sprintf("r%d-c%d-i%d", round, c, i)
			body := fmt.Sprintf(`{"notes":"%s","ratings":{"overall":%d}}`, id, i%101)
			status, _, resp, ok := postOnce(hc, info, tok, id, body)
			if !ok {
				return false, false // the daemon died
			}
			if status != 200 {
				return false, true
			}
			mu.Lock()
			acked[id] = ackedPost{body: body, resp: resp}
			mu.Unlock()
			// A retry at once is answered from the index, live.
			if i%5 == 0 {
				st2, replay, resp2, ok := postOnce(hc, info, tok, id, body)
				if ok && st2 == 200 && (!replay || !bytes.Equal(resp, resp2)) {
					t.Errorf("live retry of %s: replay %v, %s vs %s", id, replay, resp2, resp)
					return true, false
				}
			}
			return true, true
		})
	}
	cmd, info := startDaemon(t, h)
	checkAll(info, daemonToken(t, info))
	cmd.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v", err)
	}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	seen := map[string]int{}
	for ev, err := range eng.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Req != "" {
			if seen[ev.Req]++; seen[ev.Req] > 1 {
				t.Fatalf("request id %s acted twice (seq %d)", ev.Req, ev.Seq)
			}
		}
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged %s is in the log %d times", id, seen[id])
		}
	}
	t.Logf("%d rounds: %d acknowledged ids, %d request ids in the log", rounds, len(acked), len(seen))
}

type ackedPost struct {
	body string
	resp []byte
}
