package engine

import (
	"context"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// TestApplyDecodesNoIDsBeforeTheSetExists: keeping the set of the log's
// feedback ids up to date (addIDs, called by apply for every feedback
// event before the acknowledgement) costs nothing while no foreign line
// has made the engine build the set: the event is not decoded. Once the
// set exists, applied ids are added to it.
func TestApplyDecodesNoIDsBeforeTheSetExists(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	e, err := Open(context.Background(), Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ev := feedbackEvent("fb_ids_1")
	if n := testing.AllocsPerRun(100, func() { e.addIDs(ev) }); n != 0 {
		t.Fatalf("addIDs without the set: %.0f allocations per event, want 0 (no decode)", n)
	}
	held, err := e.heldIDs()
	if err != nil {
		t.Fatal(err)
	}
	if held("fb_ids_2") {
		t.Fatal("fb_ids_2 held before it was appended")
	}
	mustAppend(t, e, feedbackEvent("fb_ids_2"))
	if !held("fb_ids_2") {
		t.Fatal("fb_ids_2 appended after the set was built is not in it")
	}
}
