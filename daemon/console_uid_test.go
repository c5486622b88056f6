package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// envConsoleProbe switches the test binary into the part of
// TestForeignUserCannotOpenConsole that runs as uid 65534.
const envConsoleProbe = "CMLAB_TEST_CONSOLE_PROBE"

type consoleProbeResult struct {
	Uid       int    `json:"uid"`
	TokenErr  string `json:"tokenErr"`
	DialErr   string `json:"dialErr"`
	CodeLab   int    `json:"codeLab"`   // POST login-code with the Lab token
	CodeNone  int    `json:"codeNone"`  // … with no token
	Overview  int    `json:"overview"`  // GET overview with the Lab token
	Login     int    `json:"login"`     // GET /console/login with a made-up code
	LoginSets bool   `json:"loginSets"` // … and whether it set a cookie
}

func TestHelperConsoleProbe(t *testing.T) {
	raw := os.Getenv(envConsoleProbe)
	if raw == "" {
		t.Skip("child process of TestForeignUserCannotOpenConsole")
	}
	var a foreignProbeArgs
	json.Unmarshal([]byte(raw), &a)
	res := consoleProbeResult{Uid: os.Getuid()}
	h := home.Home{Dir: a.Home}
	if _, err := os.ReadFile(h.TokenFile()); err != nil {
		res.TokenErr = err.Error()
	}
	if _, closeFn, err := Dial(context.Background(), h); err == nil {
		closeFn()
		res.DialErr = "dialled"
	} else {
		res.DialErr = "refused: " + err.Error()
	}
	do := func(method, path string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(method, "http://"+a.Listen+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	var cfg struct {
		Token string `json:"token"`
	}
	r, _ := http.Get("http://" + a.Listen + "/api/config")
	json.NewDecoder(r.Body).Decode(&cfg)
	r.Body.Close()
	res.CodeLab = do("POST", "/api/console/login-code", "X-CM-LAB-TOKEN", cfg.Token).StatusCode
	res.CodeNone = do("POST", "/api/console/login-code").StatusCode
	res.Overview = do("GET", "/api/console/overview", "X-CM-LAB-TOKEN", cfg.Token).StatusCode
	lr := do("GET", "/console/login?code="+strings.Repeat("ab", 32))
	res.Login, res.LoginSets = lr.StatusCode, len(lr.Cookies()) > 0
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// TestForeignUserCannotOpenConsole: another local account (uid 65534)
// reaches the daemon over loopback but cannot get a console login code
// (it cannot read the operator token; the Lab token and no token are
// refused), cannot read the console's routes with the Lab token, and a
// made-up code logs nobody in. It needs root to run the probe as another uid.
func TestForeignUserCannotOpenConsole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the probe as uid 65534 (SysProcAttr.Credential); run the tests as root to cover it")
	}
	base, err := os.MkdirTemp("", "cmlab-console-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "labapi.test")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	h := home.Home{Dir: filepath.Join(base, "home")}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan labapi.DaemonInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Home: h, Listen: "127.0.0.1:0", Ready: func(i labapi.DaemonInfo) { ready <- i }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	var info labapi.DaemonInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon not ready")
	}
	args, _ := json.Marshal(foreignProbeArgs{Listen: info.Listen, Home: h.Dir})
	cmd := exec.Command(bin, "-test.run=^TestHelperConsoleProbe$", "-test.count=1")
	cmd.Dir = base
	cmd.Env = append(os.Environ(), envConsoleProbe+"="+string(args), "HOME="+base, "CMLAB_HOME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s\n%s", err, out, stderr.String())
	}
	var res consoleProbeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	t.Logf("probe as uid %d: %+v", res.Uid, res)
	if res.Uid != 65534 || !strings.Contains(res.TokenErr, "permission denied") || !strings.HasPrefix(res.DialErr, "refused") {
		t.Fatalf("uid 65534 reached the operator token: %+v", res)
	}
	if res.CodeLab != 401 || res.CodeNone != 401 || res.Overview != 401 || res.Login != 401 || res.LoginSets {
		t.Fatalf("uid 65534 got into the console: %+v", res)
	}
}
