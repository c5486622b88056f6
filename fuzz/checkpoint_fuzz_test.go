package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/fuzz/torture"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// checkpointTemplate builds a home with a log of Lab and step events and
// its views, closes it, and returns the home, its checkpoint bytes and a
// rebuild of its views to compare with.
func checkpointTemplate(tb testing.TB, dir string) (tmpl string, cp []byte, rebuilt string) {
	tb.Helper()
	a := newAPITarget(tb, dir)
	for i := 0; i < 40; i++ {
		body := fmt.Sprintf(`{"ratings":{"overall":%d},"notes":"note %d","tags":["t%d"]}`, i*2, i, i%3)
		if rec := a.post("/api/feedback", fmt.Sprintf("cp-%d", i%30), []byte(body)); rec.Code != 200 && rec.Code != 409 {
			tb.Fatalf("feedback: %d %s", rec.Code, rec.Body.Bytes())
		}
	}
	if err := a.eng.Checkpoint(); err != nil {
		tb.Fatal(err)
	}
	for i := 40; i < 50; i++ { // events after the checkpoint: catch-up has work
		a.post("/api/feedback", "", []byte(fmt.Sprintf(`{"notes":"late %d"}`, i)))
	}
	// Keep the checkpoint written mid-way, not the one Close writes.
	tmpl = filepath.Join(dir, "home")
	cp, err := os.ReadFile(home.Home{Dir: tmpl}.CheckpointFile())
	if err != nil {
		tb.Fatal(err)
	}
	snap := map[string][]byte{}
	filepath.WalkDir(tmpl, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			snap[p] = b
		}
		return nil
	})
	a.eng.Close()
	// Restore every file to its state before Close (views as the crash left them).
	for p, b := range snap {
		os.WriteFile(p, b, 0o600)
	}
	rebuilt, err = torture.RebuildViews(context.Background(), tmpl, filepath.Join(dir, "rebuilt"))
	if err != nil {
		tb.Fatal(err)
	}
	return tmpl, cp, rebuilt
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(t, 0o700)
		}
		if d.Name() == "LOCK" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(t, b, 0o600)
	})
}

// FuzzCheckpoint opens a home whose state/checkpoint.json holds arbitrary
// bytes (after a crash that left views at an earlier checkpoint). Property:
// Open never panics and never touches a path outside the home; a
// checkpoint that projections.ReadCheckpoint refuses (malformed, wrong
// version) is as good as none: Open either fails with an error or yields
// views byte-identical to a rebuild from the log, and so does the true
// checkpoint. A well-formed checkpoint that lies about sizes or seq is not
// held to that (see TestFindingLyingCheckpoint).
func FuzzCheckpoint(f *testing.F) {
	tmpl, cp, rebuilt := checkpointTemplate(f, f.TempDir())
	f.Add(cp)
	f.Add([]byte{})
	f.Add([]byte("{"))
	f.Add([]byte(`{"version":2,"seq":1,"views":{}}`))
	f.Add([]byte(`{"version":1,"seq":0,"views":{}}`))
	f.Add([]byte(`{"version":1,"seq":99999,"views":{"feedback/feedback.jsonl":1}}`))
	var c map[string]any
	json.Unmarshal(cp, &c)
	if views, ok := c["views"].(map[string]any); ok {
		half := map[string]any{}
		for k, v := range views {
			n, _ := v.(float64)
			half[k] = int64(n) / 2
		}
		b, _ := json.Marshal(map[string]any{"version": 1, "seq": c["seq"], "views": half})
		f.Add(b)
		b, _ = json.Marshal(map[string]any{"version": 1, "seq": 1, "views": views})
		f.Add(b)
		b, _ = json.Marshal(map[string]any{"version": 1, "seq": c["seq"], "views": map[string]any{"../../etc/passwd": 0, "feedback/feedback.jsonl": -5}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		h := home.Home{Dir: filepath.Join(dir, "home")}
		if err := copyTree(tmpl, h.Dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.CheckpointFile(), data, 0o600); err != nil {
			t.Fatal(err)
		}
		eng, err := engine.Open(context.Background(), engine.Options{Home: h, NoSync: true})
		if err != nil {
			return // a clear refusal is acceptable
		}
		if err := eng.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etc")); err == nil {
			t.Fatalf("checkpoint %q made Open touch a path outside the home", data)
		}
		if _, rerr := projections.ReadCheckpoint(home.Home{Dir: tmpl}); rerr != nil {
			t.Fatalf("template checkpoint unreadable: %v", rerr)
		}
		_, rerr := projections.ReadCheckpoint(probeHome(dir, data))
		if rerr == nil && !bytes.Equal(data, cp) {
			return // well-formed: may lie; see TestFindingLyingCheckpoint
		}
		if d := torture.DiffViews(h.Dir, rebuilt); len(d) > 0 {
			t.Fatalf("checkpoint %q: views differ from a rebuild: %v", data, d)
		}
		if b, _ := os.ReadFile(h.FeedbackFile()); len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
			t.Fatalf("checkpoint %q left a partial feedback line", data)
		}
	})
}

// probeHome is a scratch home whose checkpoint file holds data, to ask
// projections.ReadCheckpoint what it makes of the bytes.
func probeHome(dir string, data []byte) home.Home {
	h := home.Home{Dir: filepath.Join(dir, "probe")}
	os.MkdirAll(h.StateDir(), 0o700)
	os.WriteFile(h.CheckpointFile(), data, 0o600)
	return h
}

// TestFindingLyingCheckpoint holds a fix of a weakness found by
// FuzzCheckpoint: a well-formed state/checkpoint.json whose view sizes are
// not on a line boundary (or whose seq is older than the views) was
// trusted, and catch-up truncated the views mid-line and re-applied events
// on top, so the views no longer matched a rebuild. Only disk damage or
// tampering produces one; projections now checks each view's tail against
// the checkpoint (and the checkpoint against its own sum) and rebuilds a
// view that does not match.
func TestFindingLyingCheckpoint(t *testing.T) {
	dir := t.TempDir()
	tmpl, cp, rebuilt := checkpointTemplate(t, dir)
	var c projections.Checkpoint
	if err := json.Unmarshal(cp, &c); err != nil {
		t.Fatal(err)
	}
	for k := range c.Views {
		c.Views[k] /= 2
	}
	// As found (sizes halved, nothing else), and re-sealed: the sum made to
	// match, so that only the per-view tail check can catch the lie.
	c.Sum = 0
	found, _ := json.Marshal(c)
	c.Sum = crc32.Checksum(found, crc32.MakeTable(crc32.Castagnoli))
	resealed, _ := json.Marshal(c)
	for i, lie := range [][]byte{found, resealed} {
		h := home.Home{Dir: filepath.Join(dir, fmt.Sprintf("case%d", i))}
		if err := copyTree(tmpl, h.Dir); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(h.CheckpointFile(), lie, 0o600)
		eng, err := engine.Open(context.Background(), engine.Options{Home: h, NoSync: true})
		if err != nil {
			continue // refusing is fine
		}
		eng.Close()
		if d := torture.DiffViews(h.Dir, rebuilt); len(d) > 0 {
			t.Fatalf("checkpoint with view sizes cut mid-line %s: views differ from a rebuild: %v", lie, d)
		}
	}
}
