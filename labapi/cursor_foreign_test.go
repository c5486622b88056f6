package labapi

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// TestCursorHoldsAcrossForeignSetAside (issue 27 finding 6, seed 000
// rules 1 and 5): another program appends a line the log may not ingest
// (malformed, or repeating a held id), exactly as long as an entry or
// not; a poll passes it; the sweep sets it aside; then an entry is
// posted. The client resuming at its nextCursor must get exactly that
// next entry (no INVALID_CURSOR, nothing skipped), the line must still
// occupy its bytes (blanked in place, never moved or cut), its original
// bytes must be in quarantine/, the set-aside must be recorded in the
// log (a feedback.ingested event naming the reason and the quarantine
// file), and the views must equal a rebuild.
func TestCursorHoldsAcrossForeignSetAside(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		foreign      func(entryLen int) string
	}{
		{"malformed, an entry's length", projections.SetAsideCorrupt, func(n int) string {
			return "{" + strings.Repeat("x", n-2) + "\n" // exactly n bytes
		}},
		{"malformed, shorter", projections.SetAsideCorrupt, func(int) string { return "{broken\n" }},
		{"malformed, longer", projections.SetAsideCorrupt, func(n int) string { return "{" + strings.Repeat("y", 3*n) + "\n" }},
		{"held id", projections.SetAsideDuplicate, nil}, // the first entry again
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTestLab(t)
			if r := tl.do("POST", "/api/feedback", `{"sessionId":"s","notes":"one"}`); r.status != 200 {
				t.Fatalf("first post: %d %s", r.status, r.body)
			}
			fb := tl.home.FeedbackFile()
			before, err := os.ReadFile(fb)
			if err != nil {
				t.Fatal(err)
			}
			var foreign string
			if tc.foreign != nil {
				foreign = tc.foreign(len(before))
			} else {
				foreign = string(before)
			}
			f, err := os.OpenFile(fb, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(foreign)
			f.Close()

			page, err := PollFeedback(fb, strconv.Itoa(len(before)), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			cursor := page.NextCursor
			if want := strconv.Itoa(len(before) + len(foreign)); cursor != want {
				t.Fatalf("the poll stopped at %s, want %s past the foreign line", cursor, want)
			}

			if err := tl.eng.IngestFeedback(context.Background()); err != nil { // the one-second sweep
				t.Fatal(err)
			}
			if r := tl.do("POST", "/api/feedback", `{"sessionId":"s","notes":"two"}`); r.status != 200 {
				t.Fatalf("next post: %d %s", r.status, r.body)
			}
			page, err = PollFeedback(fb, cursor, "", 0)
			if err != nil {
				t.Fatalf("resuming at %s: %v", cursor, err)
			}
			after, err := os.ReadFile(fb)
			if err != nil {
				t.Fatal(err)
			}
			all, err := PollFeedback(fb, "0", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			allIDs := ids(t, all)
			next := allIDs[len(allIDs)-1]
			if got := ids(t, page); len(got) != 1 || got[0] != next {
				t.Fatalf("resuming at %s: ids %q, want [%s] (malformed %+v)", cursor, got, next, page.Malformed)
			}
			if len(allIDs) != 2 {
				t.Fatalf("a poll from 0 returns %q, want the two posted entries only", allIDs)
			}
			blank := strings.Repeat(" ", len(foreign)-1) + "\n"
			if !bytes.HasPrefix(after, []byte(string(before)+blank)) {
				t.Fatalf("feedback.jsonl:\n%q\nwant the foreign line blanked in place after\n%q", after, before)
			}
			aside := tl.eng.FeedbackSetAside()
			if len(aside) != 1 || aside[0].Offset != int64(len(before)) || aside[0].Reason != tc.reason {
				t.Fatalf("set aside %+v", aside)
			}
			q, err := os.ReadFile(filepath.Join(tl.home.Dir, aside[0].Quarantine))
			if err != nil || string(q) != foreign {
				t.Fatalf("quarantine %s holds %q (%v), want %q", aside[0].Quarantine, q, err, foreign)
			}
			var recorded []*events.FeedbackIngested
			for ev, err := range tl.eng.Log().Events(1) {
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type == events.TypeFeedbackIngested {
					p, err := events.DecodeAs[*events.FeedbackIngested](ev)
					if err != nil {
						t.Fatal(err)
					}
					recorded = append(recorded, p)
				}
			}
			if len(recorded) != 1 || recorded[0].SetAside != tc.reason || recorded[0].Quarantine != aside[0].Quarantine ||
				recorded[0].Offset != int64(len(before)) || string(recorded[0].Raw) != blank[:len(blank)-1] {
				t.Fatalf("recorded %+v", recorded)
			}
			verifyViewsEqualRebuild(t, tl)
		})
	}
}

// verifyViewsEqualRebuild checks the live views (flushed by a
// checkpoint) against a rebuild of the log into a fresh home.
func verifyViewsEqualRebuild(t *testing.T, tl *testLab) {
	t.Helper()
	if err := tl.eng.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rebuilt := home.Home{Dir: t.TempDir()}
	if _, err := projections.Rebuild(context.Background(), tl.eng.Log().Events(1), rebuilt, projections.RebuildOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if d, err := projections.Compare(tl.home, rebuilt); err != nil || d != nil {
		t.Fatalf("views differ from a rebuild: %v %v", d, err)
	}
}
