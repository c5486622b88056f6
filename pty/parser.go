package pty

import (
	"bytes"
	"strconv"
)

// Raw marks. The shell prints them through the terminal; the parser strips
// them from the stream and turns them into items. Every mark carries the
// shell's secret nonce (a shell variable that is never exported, so child
// processes cannot print a valid mark); a mark with a wrong nonce is plain
// output.
//
//	BEGIN   ESC ] 6973 ; B ; <nonce> BEL
//	PROMPT  ESC ] 6973 ; P ; <nonce> ; <exit> ; <ts ms> ; <len> ; <cwd: len bytes> BEL
//
// The prompt mark is length-prefixed so that a working directory may hold
// any byte, BEL and ';' included.
const (
	markPrefix = "\x1b]6973;"
	markEnd    = '\a'
	// maxMark bounds a mark's length: anything longer is output.
	maxMark = 8192
)

// ItemKind says what a parsed item is.
type ItemKind int

// Item kinds.
const (
	ItemOutput ItemKind = iota // Data: normalised output bytes
	ItemBegin                  // the shell is about to run a command line
	ItemPrompt                 // the shell is back at its prompt
)

// Item is one piece of the parsed terminal stream.
type Item struct {
	Kind ItemKind
	Data []byte // ItemOutput
	Exit int    // ItemPrompt: $? of the last command
	TS   int64  // ItemPrompt: unix ms when the shell printed the prompt
	Cwd  string // ItemPrompt: the shell's working directory
}

// MarkerParser turns raw terminal bytes into normalised output and marks.
// It accepts arbitrary splits of the stream across Feed calls: a mark or a
// "\r\n" cut between two reads is recognised all the same. Normalisation:
// "\r\n" and a lone "\r" become "\n". Not safe for concurrent use.
type MarkerParser struct {
	nonce   []byte
	pending []byte // undecided bytes: the start of a possible mark
	cr      bool   // the last output byte was '\r', not yet emitted
}

// NewMarkerParser returns a parser that accepts marks carrying nonce.
func NewMarkerParser(nonce string) *MarkerParser {
	return &MarkerParser{nonce: []byte(nonce)}
}

// Feed parses chunk and returns the items it completes. Output items of one
// call are merged; the returned slices do not alias chunk.
func (p *MarkerParser) Feed(chunk []byte) []Item {
	buf := chunk
	if len(p.pending) > 0 {
		buf = append(p.pending, chunk...)
		p.pending = nil
	}
	var items []Item
	// Output never grows past the input (+1 for a held '\r').
	out := make([]byte, 0, len(buf)+1)
	flushOut := func() {
		if len(out) > 0 {
			items = append(items, Item{Kind: ItemOutput, Data: out[:len(out):len(out)]})
			out = out[len(out):]
		}
	}
	for i := 0; i < len(buf); {
		j := bytes.IndexByte(buf[i:], 0x1b)
		if j < 0 {
			out = p.normalise(out, buf[i:])
			break
		}
		out = p.normalise(out, buf[i:i+j])
		i += j
		it, n, more := p.parseMark(buf[i:])
		switch {
		case more:
			p.pending = append([]byte(nil), buf[i:]...)
			i = len(buf)
		case n > 0:
			if p.cr {
				out = append(out, '\n')
				p.cr = false
			}
			flushOut()
			items = append(items, it)
			i += n
		default:
			out = p.normalise(out, buf[i:i+1])
			i++
		}
	}
	flushOut()
	return items
}

// Flush returns what the parser still holds (an undecided mark start or a
// trailing '\r') as output; call it when the stream ends.
func (p *MarkerParser) Flush() []Item {
	var out []byte
	rest := p.pending
	p.pending = nil
	out = p.normalise(out, rest)
	if p.cr {
		out = append(out, '\n')
		p.cr = false
	}
	if len(out) == 0 {
		return nil
	}
	return []Item{{Kind: ItemOutput, Data: out}}
}

// normalise appends src to dst with "\r\n" and lone "\r" turned into "\n".
func (p *MarkerParser) normalise(dst, src []byte) []byte {
	for len(src) > 0 {
		if p.cr {
			p.cr = false
			dst = append(dst, '\n')
			if src[0] == '\n' {
				src = src[1:]
				continue
			}
		}
		k := bytes.IndexByte(src, '\r')
		if k < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:k]...)
		p.cr = true
		src = src[k+1:]
	}
	return dst
}

// parseMark tries to read a mark at the start of b (b[0] is ESC). It
// returns the item and the bytes consumed; more when b is a proper prefix
// of a possible mark; n == 0 and !more when b is not a mark.
func (p *MarkerParser) parseMark(b []byte) (it Item, n int, more bool) {
	pre := markPrefix
	if len(b) < len(pre) {
		return it, 0, bytes.HasPrefix([]byte(pre), b)
	}
	if string(b[:len(pre)]) != pre {
		return it, 0, false
	}
	i := len(pre)
	if i >= len(b) {
		return it, 0, true
	}
	kind := b[i]
	if kind != 'B' && kind != 'P' {
		return it, 0, false
	}
	i++
	// ";" nonce
	want := append([]byte{';'}, p.nonce...)
	for k := 0; k < len(want); k++ {
		if i+k >= len(b) {
			return it, 0, true
		}
		if b[i+k] != want[k] {
			return it, 0, false
		}
	}
	i += len(want)
	if kind == 'B' {
		if i >= len(b) {
			return it, 0, true
		}
		if b[i] != markEnd {
			return it, 0, false
		}
		return Item{Kind: ItemBegin}, i + 1, false
	}
	// ";" exit ";" ts ";" len ";"
	var nums [3]int64
	for f := 0; f < 3; f++ {
		if i >= len(b) {
			return it, 0, true
		}
		if b[i] != ';' {
			return it, 0, false
		}
		i++
		start := i
		for i < len(b) && (b[i] >= '0' && b[i] <= '9' || (b[i] == '-' && i == start)) {
			i++
			if i-start > 20 {
				return it, 0, false
			}
		}
		if i >= len(b) {
			return it, 0, true
		}
		v, err := strconv.ParseInt(string(b[start:i]), 10, 64)
		if err != nil {
			return it, 0, false
		}
		nums[f] = v
	}
	cwdLen := nums[2]
	if cwdLen < 0 || cwdLen > maxMark {
		return it, 0, false
	}
	if i >= len(b) {
		return it, 0, true
	}
	if b[i] != ';' {
		return it, 0, false
	}
	i++
	end := i + int(cwdLen)
	if end >= len(b) {
		return it, 0, true
	}
	if b[end] != markEnd {
		return it, 0, false
	}
	return Item{Kind: ItemPrompt, Exit: int(nums[0]), TS: nums[1], Cwd: string(b[i:end])}, end + 1, false
}
