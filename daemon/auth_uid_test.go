package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// envForeignProbe switches the test binary into foreignProbe: the part of
// TestForeignUserCannotDriveTerminal that runs under another uid.
const envForeignProbe = "CMLAB_TEST_FOREIGN_PROBE"

// foreignProbeArgs tell the probe where the daemon and its home are.
type foreignProbeArgs struct {
	Listen, Home, Marker string
}

// foreignProbeResult is what the probe saw, printed as JSON on stdout.
type foreignProbeResult struct {
	Uid          int    `json:"uid"`
	TokenErr     string `json:"tokenErr"`     // reading state/token
	ListErr      string `json:"listErr"`      // listing the home
	DialErr      string `json:"dialErr"`      // labapi.Dial of the home
	ConfigStatus int    `json:"configStatus"` // GET /api/config
	LabToken     string `json:"labToken"`
	Exec         int    `json:"exec"`       // POST exec_block with the Lab token
	ExecBearer   int    `json:"execBearer"` // the same as Authorization: Bearer
	MCP          int    `json:"mcp"`        // POST /mcp tools/call pty_exec with the Lab token
	Feedback     int    `json:"feedback"`   // POST /api/feedback with the Lab token (a Lab route)
	// The operator console (issue 30 §1): a login code asked for with the
	// Lab token, a console page with it, a guessed code exchanged.
	ConsoleCode     int `json:"consoleCode"`
	ConsoleOverview int `json:"consoleOverview"`
	ConsoleLogin    int `json:"consoleLogin"`
	ConsoleCookies  int `json:"consoleCookies"` // cookies the guessed code got
}

func TestHelperForeignProbe(t *testing.T) {
	raw := os.Getenv(envForeignProbe)
	if raw == "" {
		t.Skip("child process of TestForeignUserCannotDriveTerminal")
	}
	var a foreignProbeArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res := foreignProbeResult{Uid: os.Getuid()}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	h := home.Home{Dir: a.Home}
	_, err := os.ReadFile(h.TokenFile())
	res.TokenErr = errText(err)
	_, err = os.ReadDir(h.Dir)
	res.ListErr = errText(err)
	if c, closeFn, err := Dial(context.Background(), h); err == nil {
		closeFn()
		res.DialErr = fmt.Sprintf("dialled (remote=%v)", c.Remote)
	} else {
		res.DialErr = "refused: " + err.Error()
	}
	do := func(method, path, body string, hdr ...string) (int, []byte) {
		req, _ := http.NewRequest(method, "http://"+a.Listen+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var cfg struct {
		Token string `json:"token"`
	}
	var b []byte
	res.ConfigStatus, b = do("GET", "/api/config", "")
	json.Unmarshal(b, &cfg)
	res.LabToken = cfg.Token
	cmd := `{"cmd":"id -u > ` + a.Marker + `"}`
	res.Exec, _ = do("POST", "/api/pty/pwn/exec_block", cmd, "X-CM-LAB-TOKEN", cfg.Token)
	res.ExecBearer, _ = do("POST", "/api/pty/pwn/exec_block", cmd, "Authorization", "Bearer "+cfg.Token)
	res.MCP, _ = do("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pty_exec","arguments":{"conversation_id":"pwn","cmd":"id -u > `+a.Marker+`"}}}`,
		"X-CM-LAB-TOKEN", cfg.Token, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	res.Feedback, _ = do("POST", "/api/feedback", `{"notes":"from uid 65534"}`, "X-CM-LAB-TOKEN", cfg.Token)
	res.ConsoleCode, _ = do("POST", "/api/console/login-code", "", "X-CM-LAB-TOKEN", cfg.Token)
	res.ConsoleOverview, _ = do("GET", "/api/console/overview", "", "X-CM-LAB-TOKEN", cfg.Token)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Get("http://" + a.Listen + "/console/login?code=" + strings.Repeat("ab", 32)); err == nil {
		res.ConsoleLogin, res.ConsoleCookies = resp.StatusCode, len(resp.Cookies())
		resp.Body.Close()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// TestForeignUserCannotDriveTerminal is the repro of issue 15 §1: another
// local account (uid 65534) reaches the daemon over loopback and reads
// /api/config, but can neither read the operator token nor run a command
// in the daemon's terminal with the Lab token (exec_block, Bearer, /mcp).
// It needs root to run the probe under another uid.
func TestForeignUserCannotDriveTerminal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the probe as uid 65534 (SysProcAttr.Credential); run the tests as root to cover it")
	}
	// Everything the probe needs to reach is traversable by others; the
	// home alone is private (0700, token 0600): that is what is tested.
	base, bin := foreignBase(t, "cmlab-foreign-")
	marker := filepath.Join(base, "marker")
	h := home.Home{Dir: filepath.Join(base, "home")}
	info := runDaemon(t, Options{Home: h, Listen: "127.0.0.1:0"})
	var res foreignProbeResult
	runProbe(t, bin, 65534, "TestHelperForeignProbe", envForeignProbe, foreignProbeArgs{Listen: info.Listen, Home: h.Dir, Marker: marker}, &res)
	t.Logf("probe as uid %d: %+v", res.Uid, res)
	if res.Uid != 65534 {
		t.Fatalf("probe ran as uid %d", res.Uid)
	}
	if !strings.Contains(res.TokenErr, "permission denied") || !strings.Contains(res.ListErr, "permission denied") {
		t.Fatalf("uid 65534 read the home: token %q, list %q", res.TokenErr, res.ListErr)
	}
	if !strings.HasPrefix(res.DialErr, "refused") {
		t.Fatalf("uid 65534 dialled the home: %s", res.DialErr)
	}
	if res.ConfigStatus != 200 || res.LabToken == "" {
		t.Fatalf("/api/config as uid 65534: %d %q (the Lab contract serves it to any loopback client)", res.ConfigStatus, res.LabToken)
	}
	if res.Exec != 401 || res.ExecBearer != 401 || res.MCP != 401 {
		t.Fatalf("terminal with the Lab token: exec_block %d, bearer %d, /mcp %d; want 401", res.Exec, res.ExecBearer, res.MCP)
	}
	if res.Feedback != 200 {
		t.Fatalf("Lab route with the Lab token: %d", res.Feedback)
	}
	if res.ConsoleCode != 401 || res.ConsoleOverview != 401 || res.ConsoleLogin != 401 || res.ConsoleCookies != 0 {
		t.Fatalf("the console as uid 65534: login code %d, overview %d, a guessed code %d with %d cookies; want 401s and none",
			res.ConsoleCode, res.ConsoleOverview, res.ConsoleLogin, res.ConsoleCookies)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		b, _ := os.ReadFile(marker)
		t.Fatalf("the probe's command ran in the daemon's shell: %s wrote %q", marker, b)
	}
	tok, err := os.ReadFile(h.TokenFile())
	if err != nil || strings.TrimSpace(string(tok)) == res.LabToken {
		t.Fatalf("operator token %v; Lab token equals it: %v", err, strings.TrimSpace(string(tok)) == res.LabToken)
	}
}
