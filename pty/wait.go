package pty

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"time"
	"unicode/utf8"
)

// Match types of wait_for.
const (
	MatchSubstring = "substring"
	MatchRegex     = "regex"
	MatchPrompt    = "prompt"
)

// FromEnd as a from_cursor means "the end of the spool when the request
// arrives": a wait then matches only output that comes after it, never old
// output (the rule of seed 001 §4.1 for exec_interactive, applied to a
// wait that names no cursor). It is not a wire value: the HTTP bridge
// passes it for an omitted from_cursor, and every other negative cursor is
// INVALID_CURSOR.
const FromEnd int64 = math.MinInt64

// WaitParams is a wait_for request (SPEC §6). FromCursor FromEnd waits
// from the current end of the spool.
type WaitParams struct {
	Match      string `json:"match"`
	MatchType  string `json:"match_type"`
	FromCursor int64  `json:"from_cursor"`
	TimeoutMs  int64  `json:"timeout_ms"`
}

// Span is a byte range of the spool.
type Span struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// PromptInfo is the parsed sentinel of a prompt match.
type PromptInfo struct {
	TS      int64  `json:"ts"`
	Cwd     string `json:"cwd"`
	Exit    *int   `json:"exit"`
	BlockID string `json:"block_id,omitempty"`
}

// WaitResult is the response of wait_for, wait_prompt and expect_send
// (seed §5.3). resume_cursor is the only cursor: match_span.end on a
// match, the spool size on a timeout.
type WaitResult struct {
	OK           bool        `json:"ok"`
	Matched      bool        `json:"matched"`
	Error        string      `json:"error,omitempty"`
	MatchText    *string     `json:"match_text,omitempty"`
	MatchCursor  *int64      `json:"match_cursor,omitempty"`
	MatchSpan    *Span       `json:"match_span,omitempty"`
	ResumeCursor int64       `json:"resume_cursor"`
	Extra        *PromptInfo `json:"extra,omitempty"`
	Mode         string      `json:"mode,omitempty"`
	Foreground   string      `json:"foreground,omitempty"`
}

const (
	defaultWaitTimeout = 30 * time.Second
	maxWaitTimeout     = 10 * time.Minute
)

