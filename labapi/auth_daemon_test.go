package labapi_test

// The tests here run a whole daemon (package daemon, which imports
// labapi): an external test package, so that the import is no cycle.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// TestOperatorTokenNeverLeaves runs a daemon session through every route
// — with the Lab token, the operator token, none and a wrong one, good
// and bad bodies — and greps every response (status line, headers,
// body), the daemon's log at debug level, state/daemon.json and every file
// of the home but state/token for the operator token. Only state/token
// may hold it.
func TestOperatorTokenNeverLeaves(t *testing.T) {
	h := home.Home{Dir: filepath.Join(labapi.PrivateTempDir(t), "home")}
	var logBuf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Home: h, Listen: "127.0.0.1:0", Logger: logger, Ready: func(i labapi.DaemonInfo) { ready <- i }})
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	opTok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder // every response, as received
	do := func(method, path, body string, hdr ...string) []byte {
		t.Helper()
		rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer rcancel()
		req, _ := http.NewRequestWithContext(rctx, method, "http://"+info.Listen+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Fprintf(&seen, "%s %s → %s\n", method, path, res.Status)
		res.Header.Write(&seen)
		seen.Write(b)
		seen.WriteString("\n")
		return b
	}
	var cfg struct {
		Token string `json:"token"`
	}
	json.Unmarshal(do("GET", "/api/config", ""), &cfg)
	tokens := map[string][]string{
		"lab":      {"X-CM-LAB-TOKEN", cfg.Token},
		"operator": {"X-CM-LAB-TOKEN", opTok},
		"bearer":   {"Authorization", "Bearer " + opTok},
		"none":     nil,
		"wrong":    {"X-CM-LAB-TOKEN", opTok[:32]},
		"basic":    {"Authorization", "Basic " + opTok},
	}
	mcpHdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	for _, name := range []string{"lab", "none", "wrong", "basic", "operator", "bearer"} {
		hdr := append(append([]string{}, mcpHdr...), tokens[name]...)
		for _, rt := range labapi.OperatorRoutes() {
			do(rt.Method, rt.Path, rt.Body, hdr...)
			do(rt.Method, rt.Path, `{"bad json`, hdr...)
		}
		do("POST", "/api/feedback", `{"notes":"n"}`, hdr...)
		do("POST", "/api/feedback", `{"ratings":{"overall":101}}`, hdr...)
		do("POST", "/api/runs/import", `{"path":"/nope"}`, hdr...)
		do("GET", "/api/health", "", hdr...)
		do("GET", "/api/session", "", hdr...)
		do("GET", "/api/nope", "", hdr...)
		do("GET", "/api/config", "", append(hdr, "Origin", "http://evil.example")...)
		do("POST", "/api/pty/c1/exec_block", `{"cmd":"echo $CMLAB_HOME; env | grep -c CM_LAB || true"}`, hdr...)
		do("POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pty_exec","arguments":{"conversation_id":"c2","cmd":"echo hi"}}}`, hdr...)
	}
	// The operator's own stream of the whole log, up to its last event.
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	req, _ := http.NewRequestWithContext(sctx, "GET", "http://"+info.Listen+"/api/events?since=0", nil)
	req.Header.Set("X-CM-LAB-TOKEN", opTok)
	if res, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(res.Body) // ends at the deadline
		res.Body.Close()
		seen.Write(b)
	}
	scancel()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if strings.Count(seen.String(), "\n") < 300 {
		t.Fatalf("too little traffic to mean anything: %d lines", strings.Count(seen.String(), "\n"))
	}
	if strings.Contains(seen.String(), opTok) {
		i := strings.Index(seen.String(), opTok)
		t.Fatalf("a response holds the operator token: …%s…", seen.String()[max(0, i-300):i])
	}
	if logBuf.Len() < 1000 || strings.Contains(logBuf.String(), opTok) {
		t.Fatalf("daemon log (%d bytes) holds the operator token", logBuf.Len())
	}
	if b, _ := json.Marshal(info); strings.Contains(string(b), opTok) {
		t.Fatal("daemon.json holds the operator token")
	}
	err = filepath.WalkDir(h.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == h.TokenFile() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), opTok) || strings.Contains(string(b), hex.EncodeToString([]byte(opTok))) {
			t.Errorf("%s holds the operator token", h.Rel(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
