package reqindex_test

import (
	"context"
	"os"
	"testing"
)

// TestTruncatedIndexAtEveryPage cuts state/reqindex.db at every page
// boundary (and one byte past each) and opens the engine's index, both as
// the daemon does (VerifyAfterOpen) and as in-process commands do. A cut
// file once made bbolt fault on its map (SIGBUS/SIGSEGV: the process died,
// on every start). Every cut must instead be rebuilt from the log with
// every answer, and say why (a cut in the preallocated space past the
// pages in use may be trusted: the answers are all there).
func TestTruncatedIndexAtEveryPage(t *testing.T) {
	h, want := buildIndexed(t, 1500)
	orig, err := os.ReadFile(h.RequestIndexFile())
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	var cuts []int
	for off := 0; off < len(orig); off += page {
		cuts = append(cuts, off, off+1)
	}
	t.Logf("index file %d bytes, %d cuts", len(orig), len(cuts))
	for _, verifyAfter := range []bool{false, true} {
		for _, cut := range cuts {
			if err := os.WriteFile(h.RequestIndexFile(), orig[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			var e interface{ Close() error }
			eng := openEngine(t, h)
			if verifyAfter {
				eng.Close()
				eng = openEngineVerifyAfter(t, h)
			}
			e = eng
			x, err := eng.RequestIndex(context.Background())
			if err != nil {
				e.Close()
				t.Fatalf("cut at %d (verify after open %v): %v", cut, verifyAfter, err)
			}
			if verifyAfter {
				if err := waitIndexVerified(t, x); err != nil {
					e.Close()
					t.Fatalf("cut at %d: verification: %v", cut, err)
				}
			}
			// A cut past bbolt's high-water mark only drops preallocated
			// space, and may be trusted; the answers are checked anyway.
			if x.Rebuilt() == "" && cut <= len(orig)/2 {
				e.Close()
				t.Fatalf("cut at %d (verify after open %v): the cut file was trusted", cut, verifyAfter)
			}
			checkAnswers(t, x, want)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
