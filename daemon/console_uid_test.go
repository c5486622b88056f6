package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
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
	base, bin := foreignBase(t, "cmlab-console-foreign-")
	h := home.Home{Dir: filepath.Join(base, "home")}
	info := runDaemon(t, Options{Home: h, Listen: "127.0.0.1:0"})
	var res consoleProbeResult
	runProbe(t, bin, 65534, "TestHelperConsoleProbe", envConsoleProbe, foreignProbeArgs{Listen: info.Listen, Home: h.Dir}, &res)
	t.Logf("probe as uid %d: %+v", res.Uid, res)
	if res.Uid != 65534 || !strings.Contains(res.TokenErr, "permission denied") || !strings.HasPrefix(res.DialErr, "refused") {
		t.Fatalf("uid 65534 reached the operator token: %+v", res)
	}
	if res.CodeLab != 401 || res.CodeNone != 401 || res.Overview != 401 || res.Login != 401 || res.LoginSets {
		t.Fatalf("uid 65534 got into the console: %+v", res)
	}
}
