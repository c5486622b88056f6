package labapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
)

// testLab is a server over a fresh home, listening on 127.0.0.1.
type testLab struct {
	t     *testing.T
	home  home.Home
	eng   *engine.Engine
	srv   *Server
	hs    *httptest.Server
	token string
	root  string // an allowed import root
}

func newTestLab(t *testing.T, mod ...func(*Options)) *testLab {
	t.Helper()
	return newTestLabEngine(t, engine.Options{}, mod...)
}

// newTestLabEngine is newTestLab over an engine opened with eo (its Home
// is set here): fault seams, checkpoint interval.
func newTestLabEngine(t *testing.T, eo engine.Options, mod ...func(*Options)) *testLab {
	t.Helper()
	dir := t.TempDir()
	h := home.Home{Dir: filepath.Join(dir, "home")}
	eo.Home = h
	eng, err := engine.Open(context.Background(), eo)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "runs")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: tok, SessionID: "lab_test", AllowedRoots: []string{root}, Version: "test"}
	for _, m := range mod {
		m(&opts)
	}
	srv, err := New(withReadModels(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	srv.SetListen(strings.TrimPrefix(hs.URL, "http://"))
	tl := &testLab{t: t, home: h, eng: eng, srv: srv, hs: hs, token: tok, root: root}
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		eng.Close()
	})
	return tl
}

// privateTempDir is t.TempDir() made 0700: a daemon refuses a home that
// group or others can enter.
func privateTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r resp) code() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(r.body, &env)
	return env.Error.Code
}

// do sends a request; hdr pairs are header name, value. The token is added
// unless hdr sets X-CM-LAB-TOKEN (use "" to send none).
func (tl *testLab) do(method, path, body string, hdr ...string) resp {
	tl.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tl.hs.URL+path, rd)
	if err != nil {
		tl.t.Fatal(err)
	}
	req.Header.Set("X-CM-LAB-TOKEN", tl.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tl.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// mkRun creates an artifacts directory under the allowed root.
func (tl *testLab) mkRun(name string, files map[string]string) string {
	tl.t.Helper()
	d := filepath.Join(tl.root, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		tl.t.Fatal(err)
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(d, n), []byte(c), 0o600); err != nil {
			tl.t.Fatal(err)
		}
	}
	return d
}

func (tl *testLab) importRun(path string) string {
	tl.t.Helper()
	b, _ := json.Marshal(map[string]string{"path": path})
	r := tl.do("POST", "/api/runs/import", string(b))
	if r.status != 200 {
		tl.t.Fatalf("import %s: %d %s", path, r.status, r.body)
	}
	return r.json(tl.t)["runId"].(string)
}

func (tl *testLab) lastSeq() uint64 { return tl.eng.Log().LastSeq() }

func (tl *testLab) feedbackLines() []string {
	tl.t.Helper()
	b, err := os.ReadFile(tl.home.FeedbackFile())
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		tl.t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// withReadModels fills what New requires and o leaves nil, as the daemon
// builds them (package daemon; internal/labtest for other packages): a
// step journal over o.Engine and its retention model, logging to o.Logger.
func withReadModels(t testing.TB, o Options) Options {
	t.Helper()
	if o.Journal == nil {
		j, err := steps.NewJournal(o.Engine)
		if err != nil {
			t.Fatalf("step journal: %v", err)
		}
		o.Journal = j
	}
	if o.Retention == nil {
		m, err := retention.Open(o.Engine, o.Logger)
		if err != nil {
			t.Fatalf("retention model: %v", err)
		}
		o.Retention = m
	}
	return o
}
