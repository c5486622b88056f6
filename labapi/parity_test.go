package labapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/google/uuid"
)

// The parity suite: testdata/parity/cases.json is a script of fixture
// writes and requests (run directories made the way content-machine's Lab
// tests make them); testdata/parity/golden.json holds the answers
// content-machine's own Lab server gave to it, recorded by
// testdata/parity/record.ts running their server under Node (see the
// README there). TestContentMachineParity replays the same script against
// cmlab and holds every answer to the recorded one, route by route:
// status, the headers that matter (Content-Type, Content-Range,
// Accept-Ranges, Cache-Control, Content-Length of non-JSON bodies), the
// JSON body, and the records the stores hold at the end (runs.jsonl,
// experiments.jsonl, feedback.jsonl and the export file).
//
// Both sides normalize the same way (parityNorm): captured ids, the
// temporary base directory, timestamps, UUIDs, mtimes, cursors and the
// version become placeholders. The only thing not compared is the "fix"
// hint of error contexts: cmlab's name cmlab's commands.

type parityStep struct {
	Write      string            `json:"write"`
	Text       string            `json:"text"`
	JSON       json.RawMessage   `json:"json"`
	SleepMs    int               `json:"sleepMs"`
	File       string            `json:"file"`
	JSONL      bool              `json:"jsonl"`
	Name       string            `json:"name"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Body       any               `json:"body"`
	Headers    map[string]string `json:"headers"`
	Capture    map[string]string `json:"capture"`
	IgnoreBody bool              `json:"ignoreBody"`
	NoToken    bool              `json:"noToken"`
}

type parityAnswer struct {
	Name           string            `json:"name"`
	Status         int               `json:"status,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	JSON           any               `json:"json,omitempty"`
	Text           *string           `json:"text,omitempty"`
	File           any               `json:"file,omitempty"`
	EndsWithNewine bool              `json:"endsWithNewline,omitempty"`
}

