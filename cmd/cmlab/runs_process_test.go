package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
)

// labStartDaemon serves h on 127.0.0.1 with the given import roots and
// registers it in state/daemon.json, as 'cmlab serve --allow-root' does.
func labStartDaemon(t *testing.T, h home.Home, roots []string) {
	t.Helper()
	startTestDaemon(t, h, "lab_runscli", func(_ *engine.Engine, o *labapi.Options) func() {
		o.AllowedRoots = roots
		return nil
	})
}

// startTestDaemon serves h on 127.0.0.1 from this process and registers
// it in state/daemon.json, as 'cmlab serve' does, with session id
// session. extra sets what the daemon serves beyond the engine, the
// listener and the auth (import roots, a terminal manager) and returns
// what to close before the engine, or nil. Everything is closed at the
// test's end.
func startTestDaemon(t *testing.T, h home.Home, session string, extra func(eng *engine.Engine, o *labapi.Options) func()) {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.OperatorToken()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := labapi.Options{Engine: eng, Listen: ln.Addr().String(), OperatorToken: tok, SessionID: session}
	closeExtra := extra(eng, &o)
	srv, err := labtest.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	sock := &http.Server{Handler: srv.Handler()}
	adv, err := labapi.Advertise(h, labapi.DaemonInfo{Pid: os.Getpid(), Listen: ln.Addr().String(), TokenFile: h.TokenFile()}, func(l net.Listener) { go sock.Serve(l) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adv.Withdraw()
		sock.Close()
		hs.Close()
		srv.Close()
		if closeExtra != nil {
			closeExtra()
		}
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
}

// TestRunsImportRelativeProcess: a relative PATH is the user's, not the
// daemon's (whose working directory is elsewhere); a path outside the
// allowed roots names them and the flag that adds one.
func TestRunsImportRelativeProcess(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	inside, outside := filepath.Join(base, "lab"), filepath.Join(base, "elsewhere")
	for _, d := range []string{filepath.Join(inside, "r1"), filepath.Join(outside, "r2")} {
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, "video.mp4"), []byte("v"), 0o600)
	}
	h := home.Home{Dir: filepath.Join(base, "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	labStartDaemon(t, h, []string{inside})
	code, out, errs := cliRunIn(t, inside, nil, "runs", "import", "r1", "--home", h.Dir)
	if code != 0 || !strings.HasPrefix(out, "run_") || errs != "" {
		t.Fatalf("relative import = %d %q %q", code, out, errs)
	}
	code, out, errs = cliRunIn(t, outside, nil, "runs", "import", "r2", "--home", h.Dir)
	want := "cmlab: FORBIDDEN: cannot import " + filepath.Join(outside, "r2") + ": it is outside the directories runs may be imported from (" + inside + ")\n" +
		"  fix: restart the daemon with 'cmlab serve --allow-root " + outside + "' (or a parent directory); without a daemon, run this from a directory above the run\n"
	if code != 1 || out != "" || errs != want {
		t.Fatalf("import outside the roots = %d %q\n%q\nwant\n%q", code, out, errs, want)
	}
	code, _, errs = cliRunIn(t, inside, nil, "runs", "import", "nope", "--home", h.Dir)
	if code != 1 || errs != "cmlab: FILE_NOT_FOUND: no file or directory "+filepath.Join(inside, "nope")+"\n  fix: check the path; import a run's artifacts directory or its video file\n" {
		t.Fatalf("missing path = %d %q", code, errs)
	}
}
