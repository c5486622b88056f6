package labapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// MaxPollLimit caps the limit of GET /api/feedback.
const MaxPollLimit = 500

// pollChunk is how much of feedback.jsonl one read takes.
const pollChunk = 64 << 10

// FeedbackPage is the answer of GET /api/feedback.
type FeedbackPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"nextCursor"`
	// Malformed lists the complete lines this page consumed without
	// returning them because they are not valid entries (seed 000 rule
	// 5): the cursor moves past them, but never silently. Absent when
	// there are none, so the seed's shape is unchanged for clean stores.
	Malformed []MalformedLine `json:"malformed,omitempty"`
}

// MalformedLine is a complete line of feedback.jsonl that is not a valid
// entry: where it starts and ends (a cursor value each) and why.
type MalformedLine struct {
	Offset int64  `json:"offset"`
	End    int64  `json:"end"`
	Reason string `json:"reason"`
}

// PollFeedback reads the feedback store at path from the byte cursor since,
// following rules 1–7 of seed 000: the cursor is exclusive and advances only
// past complete lines; sessionID filters items but never the cursor; limit
// (≤ 0 means none, capped at MaxPollLimit) stops after that many returnable
// entries with the cursor just past the last one; complete lines that are
// not valid entries are consumed and listed in Malformed (never skipped
// silently); a missing file is empty; a cursor beyond the file (a store
// that a salvage or rebuild shortened included) or not just after a '\n'
// is INVALID_CURSOR.
//
// It seeks to since and reads forward, so its cost is proportional to the
// bytes after the cursor (and to limit), never to the size of the file.
func PollFeedback(path, since, sessionID string, limit int) (*FeedbackPage, error) {
	raw := strings.TrimSpace(since)
	if raw == "" {
		raw = "0"
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return nil, NewError(CodeInvalidCursor, "Invalid cursor: "+since, "Use the nextCursor returned by the previous poll (or start with since=0).")
		}
	}
	if limit <= 0 {
		limit = 0
	} else if limit > MaxPollLimit {
		limit = MaxPollLimit
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if raw == strings.Repeat("0", len(raw)) {
				return &FeedbackPage{Items: []json.RawMessage{}, NextCursor: "0"}, nil
			}
			return nil, NewError(CodeInvalidCursor, "Cursor beyond end of file: "+raw, "Reset since=0 (cursor must be <= current file size).").With("sizeBytes", 0)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	pos, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil || pos > size {
		return nil, NewError(CodeInvalidCursor, "Cursor beyond end of file: "+raw, "Reset since=0 (cursor must be <= current file size).").With("sizeBytes", size)
	}
	if pos > 0 {
		var b [1]byte
		if _, err := f.ReadAt(b[:], pos-1); err != nil {
			return nil, err
		}
		if b[0] != '\n' {
			return nil, NewError(CodeInvalidCursor, "Cursor is not aligned to a newline boundary: "+raw, "Reset since=0 or use the nextCursor returned by the previous poll.")
		}
	}
	page := &FeedbackPage{Items: []json.RawMessage{}}
	cursor := pos
	var pending []byte // bytes after cursor not yet ending in '\n'
	buf := make([]byte, pollChunk)
	off := pos
	for off < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		off += int64(n)
		pending = append(pending, buf[:n]...)
		for {
			nl := bytes.IndexByte(pending, '\n')
			if nl < 0 {
				break
			}
			line := pending[:nl]
			at := cursor
			cursor += int64(nl + 1)
			item, sid, reason := parseFeedbackLine(line)
			switch {
			case reason != "":
				page.Malformed = append(page.Malformed, MalformedLine{Offset: at, End: cursor, Reason: reason})
			case sessionID == "" || sid == sessionID:
				page.Items = append(page.Items, item)
			}
			pending = pending[nl+1:]
			if limit > 0 && len(page.Items) >= limit {
				page.NextCursor = strconv.FormatInt(cursor, 10)
				return page, nil
			}
		}
		if len(pending) == 0 {
			pending = pending[:0:0]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
	}
	page.NextCursor = strconv.FormatInt(cursor, 10)
	return page, nil
}

// parseFeedbackLine validates one complete line as a FeedbackEntry
// (strict: known fields only, schema version 1, id and createdAt present,
// ratings integers 0–100): the entry and its session id, or why it is not
// one.
func parseFeedbackLine(line []byte) (item json.RawMessage, sessionID, malformed string) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, "", "empty line"
	}
	if line[0] != '{' {
		return nil, "", "not a JSON object"
	}
	var e events.FeedbackEntry
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() {
		return nil, "", "not a feedback entry (parse error)"
	}
	if e.SchemaVersion != 1 || e.ID == "" || e.CreatedAt == "" {
		return nil, "", "not a feedback entry (schemaVersion 1, id and createdAt required)"
	}
	if e.Ratings != nil {
		for _, v := range ratingValues(e.Ratings) {
			if v != nil && (*v < 0 || *v > 100) {
				return nil, "", "rating out of range 0–100"
			}
		}
	}
	return json.RawMessage(bytes.Clone(line)), e.SessionID, ""
}

func ratingValues(r *events.Ratings) []*int {
	return []*int{r.Overall, r.Hook, r.Pacing, r.Script, r.Visuals, r.Motion, r.Captions, r.Sync}
}

// parseLimit reads limit like content-machine: leading digits of a base-10
// number; absent, not a number or ≤ 0 means none; capped at MaxPollLimit.
func parseLimit(s string) int {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg = s[0] == '-'
		s = s[1:]
	}
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 || neg {
		return 0
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n > MaxPollLimit {
		return MaxPollLimit
	}
	return n
}