var (
	parityHeaders = []string{"content-type", "content-range", "accept-ranges", "cache-control", "content-length"}
	parityTS      = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)
	parityUUID    = regexp.MustCompile(`(?:[a-z]+_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	parityExport  = regexp.MustCompile(`(export-\{SESSION\}-)\d+(\.json)`)
	paritySubst   = regexp.MustCompile(`\{([A-Z_0-9]+)\}`)
	parityDigits  = regexp.MustCompile(`^\d+$`)
)

// parityNorm is record.ts's norm: the same placeholders for the same things.
type parityNorm struct {
	base string
	caps map[string]string
}

func (n parityNorm) str(s string) string {
	var names []string
	for k, v := range n.caps {
		if k != "EXPORT" && k != "CURSOR" && v != "" {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if len(n.caps[names[i]]) != len(n.caps[names[j]]) {
			return len(n.caps[names[i]]) > len(n.caps[names[j]])
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		s = strings.ReplaceAll(s, n.caps[k], "{"+k+"}")
	}
	s = strings.ReplaceAll(s, n.base, "{BASE}")
	s = parityTS.ReplaceAllString(s, "{TS}")
	s = parityUUID.ReplaceAllString(s, "{ID}")
	return parityExport.ReplaceAllString(s, "${1}{MS}${2}")
}

func (n parityNorm) value(v any, key string) any {
	switch x := v.(type) {
	case float64:
		if key == "mtimeMs" {
			return "{MTIME}"
		}
	case string:
		switch {
		case key == "version":
			return "{VERSION}"
		case key == "nextCursor" && parityDigits.MatchString(x):
			return "{CURSOR}"
		}
		return n.str(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = n.value(x[i], "")
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = n.value(e, k)
		}
		return out
	}
	return v
}

func (n parityNorm) subst(s string) string {
	return paritySubst.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		if name == "BASE" {
			return n.base
		}
		if v, ok := n.caps[name]; ok {
			return v
		}
		return m
	})
}

func (n parityNorm) substDeep(v any) any {
	switch x := v.(type) {
	case string:
		return n.subst(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = n.substDeep(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = n.substDeep(e)
		}
		return out
	}
	return v
}

func parityPick(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// dropFix removes error.context.fix from a normalized answer.
func dropFix(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	e, ok := m["error"].(map[string]any)
	if !ok {
		return v
	}
	if c, ok := e["context"].(map[string]any); ok {
		delete(c, "fix")
		if len(c) == 0 {
			delete(e, "context")
		}
	}
	return v
}

func TestContentMachineParity(t *testing.T) {
	var cases struct {
		Steps []parityStep `json:"steps"`
	}
	var golden []parityAnswer
	for name, v := range map[string]any{"cases.json": &cases, "golden.json": &golden} {
		b, err := os.ReadFile(filepath.Join("testdata", "parity", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	base := t.TempDir()
	h := home.Home{Dir: filepath.Join(base, "home")}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	allowed := filepath.Join(base, "allowed")
	if err := os.MkdirAll(allowed, 0o700); err != nil {
		t.Fatal(err)
	}
	ui, err := filepath.Abs(filepath.Join("testdata", "labclient"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(withReadModels(t, Options{Engine: eng, Listen: "127.0.0.1:0", SessionID: "lab_" + uuid.NewString(),
		AllowedRoots: []string{allowed}, Version: "test", UIDir: ui}))
	if err != nil {
		t.Fatal(err)
	}
	tok := srv.LabToken() // what /api/config hands their client, and all it uses
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	srv.SetListen(strings.TrimPrefix(hs.URL, "http://"))

	n := parityNorm{base: base, caps: map[string]string{}}
	var got []parityAnswer
	for _, st := range cases.Steps {
		switch {
		case st.Write != "":
			p := filepath.Join(base, st.Write)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			data := []byte(st.Text)
			if st.JSON != nil {
				var buf bytes.Buffer
				json.Compact(&buf, st.JSON) // JSON.stringify's bytes
				data = buf.Bytes()
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		case st.SleepMs > 0:
			time.Sleep(time.Duration(st.SleepMs) * time.Millisecond) // distinct createdAt values, not synchronisation
			continue
		case st.File != "":
			b, err := os.ReadFile(n.subst(st.File))
			if err != nil {
				t.Fatalf("%s: %v", st.Name, err)
			}
			var v any
			if st.JSONL {
				var lines []any
				for _, l := range strings.Split(string(b), "\n") {
					if strings.TrimSpace(l) == "" {
						continue
					}
					var x any
					if err := json.Unmarshal([]byte(l), &x); err != nil {
						t.Fatalf("%s: line %q: %v", st.Name, l, err)
					}
					lines = append(lines, x)
				}
				v = lines
			} else if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v", st.Name, err)
			}
			got = append(got, parityAnswer{Name: st.Name, File: n.value(v, ""), EndsWithNewine: bytes.HasSuffix(b, []byte("\n"))})
			continue
		}
		var body io.Reader
		if st.Body != nil {
			b, _ := json.Marshal(n.substDeep(st.Body))
			body = bytes.NewReader(b)
		}
		req, err := http.NewRequest(st.Method, hs.URL+n.subst(st.Path), body)
		if err != nil {
			t.Fatal(err)
		}
		if st.Method == "POST" {
			req.Header.Set("Content-Type", "application/json")
			if !st.NoToken {
				req.Header.Set("X-CM-LAB-TOKEN", tok)
			}
		}
		for k, v := range st.Headers {
			req.Header.Set(k, n.subst(v))
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", st.Name, err)
		}
		text, _ := io.ReadAll(res.Body)
		res.Body.Close()
		a := parityAnswer{Name: st.Name, Status: res.StatusCode, Headers: map[string]string{}}
		var data any
		isJSON := strings.Contains(res.Header.Get("Content-Type"), "application/json")
		if isJSON {
			if err := json.Unmarshal(text, &data); err != nil {
				t.Fatalf("%s: %v: %s", st.Name, err, text)
			}
		}
		for _, hname := range parityHeaders {
			v := res.Header.Values(hname)
			if len(v) == 0 || (hname == "content-length" && (isJSON || st.IgnoreBody)) {
				continue
			}
			a.Headers[hname] = strings.Join(v, ", ")
		}
		if st.Method == "HEAD" && a.Headers["content-length"] == "" && res.ContentLength >= 0 {
			a.Headers["content-length"] = strconv.FormatInt(res.ContentLength, 10)
		}
		for name, path := range st.Capture {
			if v, ok := parityPick(data, path).(string); ok {
				n.caps[name] = v
			}
		}
		if !st.IgnoreBody {
			if isJSON {
				a.JSON = n.value(data, "")
			} else {
				s := n.str(string(text))
				a.Text = &s
			}
		}
		got = append(got, a)
	}

	// The views this home holds are a pure function of its log (what
	// `cmlab rebuild --check` verifies): rebuilt with the run directories
	// gone — the metric snapshots and report paths come from the events,
	// never from the files — they are the same bytes.
	if err := os.RemoveAll(allowed); err != nil {
		t.Fatal(err)
	}
	rebuilt := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), eng.Log().Events(1), rebuilt, projections.RebuildOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if d, err := projections.Compare(h, rebuilt); err != nil || d != nil {
		t.Errorf("rebuild --check: %v %v", d, err)
	}

	if len(got) != len(golden) {
		t.Fatalf("%d answers, golden has %d", len(got), len(golden))
	}
	for i, want := range golden {
		g := got[i]
		if g.Name != want.Name {
			t.Fatalf("answer %d is %q, golden %q: cases.json and golden.json disagree (re-record)", i, g.Name, want.Name)
		}
		if g.Status != want.Status {
			t.Errorf("%s: status %d, content-machine %d (%s)", want.Name, g.Status, want.Status, show(g.JSON, g.Text))
		}
		if want.Headers == nil {
			want.Headers = map[string]string{}
		}
		if want.File == nil && !reflect.DeepEqual(g.Headers, want.Headers) {
			t.Errorf("%s: headers\n  cmlab           %v\n  content-machine %v", want.Name, g.Headers, want.Headers)
		}
		if !reflect.DeepEqual(dropFix(g.JSON), dropFix(want.JSON)) {
			t.Errorf("%s: body\n  cmlab           %s\n  content-machine %s", want.Name, show(g.JSON, nil), show(want.JSON, nil))
		}
		if (g.Text == nil) != (want.Text == nil) || (g.Text != nil && *g.Text != *want.Text) {
			t.Errorf("%s: text %s, content-machine %s", want.Name, show(nil, g.Text), show(nil, want.Text))
		}
		if !reflect.DeepEqual(g.File, want.File) || g.EndsWithNewine != want.EndsWithNewine {
			t.Errorf("%s: contents (final newline %v/%v)\n  cmlab           %s\n  content-machine %s", want.Name, g.EndsWithNewine, want.EndsWithNewine, show(g.File, nil), show(want.File, nil))
		}
	}
}

func show(v any, s *string) string {
	if s != nil {
		return strconv.Quote(*s)
	}
	b, _ := json.Marshal(v)
	return fmt.Sprint(string(b))
}