func waitTimeout(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return defaultWaitTimeout
	case time.Duration(ms)*time.Millisecond > maxWaitTimeout:
		return maxWaitTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// matcher finds the first match at or after from in the spool.
type matcher func(c *convState, from int64) (start, end int64, info *PromptInfo, ok bool)

func newMatcher(p WaitParams) (matcher, error) {
	switch p.MatchType {
	case "", MatchSubstring:
		if p.Match == "" {
			return nil, fmt.Errorf("%w: match is empty", ErrInvalidArgument)
		}
		pat := []byte(p.Match)
		return func(c *convState, from int64) (int64, int64, *PromptInfo, bool) {
			i := bytes.Index(c.spool[from:], pat)
			if i < 0 {
				return 0, 0, nil, false
			}
			s := from + int64(i)
			return s, s + int64(len(pat)), nil, true
		}, nil
	case MatchRegex:
		if p.Match == "" {
			return nil, fmt.Errorf("%w: match is empty", ErrInvalidArgument)
		}
		re, err := regexp.Compile(p.Match)
		if err != nil {
			return nil, fmt.Errorf("%w: match is not a valid regular expression: %v", ErrInvalidArgument, err)
		}
		return func(c *convState, from int64) (int64, int64, *PromptInfo, bool) {
			loc := re.FindIndex(c.spool[from:])
			if loc == nil || loc[1] == loc[0] && from+int64(loc[0]) == c.size() {
				return 0, 0, nil, false
			}
			return from + int64(loc[0]), from + int64(loc[1]), nil, true
		}, nil
	case MatchPrompt:
		return func(c *convState, from int64) (int64, int64, *PromptInfo, bool) {
			i := sort.Search(len(c.prompts), func(i int) bool { return c.prompts[i].lineStart >= from })
			if i == len(c.prompts) {
				return 0, 0, nil, false
			}
			pr := c.prompts[i]
			return pr.lineStart, pr.lineEnd, &PromptInfo{TS: pr.ts, Cwd: pr.cwd, Exit: pr.exit, BlockID: pr.blockID}, true
		}, nil
	}
	return nil, fmt.Errorf("%w: match_type %q is not substring, regex or prompt", ErrInvalidArgument, p.MatchType)
}

// WaitFor waits until match appears in the spool at or after from_cursor
// (seed §5.3). It scans everything between from_cursor and the spool end,
// so no match inside the scanned range is skipped; it is woken by each
// commit of terminal output, never by a polling loop. A prompt match is
// final: the prompt and the END of the block it closes are committed in
// one append, so when the sentinel is visible the session is already idle
// (seed §4.4, §3.8).
func (m *Manager) WaitFor(ctx context.Context, conv string, p WaitParams) (WaitResult, error) {
	return m.wait(ctx, conv, p, false)
}

// WaitPrompt returns after a prompt sentinel at or after from_cursor AND
// mode idle (seed §4.7).
func (m *Manager) WaitPrompt(ctx context.Context, conv string, from, timeoutMs int64) (WaitResult, error) {
	return m.wait(ctx, conv, WaitParams{MatchType: MatchPrompt, FromCursor: from, TimeoutMs: timeoutMs}, true)
}

func (m *Manager) wait(ctx context.Context, conv string, p WaitParams, needIdle bool) (WaitResult, error) {
	if err := validConv(conv); err != nil {
		return WaitResult{}, err
	}
	match, err := newMatcher(p)
	if err != nil {
		return WaitResult{}, err
	}
	var size int64
	m.snapshot(conv, func(c *convState) { size = c.size() })
	if p.FromCursor == FromEnd {
		p.FromCursor = size
	}
	if p.FromCursor < 0 || p.FromCursor > size {
		return WaitResult{}, fmt.Errorf("%w: from_cursor %d is outside the spool [0, %d]", ErrInvalidCursor, p.FromCursor, size)
	}
	timer := time.NewTimer(waitTimeout(p.TimeoutMs))
	defer timer.Stop()
	// A substring cannot start before size-len+1 of a range already
	// scanned: later scans start there, so a long spool is scanned once.
	scan := p.FromCursor
	for {
		var (
			res     WaitResult
			found   bool
			changed chan struct{}
		)
		m.snapshot(conv, func(c *convState) {
			changed = c.changed
			s, e, info, ok := match(c, scan)
			if !ok && (p.MatchType == "" || p.MatchType == MatchSubstring) {
				scan = max(p.FromCursor, c.size()-int64(len(p.Match))+1)
			}
			if !ok || needIdle && c.mode() != ModeIdle {
				res.ResumeCursor = c.size()
				res.Mode = c.mode()
				return
			}
			found = true
			text := string(c.spool[s:e])
			res = WaitResult{OK: true, Matched: true, MatchText: &text, MatchCursor: &s,
				MatchSpan: &Span{Start: s, End: e}, ResumeCursor: e, Extra: info}
		})
		if found {
			return res, nil
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
			return WaitResult{}, ctx.Err()
		case <-m.closing:
			return WaitResult{}, ErrClosed
		}
		// Timeout: resume_cursor is the spool size (seed §4.3).
		m.snapshot(conv, func(c *convState) {
			res = WaitResult{OK: false, Matched: false, Error: "timeout", ResumeCursor: c.size(), Mode: c.mode()}
		})
		m.mu.Lock()
		sh := m.shells[conv]
		m.mu.Unlock()
		if sh != nil && sh.alive() {
			_, res.Foreground = sh.foreground()
		}
		return res, nil
	}
}

// ReadResult is the response of read_spool (seed §5.4).
type ReadResult struct {
	OK           bool   `json:"ok"`
	Data         string `json:"data"`
	Cursor       int64  `json:"cursor"`
	ResumeCursor int64  `json:"resume_cursor"`
}

// DefaultMaxRead is read_spool's max_bytes when none is given.
const DefaultMaxRead = 64 << 10

// MaxRead caps max_bytes.
const MaxRead = 4 << 20

// ReadSpool returns spool bytes from from_cursor, at most maxBytes, not
// cutting a UTF-8 character in two when the bytes are valid UTF-8.
func (m *Manager) ReadSpool(ctx context.Context, conv string, from, maxBytes int64) (ReadResult, error) {
	if err := validConv(conv); err != nil {
		return ReadResult{}, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRead
	}
	maxBytes = min(maxBytes, MaxRead)
	var res ReadResult
	var err error
	m.snapshot(conv, func(c *convState) {
		if from < 0 || from > c.size() {
			err = fmt.Errorf("%w: from_cursor %d is outside the spool [0, %d]", ErrInvalidCursor, from, c.size())
			return
		}
		res = ReadResult{OK: true, Cursor: from}
		res.Data, res.ResumeCursor = sliceUTF8(c.spool, from, maxBytes)
	})
	return res, err
}

// sliceUTF8 returns b[from:from+max] as a string, shortened so a valid
// UTF-8 character is not cut, and the cursor after it.
func sliceUTF8(b []byte, from, max int64) (string, int64) {
	end := min(from+max, int64(len(b)))
	if end < int64(len(b)) {
		// Back off at most 3 bytes to a character start.
		for k := end; k > from && k > end-4; k-- {
			if utf8.RuneStart(b[k]) {
				if r, _ := utf8.DecodeRune(b[k:]); r != utf8.RuneError {
					end = k
				}
				break
			}
		}
	}
	return string(b[from:end]), end
}
