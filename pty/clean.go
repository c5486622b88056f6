package pty

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The clean view (issue 25): what a person or an agent reads. The spool
// keeps its bytes and cursors stay byte offsets of the spool (seed 001);
// only the answer's text is cleaned:
//
//   - a prompt sentinel line ("__FWS_PROMPT__ ts=… cwd_b64=… exit=…\n") is
//     not shown — the prompt records say exactly where each one is, so a
//     program that prints the sentinel's text keeps its output;
//   - the line typed for exec ("eval $'…'", with the block-local cd) is
//     not shown when the terminal echoed it (a program that turned echo
//     back on): the exec's own pty.input says which bytes it was;
//   - what send, expect_send and interrupt typed is shown where it was
//     typed, as a terminal echoes typing ("print(1)" after ">>> "; Ctrl+C
//     as ^C), with "\r" shown as a line end.
//
// The raw view (raw: true, --raw) is the spool as is.

// CleanText removes the canonical sentinel lines from b, terminal output
// in the spool's form: for a renderer that has bytes but no read model
// (the console; a file). Unlike the Manager's clean reads it goes by the
// text alone, so a program's own line of exactly the sentinel's form is
// removed too.
func CleanText(b []byte) []byte {
	if !bytes.Contains(b, []byte(sentinelPrefix)) {
		return b
	}
	return sentinelLine().ReplaceAll(b, nil)
}

const sentinelPrefix = "__FWS_PROMPT__ "

var sentinelLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^__FWS_PROMPT__ ts=-?[0-9]+ cwd_b64=[A-Za-z0-9+/=]* exit=-?[0-9]+\n`)
})

// TypedText is how input is shown in a transcript: "\r" and "\r\n" as a
// line end, other control characters in caret notation (Ctrl+C is "^C").
func TypedText(data []byte) string {
	var b strings.Builder
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\r':
			b.WriteByte('\n')
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
		case c == '\n' || c == '\t':
			b.WriteByte(c)
		case c < 0x20:
			b.WriteByte('^')
			b.WriteByte(c + '@')
		case c == 0x7f:
			b.WriteString("^?")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// cleanPlan is what the clean view hides and inserts in a spool range.
type cleanPlan struct {
	hide    []span     // sorted, disjoint
	inserts []inputRec // sorted by offset: shown before the byte at off
}

// plan gathers, under stateMu, what the clean view of [from, to) of c
// hides and shows; echo candidates are checked against the spool by
// planEchoes outside the lock.
func (c *convState) plan(from, to int64) (cleanPlan, []echoCand) {
	var p cleanPlan
	i := sort.Search(len(c.prompts), func(i int) bool { return c.prompts[i].lineEnd > from })
	for ; i < len(c.prompts) && c.prompts[i].lineStart < to; i++ {
		p.hide = append(p.hide, span{c.prompts[i].lineStart, c.prompts[i].lineEnd})
	}
	var echoes []echoCand
	// Inputs are in spool order: only those typed before to, and not long
	// before from (an echo is the first output of its block, right after
	// the exec's input), are looked at, so a read costs the same however
	// many inputs a conversation has had.
	hi := sort.Search(len(c.inputs), func(i int) bool { return c.inputs[i].off >= to })
	lo := sort.Search(hi, func(i int) bool { return c.inputs[i].off >= from-echoWindow })
	for _, in := range c.inputs[lo:hi] {
		switch {
		case in.source == "exec":
			segs := c.outputs[in.blockID]
			if len(in.data) == 0 || len(segs) == 0 {
				continue
			}
			s := segs[0].start
			if s < to && s+int64(len(in.data)) > from && segs[0].end-s >= int64(len(in.data)) {
				echoes = append(echoes, echoCand{s, in.data})
			}
		case in.off >= from && in.off < to:
			p.inserts = append(p.inserts, in)
		}
	}
	return p, echoes
}

// planReachesPast says whether plan(from, to) may need records dropped
// from memory (history.go): a prompt ending after from, an input typed
// after from-echoWindow, or an exec input's block.
func (c *convState) planReachesPast(from, to int64) bool {
	h := c.hist
	if h.prompts > 0 && from < h.promptEnd || h.inputs > 0 && from-echoWindow <= h.inputOff {
		return true
	}
	if h.blocks == 0 {
		return false
	}
	hi := sort.Search(len(c.inputs), func(i int) bool { return c.inputs[i].off >= to })
	lo := sort.Search(hi, func(i int) bool { return c.inputs[i].off >= from-echoWindow })
	return slices.ContainsFunc(c.inputs[lo:hi], func(in inputRec) bool { return in.source == "exec" && c.byID[in.blockID] == nil })
}

// echoWindow bounds how far before a read's start an exec's input may lie
// for its echo to reach into the read.
const echoWindow = 4 << 20

type echoCand struct {
	at   int64
	line []byte
}

// addEchoes hides each candidate whose bytes in the spool are the line.
func (p *cleanPlan) addEchoes(rd *spoolReader, cands []echoCand) error {
	for _, e := range cands {
		b, err := rd.bytes(e.at, e.at+int64(len(e.line)))
		if err != nil {
			return err
		}
		if bytes.Equal(b, e.line) {
			p.hide = append(p.hide, span{e.at, e.at + int64(len(e.line))})
		}
	}
	sort.Slice(p.hide, func(i, j int) bool { return p.hide[i].start < p.hide[j].start })
	return nil
}

// render returns the clean text of b, the spool's bytes [from, from+len(b)).
func (p *cleanPlan) render(b []byte, from int64) string {
	var out strings.Builder
	pos := from
	end := from + int64(len(b))
	ins := p.inserts
	emit := func(to int64) { // bytes [pos, to), inputs typed before them
		for pos < to {
			next := to
			for len(ins) > 0 && ins[0].off <= pos {
				out.WriteString(TypedText(ins[0].data))
				ins = ins[1:]
			}
			if len(ins) > 0 && ins[0].off < next {
				next = ins[0].off
			}
			out.Write(b[pos-from : next-from])
			pos = next
		}
	}
	for _, h := range p.hide {
		if h.end <= pos || h.start >= end {
			continue
		}
		emit(max(pos, min(h.start, end)))
		pos = min(h.end, end)
	}
	emit(end)
	// An input typed at the range's end shows in the read that starts
	// there, before the output it caused.
	return out.String()
}

// ReadSpoolView is ReadSpool with the clean view unless raw: data is the
// range's text without sentinel lines or an echoed exec line, with what
// was typed shown where it was typed; cursor and resume_cursor are spool
// offsets as in the raw view.
func (m *Manager) ReadSpoolView(ctx context.Context, conv string, from, maxBytes int64, raw bool) (ReadResult, error) {
	if err := validConv(conv); err != nil {
		return ReadResult{}, err
	}
	if !m.known(conv) {
		return ReadResult{}, unknownConv(conv)
	}
	res, err := m.ReadSpool(ctx, conv, from, maxBytes)
	if err != nil || raw {
		return res, err
	}
	res.Data, err = m.cleanRange(conv, res.Cursor, res.ResumeCursor, []byte(res.Data))
	return res, err
}

// cleanRange renders b, the spool's bytes [from, to), in the clean view.
func (m *Manager) cleanRange(conv string, from, to int64, b []byte) (string, error) {
	var (
		p     cleanPlan
		cands []echoCand
		v     spoolView
	)
	if err := m.readUpTo(conv, to, func(c *convState) bool { return c.planReachesPast(from, to) }, func(c *convState) {
		p, cands = c.plan(from, to)
		v = c.view()
	}); err != nil {
		return "", err
	}
	if len(cands) > 0 {
		rd := m.reader(v)
		err := p.addEchoes(rd, cands)
		rd.close()
		if err != nil {
			return "", err
		}
	}
	return p.render(b, from), nil
}

// unknownConv is the error of a wait or read on a conversation without
// any terminal history.
func unknownConv(conv string) error {
	return fmt.Errorf("%w: conversation %q has no terminal (no command ever ran in it); check the id, or start it with exec", ErrNotFound, conv)
}

// cleanBlockOutput hides the echo of block id's exec line from its
// output: data is the block output [offset, offset+len(data)).
func (m *Manager) cleanBlockOutput(conv, id string, offset int64, data string) (string, error) {
	var line []byte
	need := func(c *convState) bool { return c.hist.inputs > 0 && c.execLine(id) == nil }
	if err := m.readBlock(conv, id, need, func(c *convState) { line = c.execLine(id) }); err != nil {
		return "", err
	}
	n := int64(len(line))
	if n == 0 || offset >= n {
		return data, nil
	}
	head, _, err := m.blockOutput(conv, id, 0, n)
	if err != nil {
		return "", err
	}
	if head.Data != string(line) {
		return data, nil
	}
	skip := min(n-offset, int64(len(data)))
	return data[skip:], nil
}
