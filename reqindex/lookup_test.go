package reqindex_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/reqindex"
)

// TestObserveDoesNotWaitForLookup: a lookup reading the file does not hold
// up Observe, which runs on the log's acknowledgement path (every append
// of the home waits for it); the lookup, once let go, still answers, and
// so does one of the id just observed.
func TestObserveDoesNotWaitForLookup(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e := openEngine(t, h)
	defer e.Close()
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := appendReqs(t, e, "lk", 3)
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool // the next lookup is held, the later ones not
	armed.Store(true)
	reqindex.SetInLookup(x, func() {
		if armed.CompareAndSwap(true, false) {
			inside <- struct{}{}
			<-release
		}
	})
	type answer struct {
		rec reqindex.Record
		ok  bool
		err error
	}
	held := make(chan answer, 1)
	go func() {
		r, ok, err := x.Lookup("lk-1")
		held <- answer{r, ok, err}
	}()
	select {
	case <-inside:
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup never reached the file")
	}
	observed := make(chan struct{})
	go func() {
		x.Observe(reqEvent(t, "lk-new"))
		close(observed)
	}()
	select {
	case <-observed:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Observe waited for a lookup's read of the file")
	}
	close(release)
	a := <-held
	if a.err != nil || !a.ok || string(a.rec.Resp) != want["lk-1"] {
		t.Fatalf("held lookup: %+v", a)
	}
	if r, ok, err := x.Lookup("lk-new"); err != nil || !ok || r.Hash != "sha256-lk-new" {
		t.Fatalf("lookup of the id just observed: %+v %v %v", r, ok, err)
	}
}
