package daemon

import (
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

// envUIDProbe switches the test binary into TestHelperUIDProbe: requests
// sent to a daemon from a process of another uid.
const envUIDProbe = "CMLAB_TEST_UID_PROBE"

// uidProbeCall is one request of the probe; Lab adds the Lab token of
// /api/config.
type uidProbeCall struct {
	Method, Path, Body string
	Lab                bool
}

type uidProbeArgs struct {
	Listen string
	Calls  []uidProbeCall
}

// uidProbeAnswer is the status and body of one call.
type uidProbeAnswer struct {
	Status int
	Body   string
}

func TestHelperUIDProbe(t *testing.T) {
	raw := os.Getenv(envUIDProbe)
	if raw == "" {
		t.Skip("child process of the tests that run requests as another uid")
	}
	var a uidProbeArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	do := func(method, path, body, tok string) uidProbeAnswer {
		req, _ := http.NewRequest(method, "http://"+a.Listen+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("X-CM-LAB-TOKEN", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return uidProbeAnswer{-1, err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return uidProbeAnswer{resp.StatusCode, string(b)}
	}
	var cfg struct {
		Token string `json:"token"`
	}
	json.Unmarshal([]byte(do("GET", "/api/config", "", "").Body), &cfg)
	out := []uidProbeAnswer{}
	for _, c := range a.Calls {
		tok := ""
		if c.Lab {
			tok = cfg.Token
		}
		out = append(out, do(c.Method, c.Path, c.Body, tok))
	}
	json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
}

// runUIDProbe runs calls against listen from a process of uid (the test
// binary copied to bin, which that uid can execute).
func runUIDProbe(t *testing.T, bin string, uid int, listen string, calls []uidProbeCall) []uidProbeAnswer {
	t.Helper()
	var res []uidProbeAnswer
	runProbe(t, bin, uid, "TestHelperUIDProbe", envUIDProbe, uidProbeArgs{Listen: listen, Calls: calls}, &res)
	if len(res) != len(calls) {
		t.Fatalf("probe answered %d calls of %d: %+v", len(res), len(calls), res)
	}
	return res
}

// TestLabReadsNeedCallersRights (issue 27 finding 5): a run directory of
// mode 0700 holding 0600 video.mp4 and script.json, owned by uid 65533,
// under an allowed root. Imported by the daemon's owner, its files are
// served to 65533 (their owner) and refused to uid 65534, who can also
// not import it; a world-readable run beside it is served to both.
func TestLabReadsNeedCallersRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run probes as uids 65533 and 65534 (SysProcAttr.Credential); run the tests as root to cover it")
	}
	base, bin := foreignBase(t, "cmlab-peer-")
	runs := filepath.Join(base, "runs")
	mkrun := func(name string, dirMode, fileMode os.FileMode) string {
		d := filepath.Join(runs, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, c := range map[string]string{"video.mp4": "VIDEO-" + name, "script.json": `{"meta":{"topic":"` + name + `"}}`} {
			p := filepath.Join(d, f)
			if err := os.WriteFile(p, []byte(c), fileMode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, fileMode)
			os.Chown(p, 65533, 65533)
		}
		os.Chmod(d, dirMode)
		os.Chown(d, 65533, 65533)
		return d
	}
	private := mkrun("private", 0o700, 0o600)
	public := mkrun("public", 0o755, 0o644)
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}

	info := runDaemon(t, Options{Home: h, Listen: "127.0.0.1:0", AllowRoots: []string{runs}})
	// The owner (this test, root) imports both runs with the Lab token.
	owner := runUIDProbe(t, bin, 0, info.Listen, []uidProbeCall{
		{"POST", "/api/runs/import", `{"path":"` + private + `"}`, true},
		{"POST", "/api/runs/import", `{"path":"` + public + `"}`, true},
	})
	var privRun, pubRun struct {
		RunID string `json:"runId"`
	}
	if owner[0].Status != 200 || json.Unmarshal([]byte(owner[0].Body), &privRun) != nil || owner[1].Status != 200 || json.Unmarshal([]byte(owner[1].Body), &pubRun) != nil {
		t.Fatalf("owner's imports: %+v", owner)
	}
	calls := []uidProbeCall{
		{"GET", "/api/runs/" + privRun.RunID + "/video", "", false},
		{"GET", "/api/runs/" + privRun.RunID + "/artifact/script.json", "", false},
		{"POST", "/api/runs/import", `{"path":"` + private + `"}`, true},
		{"GET", "/api/runs/" + pubRun.RunID + "/video", "", false},
		{"GET", "/api/runs/" + pubRun.RunID + "/artifact/script.json", "", false},
	}
	foreign := runUIDProbe(t, bin, 65534, info.Listen, calls)
	for i := 0; i < 3; i++ {
		if foreign[i].Status != 403 || strings.Contains(foreign[i].Body, "VIDEO-private") || strings.Contains(foreign[i].Body, `"private"`) {
			t.Errorf("uid 65534 %s %s: %d %q; want 403 and none of the file", calls[i].Method, calls[i].Path, foreign[i].Status, foreign[i].Body)
		}
	}
	if foreign[3].Status != 200 || foreign[3].Body != "VIDEO-public" || foreign[4].Status != 200 || strings.TrimSpace(foreign[4].Body) != `{"meta":{"topic":"public"}}` {
		t.Errorf("uid 65534 on the world-readable run: %+v", foreign[3:])
	}
	own := runUIDProbe(t, bin, 65533, info.Listen, calls)
	if own[0].Status != 200 || own[0].Body != "VIDEO-private" || own[1].Status != 200 || strings.TrimSpace(own[1].Body) != `{"meta":{"topic":"private"}}` || own[2].Status != 200 {
		t.Errorf("uid 65533 (the files' owner): %+v", own[:3])
	}
}
