package reqindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/reqindex"
)

func openEngineVerifyAfter(t testing.TB, h home.Home) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Options{Home: h, NoSync: true, VerifyAfterOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	e.StartVerification()
	return e
}

func waitIndexVerified(t *testing.T, x *reqindex.Index) error {
	t.Helper()
	done, outcome := x.Verified()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("verification after open did not end within 30 s")
	}
	return outcome()
}

// TestDamagedIndexRebuiltAfterOpen: with VerifyAfterOpen (the daemon),
// Open checks the format and the covered seq only; damage they cannot see
// (a value byte flipped, data pages garbled) is found by the verification
// after open, which rebuilds the file from the log in place while ids
// are appended: every case ends rebuilt, with every answer (those
// appended meanwhile included) and the right count, in the file, and the
// next open trusts it.
func TestDamagedIndexRebuiltAfterOpen(t *testing.T) {
	for name, f := range damageCases() {
		t.Run(name, func(t *testing.T) {
			h, want := buildIndexed(t, 200)
			f(t, h, h.RequestIndexFile())
			e := openEngineVerifyAfter(t, h)
			x, err := e.RequestIndex(context.Background())
			if err != nil {
				e.Close()
				t.Fatal(err)
			}
			atOpen := x.Rebuilt()
			for k, v := range appendReqs(t, e, "d", 300) {
				want[k] = v
			}
			if err := waitIndexVerified(t, x); err != nil {
				e.Close()
				t.Fatalf("verification: %v", err)
			}
			if x.Rebuilt() == "" {
				e.Close()
				t.Fatal("damaged index trusted")
			}
			t.Logf("rebuilt at open: %q; finally: %s", atOpen, x.Rebuilt())
			checkAnswers(t, x, want)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = openEngineVerifyAfter(t, h)
			defer e.Close()
			x, err = e.RequestIndex(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := waitIndexVerified(t, x); err != nil || x.Rebuilt() != "" {
				t.Fatalf("the rebuilt index is not trusted: %v %q", err, x.Rebuilt())
			}
			checkAnswers(t, x, want)
			if n, _ := x.Len(); n != len(want) {
				t.Fatalf("%d ids stored, want %d", n, len(want))
			}
		})
	}
}
