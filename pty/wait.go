package pty

import (
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
	// Raw keeps a prompt match's match_text (the sentinel line); the
	// clean view answers "" for it (clean.go).
	Raw bool `json:"raw,omitempty"`
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

// matcher finds the first match at or after from in the spool of rd's
// view; prompts are the conversation's sentinel lines.
type matcher func(rd *spoolReader, prompts []promptRec, from int64) (start, end int64, info *PromptInfo, ok bool, err error)

func newMatcher(p WaitParams) (matcher, error) {
	switch p.MatchType {
	case "", MatchSubstring:
		if p.Match == "" {
			return nil, fmt.Errorf("%w: match is empty", ErrInvalidArgument)
		}
		pat := []byte(p.Match)
		return func(rd *spoolReader, _ []promptRec, from int64) (int64, int64, *PromptInfo, bool, error) {
			s, ok, err := rd.index(pat, from, rd.v.size)
			if !ok || err != nil {
				return 0, 0, nil, false, err
			}
			return s, s + int64(len(pat)), nil, true, nil
		}, nil
	case MatchRegex:
		if p.Match == "" {
			return nil, fmt.Errorf("%w: match is empty", ErrInvalidArgument)
		}
		re, err := regexp.Compile(p.Match)
		if err != nil {
			return nil, fmt.Errorf("%w: match is not a valid regular expression: %v", ErrInvalidArgument, err)
		}
		return func(rd *spoolReader, _ []promptRec, from int64) (int64, int64, *PromptInfo, bool, error) {
			size := rd.v.size
			var loc []int
			if ts := rd.v.tailStart(); from >= ts {
				loc = re.FindIndex(rd.v.tail[from-ts:])
			} else {
				// Older than the tail: streamed from the file, never
				// loaded whole.
				in, rr := rd.runeReader(from, size)
				loc = re.FindReaderIndex(in)
				if rr.err != nil {
					return 0, 0, nil, false, rr.err
				}
			}
			if loc == nil || loc[1] == loc[0] && from+int64(loc[0]) == size {
				return 0, 0, nil, false, nil
			}
			return from + int64(loc[0]), from + int64(loc[1]), nil, true, nil
		}, nil
	case MatchPrompt:
		return func(_ *spoolReader, prompts []promptRec, from int64) (int64, int64, *PromptInfo, bool, error) {
			i := sort.Search(len(prompts), func(i int) bool { return prompts[i].lineStart >= from })
			if i == len(prompts) {
				return 0, 0, nil, false, nil
			}
			pr := prompts[i]
			return pr.lineStart, pr.lineEnd, &PromptInfo{TS: pr.ts, Cwd: pr.cwd, Exit: pr.exit, BlockID: pr.blockID}, true, nil
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
	return m.wait(ctx, conv, WaitParams{MatchType: MatchPrompt, FromCursor: from, TimeoutMs: timeoutMs, Raw: true}, true)
}

// WaitPromptView is WaitPrompt with the clean view unless raw.
func (m *Manager) WaitPromptView(ctx context.Context, conv string, from, timeoutMs int64, raw bool) (WaitResult, error) {
	return m.wait(ctx, conv, WaitParams{MatchType: MatchPrompt, FromCursor: from, TimeoutMs: timeoutMs, Raw: raw}, true)
}

func (m *Manager) wait(ctx context.Context, conv string, p WaitParams, needIdle bool) (WaitResult, error) {
	if err := validConv(conv); err != nil {
		return WaitResult{}, err
	}
	match, err := newMatcher(p)
	if err != nil {
		return WaitResult{}, err
	}
	if !m.known(conv) {
		return WaitResult{}, unknownConv(conv)
	}
	var size, lastBegin int64
	if err := m.read(conv, heldOnly, func(c *convState) {
		size = c.size()
		if n := len(c.blocks); n > 0 {
			lastBegin = c.blocks[n-1].SpoolBegin
		}
	}); err != nil {
		return WaitResult{}, err
	}
	if p.FromCursor == FromEnd {
		p.FromCursor = size
	}
	if p.FromCursor < 0 || p.FromCursor > size {
		return WaitResult{}, fmt.Errorf("%w: from_cursor %d is outside the spool [0, %d]", ErrInvalidCursor, p.FromCursor, size)
	}
	// A prompt wait is about the latest block: a prompt older than it (the
	// shell's first prompt, an earlier block's) never answers it, whatever
	// from_cursor says — else a wait from 0 reports a running command done
	// (issue 25). The answer's cursors are the spool's as always.
	scanFrom := p.FromCursor
	if p.MatchType == MatchPrompt {
		scanFrom = max(scanFrom, lastBegin)
	}
	timer := time.NewTimer(waitTimeout(p.TimeoutMs))
	defer timer.Stop()
	// Each wake-up scans from scan to the end of the spool, outside
	// stateMu (older bytes are read from the file). A substring cannot
	// start before size-len+1 of a range already scanned, so a long spool
	// is scanned once. A regex match may span any length, so after a scan
	// without a match the next one starts at most TailBuffer bytes before
	// the end scanned: a regex match that starts more than TailBuffer
	// bytes before the end of the output committed at some wake-up, and is
	// not complete by then, is not found (doc.go, "Memory").
	scan := scanFrom
	for {
		var (
			v       spoolView
			prompts []promptRec
			mode    string
			changed chan struct{}
		)
		m.snapshot(conv, func(c *convState) {
			v, prompts, mode, changed = c.view(), c.prompts, c.mode(), c.changed
		})
		rd := m.reader(v)
		s, e, info, ok, err := match(rd, prompts, scan)
		if err != nil {
			rd.close()
			return WaitResult{}, err
		}
		if !ok {
			switch p.MatchType {
			case "", MatchSubstring:
				scan = max(scanFrom, v.size-int64(len(p.Match))+1)
			case MatchRegex:
				scan = max(scan, v.size-TailBuffer)
			}
		}
		if ok && (!needIdle || mode == ModeIdle) {
			text, err := rd.bytes(s, e)
			rd.close()
			if err != nil {
				return WaitResult{}, err
			}
			str := string(text)
			if p.MatchType == MatchPrompt && !p.Raw {
				str = "" // the sentinel line is not shown; extra has its fields
			}
			return WaitResult{OK: true, Matched: true, MatchText: &str, MatchCursor: &s,
				MatchSpan: &Span{Start: s, End: e}, ResumeCursor: e, Extra: info}, nil
		}
		rd.close()
		var res WaitResult
		if more, err := m.awaitChange(ctx, changed, timer.C); err != nil {
			return WaitResult{}, err
		} else if more {
			continue
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
	var v spoolView
	m.snapshot(conv, func(c *convState) { v = c.view() })
	if from < 0 || from > v.size {
		return ReadResult{}, fmt.Errorf("%w: from_cursor %d is outside the spool [0, %d]", ErrInvalidCursor, from, v.size)
	}
	rd := m.reader(v)
	defer rd.close()
	// 4 bytes more than asked: sliceUTF8 looks at the character that
	// starts at the limit.
	b, err := rd.bytes(from, min(v.size, from+maxBytes+utf8.UTFMax))
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{OK: true, Cursor: from}
	var n int64
	res.Data, n = sliceUTF8(b, 0, maxBytes)
	res.ResumeCursor = from + n
	return res, nil
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
