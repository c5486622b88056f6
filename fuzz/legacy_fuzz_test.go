package fuzz

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/fuzz/torture"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/internal/labtest"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
)

// postFeedback posts one feedback entry through a fresh server on eng.
func postFeedback(t *testing.T, eng *engine.Engine, notes string) *httptest.ResponseRecorder {
	t.Helper()
	srv, err := labtest.New(labapi.Options{Engine: eng, Listen: "127.0.0.1:0", OperatorToken: "tok", SessionID: "lab_legacy"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := httptest.NewRequest("POST", "http://127.0.0.1:7788/api/feedback", bytes.NewReader([]byte(`{"notes":"`+notes+`","ratings":{"overall":7}}`)))
	r.Header.Set("X-CM-LAB-TOKEN", "tok")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, r)
	return rec
}

// FuzzLegacyFeedback appends arbitrary bytes to feedback/feedback.jsonl as
// another program would (SPEC §4, legacy writers), then reopens the home
// and posts feedback. Properties: every complete foreign line that may be
// ingested (a JSON object whose id, if any, neither the log nor an earlier
// line holds: projections.ClassifyForeign) is kept byte for byte, in
// order, after the lines cmlab wrote before it; every other complete line
// is moved, byte for byte, to a file of its own in quarantine/ (issue 14:
// a corrupt line or a held id is never ingested); a trailing line without
// '\n' is never consumed (the post is refused with BUSY and the bytes
// stay); with no partial line, the post is accepted and the views
// (foreign lines included) are byte-identical to a rebuild from the log —
// nothing another program wrote is lost by a rebuild.
func FuzzLegacyFeedback(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_legacy","createdAt":"2026-02-06T00:00:00.000Z","notes":"from cm"}` + "\n"))
	f.Add([]byte("not json at all\n\n"))
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_half"`))
	f.Add([]byte("a\nb\r\nc"))
	f.Add([]byte{})
	f.Add([]byte("\x00\xff\n"))
	f.Add([]byte(`{"id":"cm_1"}` + "\n" + `{"id":"cm_1","again":true}` + "\n" + `{"id":7}` + "\n" + `{"note":"no id"}` + "\n"))
	f.Fuzz(func(t *testing.T, foreign []byte) {
		ctx := context.Background()
		dir := t.TempDir()
		h := home.Home{Dir: filepath.Join(dir, "home")}
		eng, err := engine.Open(ctx, engine.Options{Home: h, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if rec := postFeedback(t, eng, "before"); rec.Code != http.StatusOK {
			t.Fatalf("first post: %d %s", rec.Code, rec.Body.Bytes())
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(h.FeedbackFile())
		if err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(h.FeedbackFile(), os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(foreign)
		fh.Close()

		eng, err = engine.Open(ctx, engine.Options{Home: h, NoSync: true, FeedbackWait: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("reopen after a foreign append of %q: %v", foreign, err)
		}
		rec := postFeedback(t, eng, "after")
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(h.FeedbackFile())
		if err != nil {
			t.Fatal(err)
		}
		partial := len(foreign) > 0 && foreign[len(foreign)-1] != '\n'
		held := map[string]bool{}
		for line := range bytes.Lines(before) {
			if id, reason := projections.ClassifyForeign(bytes.TrimSuffix(line, []byte("\n")), func(string) bool { return false }); reason == "" {
				held[id] = true
			}
		}
		want := bytes.Clone(before)
		quarantined := map[string]bool{}
		if des, err := os.ReadDir(h.QuarantineDir()); err == nil {
			for _, de := range des {
				b, _ := os.ReadFile(filepath.Join(h.QuarantineDir(), de.Name()))
				quarantined[string(b)] = true
			}
		}
		for line := range bytes.Lines(foreign) {
			if line[len(line)-1] != '\n' {
				want = append(want, line...) // the partial line
				break
			}
			id, reason := projections.ClassifyForeign(line[:len(line)-1], func(id string) bool { return held[id] })
			if reason != "" {
				if !quarantined[string(line)] {
					t.Fatalf("foreign line %q (%s) is neither kept nor in quarantine/", line, reason)
				}
				// Set aside in place: blanked, same length, so no
				// cursor moves (issue 27 finding 6).
				want = append(want, bytes.Repeat([]byte{' '}, len(line)-1)...)
				want = append(want, '\n')
				continue
			}
			if id != "" {
				held[id] = true
			}
			want = append(want, line...)
		}
		if partial {
			if rec.Code == http.StatusOK {
				// Accepting is allowed only if the partial line is still there, untouched, at the end.
				t.Fatalf("post accepted while feedback.jsonl ends in a foreign partial line %q", foreign)
			}
			if rec.Code != http.StatusConflict {
				t.Fatalf("post with a foreign partial line: %d %s, want 409 BUSY", rec.Code, rec.Body.Bytes())
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the foreign partial line was touched:\nwant %q\ngot  %q", want, got)
			}
			return
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("post after complete foreign lines %q: %d %s", foreign, rec.Code, rec.Body.Bytes())
		}
		if !bytes.HasPrefix(got, want) {
			t.Fatalf("foreign lines not kept in place:\nwant prefix %q\ngot         %q", want, got)
		}
		if rest := got[len(want):]; bytes.Count(rest, []byte("\n")) != 1 || !bytes.Contains(rest, []byte(`"after"`)) {
			t.Fatalf("after the foreign lines, want exactly the new entry, got %q", rest)
		}
		rebuilt, err := torture.RebuildViews(ctx, h.Dir, filepath.Join(dir, "rebuild"))
		if err != nil {
			t.Fatal(err)
		}
		if d := torture.DiffViews(h.Dir, rebuilt); len(d) > 0 {
			t.Fatalf("foreign %q: views differ from a rebuild: %v", foreign, d)
		}
	})
}
