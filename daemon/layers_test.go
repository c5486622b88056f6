package daemon

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers is the repository's layering, lowest first: a package imports
// only packages of a lower layer (STYLE: data flows one way). It is
// written here once; TestLayering holds every package of the module to
// it, and a new package is not done until it has its row.
var layers = [][]string{
	{"events", "pagesec", "internal/crashchild", "internal/linktest", "cmd/internal/cmdline", "labapi/wire"}, // the event envelope and payloads; the pages' security headers; the crash tests' child process; the link-planting tests' victims; what both binaries answer alike; the Lab API's requests and error bodies as its two clients speak them: depend on nothing of ours
	{"home", "confine"}, // the home's directories and files; path confinement
	{"wal", "projections", "ship/cursor", "mcp", "internal/faultfs", "internal/cmhome"}, // the log; the views; the shipping cursor file; MCP tools over HTTP; the durable writes' fault seam for tests
	{"snapshot", "reqindex", "internal/shiptest"},                                       // read-model snapshots; the request-id index; shipping tests' forger
	{"engine"},                                     // append → log → views
	{"steps", "pty"},                               // the step journal; the terminal
	{"recovery", "retention", "discovery"},         // start-up recovery; the retention model; finding the daemon (lock, socket)
	{"compact", "replay", "console"},               // compaction; replay and its tools; the operator console's pages, log pages and terminal rendering
	{"ship", "labapi", "labui"},                    // shipping to NATS; the HTTP face and its client; the Lab page
	{"daemon", "fuzz/torture", "internal/labtest"}, // the composition root; crash workloads; test builders
	{"bench"},                                // benchmarks (over the daemon)
	{"cmd/cmlab", "cmd/cmlab-bench", "fuzz"}, // commands; fuzz targets (tests only)
}

const module = "github.com/cmlab/cmlab/"

// TestLayering: no package imports one of its own layer or above
// (non-test imports), and every package of the module is in layers.
func TestLayering(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layerOf[p] = i
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "static") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(p, 0)
		if err != nil {
			if _, ok := errors.AsType[*build.NoGoError](err); ok {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		pkgs = append(pkgs, rel)
		from, ok := layerOf[rel]
		if !ok {
			t.Errorf("package %s is in no layer: add it to layers in daemon/layers_test.go", rel)
			return nil
		}
		for _, imp := range bp.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			to, ok := layerOf[dep]
			if !ok {
				t.Errorf("%s imports %s, which is in no layer", rel, dep)
				continue
			}
			if to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go to lower layers only", rel, from, dep, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range layerOf {
		if !slices.Contains(pkgs, p) {
			t.Errorf("layers names %s, which is no package of the module", p)
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages found under %s: %v", len(pkgs), root, pkgs)
	}
}
