package pty

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"unicode/utf8"

	"github.com/cmlab/cmlab/events"
)

// Asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/): a JSON
// header line, then one JSON array per event: [seconds, code, data].
//
//	{"version":2,"width":200,"height":50,"timestamp":1700000000,"title":"cmlab pty conv1"}
//	[0.000,"m","block 1: make test"]
//	[0.013,"i","eval $'make test'\n"]
//	[0.250,"o","ok\n"]
//
// "o" is the spool, byte for byte (output, the canonical sentinel lines
// and the markers of output dropped past a cap), "i" the input typed by exec/send, "m" a marker at each block
// begin. Times are the events' log timestamps, relative to the first
// terminal event. A UTF-8 character split between two pty.output events is
// carried to the next "o" record so every record is valid UTF-8 and the
// concatenation of the "o" data equals the spool.

// AsciicastHeader is the first line of a recording.
type AsciicastHeader struct {
	Version   int    `json:"version"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	Timestamp int64  `json:"timestamp"`
	Title     string `json:"title,omitempty"`
}

// WriteAsciicast writes conv's terminal history from evs (the log in
// order) as asciicast v2. It returns the number of event records.
func WriteAsciicast(w io.Writer, conv string, evs iter.Seq2[*events.Event, error]) (int, error) {
	bw := bufio.NewWriter(w)
	var (
		t0      int64
		started bool
		carry   []byte // incomplete UTF-8 tail of the last output
		n       int
		hdr     = AsciicastHeader{Version: 2, Width: 200, Height: 50, Title: "cmlab pty " + conv}
		lastTS  int64
	)
	// The header needs the window size of the first shell: it is written
	// when the first terminal event of conv is seen.
	rec := func(ts int64, code string, data []byte) error {
		b, err := json.Marshal([]any{json.Number(fmt.Sprintf("%.3f", float64(ts-t0)/1000)), code, string(data)})
		if err != nil {
			return err
		}
		n++
		bw.Write(b)
		return bw.WriteByte('\n')
	}
	out := func(ts int64, data []byte) error {
		buf := append(carry, data...)
		cut := len(buf)
		// Keep an incomplete trailing character for the next record.
		for k := len(buf) - 1; k >= 0 && k >= len(buf)-3; k-- {
			if utf8.RuneStart(buf[k]) {
				if !utf8.FullRune(buf[k:]) {
					cut = k
				}
				break
			}
		}
		carry = append([]byte(nil), buf[cut:]...)
		if cut == 0 {
			return nil
		}
		return rec(ts, "o", buf[:cut])
	}
	emit := func(ev *events.Event) error {
		p, err := ev.Decode()
		if err != nil {
			return err
		}
		switch d := p.(type) {
		case *events.PtyOutput:
			return out(ev.TS, d.Data)
		case *events.PtyPrompt:
			return out(ev.TS, []byte(d.Line))
		case *events.PtyTruncated:
			return out(ev.TS, []byte(d.Line)) // the marker is in the spool too
		case *events.PtyInput:
			return rec(ev.TS, "i", d.Data)
		case *events.PtyBlockBegin:
			return rec(ev.TS, "m", []byte(fmt.Sprintf("block %d: %s", d.Block.Seq, d.Block.Cmd)))
		}
		return nil
	}
	for ev, err := range evs {
		if err != nil {
			return n, err
		}
		if ev.Stream != conv {
			continue
		}
		switch ev.Type {
		case events.TypePtyOutput, events.TypePtyPrompt, events.TypePtyTruncated, events.TypePtyInput, events.TypePtyBlockBegin, events.TypePtySessionStarted:
		default:
			continue
		}
		if !started {
			if ev.Type == events.TypePtySessionStarted {
				if d, err := events.DecodeAs[*events.PtySessionStarted](ev); err == nil && d.Cols > 0 {
					hdr.Width, hdr.Height = d.Cols, d.Rows
				}
			}
			started, t0 = true, ev.TS
			hdr.Timestamp = ev.TS / 1000
			b, err := json.Marshal(hdr)
			if err != nil {
				return n, err
			}
			bw.Write(append(b, '\n'))
		}
		lastTS = ev.TS
		if err := emit(ev); err != nil {
			return n, err
		}
	}
	if !started {
		return 0, fmt.Errorf("%w: conversation %q has no terminal history", ErrNotFound, conv)
	}
	if len(carry) > 0 {
		// Invalid UTF-8 at the very end: written as is (JSON replaces it).
		if err := rec(lastTS, "o", carry); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}
