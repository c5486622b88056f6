package reqindex_test

import (
	"context"
	"testing"

	"github.com/cmlab/cmlab/internal/linktest"
)

// TestLinkedIndexNeverWrittenThrough: state/reqindex.db replaced by a link
// to a copy elsewhere was opened through the link and written by bbolt
// (the damage matrix's reqindex/symlink-elsewhere). The link is replaced
// by a rebuilt index; its target keeps every byte.
func TestLinkedIndexNeverWrittenThrough(t *testing.T) {
	h, want := buildIndexed(t, 200)
	v := linktest.MoveAway(t, h.RequestIndexFile())
	e := openEngine(t, h)
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if x.Rebuilt() == "" {
		t.Error("an index behind a link was trusted")
	}
	checkAnswers(t, x, want)
	if _, err := e.Append(context.Background(), reqEvent(t, "after-link")); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	v.Unchanged(t)
	linktest.Regular(t, h.RequestIndexFile())
}
