package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/labapi"
)

// validEntryLine is a FeedbackEntry line as the projector writes it.
func validEntryLine(id, session string, overall int) []byte {
	e := events.FeedbackEntry{SchemaVersion: 1, ID: id, CreatedAt: "2026-02-06T00:00:00.000Z", SessionID: session, RunID: "run_1", Ratings: &events.Ratings{Overall: &overall}, Notes: "ok", Tags: []string{"t"}}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}

func writeStore(t *testing.T, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "feedback.jsonl")
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func cursorCode(err error) string {
	var ae *labapi.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// FuzzFeedbackCursor polls an arbitrary feedback.jsonl from an arbitrary
// cursor with an arbitrary limit and session filter (labapi.PollFeedback,
// the function behind GET /api/feedback) and checks seed 000's rules:
// a cursor is accepted iff it is digits, within the file and just after a
// '\n'; nextCursor never goes backwards, never passes a partial line and
// lands on a line boundary; every item is a complete line after the cursor;
// the session filter never changes the cursor; limit caps the items; and
// paging with the limit returns exactly what one unlimited poll returns.
func FuzzFeedbackCursor(f *testing.F) {
	l1, l2 := validEntryLine("fb_1", "lab_a", 50), validEntryLine("fb_2", "lab_b", 100)
	seed := append(append(append(append([]byte{}, l1...), '\n'), l2...), '\n')
	f.Add(seed, "0", "", int16(0))
	f.Add(seed, strconv.Itoa(len(l1)+1), "lab_b", int16(1))
	f.Add(append(bytes.Clone(seed), `{"schemaVersion":1,"id":"fb_3"`...), "0", "lab_a", int16(1))
	f.Add([]byte("not json\n\n{}\n"+string(l1)+"\n"), "10", "", int16(-3))
	f.Add([]byte{}, "0", "", int16(0))
	f.Add(seed, "0x10", "", int16(2))
	f.Add(seed, "99999999999999999999999", "", int16(600))
	f.Fuzz(func(t *testing.T, content []byte, since, session string, limit int16) {
		path := writeStore(t, content)
		lastNL := int64(bytes.LastIndexByte(content, '\n') + 1) // end of the complete lines
		page, err := labapi.PollFeedback(path, since, session, int(limit))

		// Which cursors are valid, computed independently.
		trimmed := string(bytes.TrimSpace([]byte(since)))
		if trimmed == "" {
			trimmed = "0"
		}
		pos, perr := strconv.ParseUint(trimmed, 10, 63)
		digits := true
		for _, c := range trimmed {
			if c < '0' || c > '9' {
				digits = false
			}
		}
		valid := digits && perr == nil && int64(pos) <= int64(len(content)) && (pos == 0 || content[pos-1] == '\n')
		if digits && perr != nil { // all digits but beyond int63: certainly past the file
			valid = false
		}
		if !valid {
			if err == nil {
				t.Fatalf("cursor %q accepted on a %d-byte store", since, len(content))
			}
			if code := cursorCode(err); code != labapi.CodeInvalidCursor {
				t.Fatalf("cursor %q: error %v, want INVALID_CURSOR", since, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid cursor %q refused: %v", since, err)
		}
		next, err := strconv.ParseInt(page.NextCursor, 10, 64)
		if err != nil {
			t.Fatalf("nextCursor %q is not a number", page.NextCursor)
		}
		start := int64(pos)
		if next < start {
			t.Fatalf("nextCursor %d went back from %d", next, start)
		}
		if next > lastNL && next > start {
			t.Fatalf("nextCursor %d passes the partial line after %d", next, lastNL)
		}
		if next > 0 && content[next-1] != '\n' {
			t.Fatalf("nextCursor %d is not on a line boundary", next)
		}
		max := int(limit)
		if max > labapi.MaxPollLimit {
			max = labapi.MaxPollLimit
		}
		if max > 0 && len(page.Items) > max {
			t.Fatalf("%d items for limit %d", len(page.Items), limit)
		}
		if max <= 0 && next != max64(start, lastNL) {
			t.Fatalf("unlimited poll stopped at %d, want %d", next, max64(start, lastNL))
		}
		window := content[start:next]
		for _, it := range page.Items {
			if !bytes.Contains(window, it) {
				t.Fatalf("item %q is not a complete line between %d and %d", it, start, next)
			}
			if !json.Valid(it) {
				t.Fatalf("item %q is not JSON", it)
			}
		}

		// The session filter never changes how far the cursor goes.
		if max <= 0 {
			all, err := labapi.PollFeedback(path, since, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if all.NextCursor != page.NextCursor {
				t.Fatalf("session filter moved the cursor: %s vs %s", page.NextCursor, all.NextCursor)
			}
			if len(page.Items) > len(all.Items) {
				t.Fatalf("filtered poll returned more items (%d) than unfiltered (%d)", len(page.Items), len(all.Items))
			}
		}

		// Paging with the limit returns exactly what one unlimited poll does.
		if max > 0 {
			want, err := labapi.PollFeedback(path, since, session, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []json.RawMessage
			cur := since
			for i := 0; ; i++ {
				p, err := labapi.PollFeedback(path, cur, session, int(limit))
				if err != nil {
					t.Fatalf("paging from %q: %v", cur, err)
				}
				got = append(got, p.Items...)
				if p.NextCursor == cur || len(p.Items) == 0 {
					if p.NextCursor != want.NextCursor {
						t.Fatalf("paging ended at %s, unlimited poll at %s", p.NextCursor, want.NextCursor)
					}
					break
				}
				cur = p.NextCursor
				if i > len(content)+2 {
					t.Fatal("paging does not terminate")
				}
			}
			if len(got) != len(want.Items) {
				t.Fatalf("paging returned %d items, one poll %d", len(got), len(want.Items))
			}
			for i := range got {
				if !bytes.Equal(got[i], want.Items[i]) {
					t.Fatalf("item %d differs: %q vs %q", i, got[i], want.Items[i])
				}
			}
		}
	})
}

// FuzzFeedbackLines puts one arbitrary line between two valid entries and
// checks that the valid neighbours are always returned, in order, that the
// line never makes the poll fail or stall (the cursor reaches the end of
// the complete lines), and that anything returned for the fuzzed line is a
// strict FeedbackEntry: decodable, schema version 1, ratings within 0–100.
func FuzzFeedbackLines(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_x","createdAt":"2026-02-06T00:00:00.000Z"}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_x","createdAt":"t","ratings":{"overall":101}}`))
	f.Add([]byte(`{"schemaVersion":2,"id":"fb_x","createdAt":"t"}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_x","createdAt":"t","bogus":1}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_x","createdAt":"t"} {}`))
	f.Add([]byte("\xff\xfe{"))
	f.Add([]byte(`{"schemaVersion":1,"id":"fb_x","createdAt":"t","ratings":{"overall":1.5}}`))
	f.Add(validEntryLine("fb_9", "lab_a", 0))
	f.Fuzz(func(t *testing.T, line []byte) {
		a, b := validEntryLine("fb_a", "lab_a", 1), validEntryLine("fb_b", "lab_a", 99)
		var content []byte
		content = append(append(content, a...), '\n')
		content = append(append(content, line...), '\n')
		content = append(append(content, b...), '\n')
		path := writeStore(t, content)
		page, err := labapi.PollFeedback(path, "0", "", 0)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if page.NextCursor != strconv.Itoa(len(content)) {
			t.Fatalf("nextCursor %s, want %d (end of complete lines)", page.NextCursor, len(content))
		}
		if len(page.Items) < 2 || !bytes.Equal(page.Items[0], a) || !bytes.Equal(page.Items[len(page.Items)-1], b) {
			t.Fatalf("valid neighbours lost: %d items", len(page.Items))
		}
		for _, it := range page.Items[1 : len(page.Items)-1] {
			var e events.FeedbackEntry
			dec := json.NewDecoder(bytes.NewReader(it))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("returned line %q is not a FeedbackEntry: %v", it, err)
			}
			if e.SchemaVersion != 1 || e.ID == "" {
				t.Fatalf("returned line %q lacks schemaVersion 1 or id", it)
			}
			if r := e.Ratings; r != nil {
				for _, v := range []*int{r.Overall, r.Hook, r.Pacing, r.Script, r.Visuals, r.Motion, r.Captions, r.Sync} {
					if v != nil && (*v < 0 || *v > 100) {
						t.Fatalf("returned line %q has a rating out of 0–100", it)
					}
				}
			}
		}
		// From the cursor after the first line, the first item is gone.
		p2, err := labapi.PollFeedback(path, strconv.Itoa(len(a)+1), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p2.Items) != len(page.Items)-1 {
			t.Fatalf("poll after line 1 returned %d items, want %d", len(p2.Items), len(page.Items)-1)
		}
	})
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
