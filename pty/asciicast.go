package pty

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"
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
// order) as asciicast v2, the raw view: "o" is the spool byte for byte.
// It returns the number of event records.
func WriteAsciicast(w io.Writer, conv string, evs iter.Seq2[*events.Event, error]) (int, error) {
	return writeAsciicast(w, conv, evs, true)
}

// WriteAsciicastClean writes the clean view (issue 25), what the terminal
// looked like: no sentinel lines, no exec wrapper. Each block begins with
// "$ <cmd>" as typed at a prompt ("i" the command, "o" its echo); what
// send and expect_send typed is an "i" record and its echo in "o" (as
// 'asciinema rec --stdin' records typing, Ctrl+C as ^C); an exec line the
// terminal echoed is hidden; line ends are "\r\n" as a terminal writes
// them.
func WriteAsciicastClean(w io.Writer, conv string, evs iter.Seq2[*events.Event, error]) (int, error) {
	return writeAsciicast(w, conv, evs, false)
}

func writeAsciicast(w io.Writer, conv string, evs iter.Seq2[*events.Event, error], raw bool) (int, error) {
	bw := bufio.NewWriter(w)
	var t0 int64
	head := func(hdr AsciicastHeader, ts int64) error {
		t0 = ts
		b, err := json.Marshal(hdr)
		if err != nil {
			return err
		}
		bw.Write(append(b, '\n'))
		return nil
	}
	n, err := AsciicastRecords(conv, evs, raw, head, func(r AsciicastRecord) error {
		b, err := json.Marshal([]any{json.Number(fmt.Sprintf("%.3f", float64(r.TS-t0)/1000)), r.Code, string(r.Data)})
		if err != nil {
			return err
		}
		bw.Write(b)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// AsciicastRecord is one event record of a recording: TS the log
// timestamp (ms since the epoch) of the event it comes from, Code "o"
// (output), "i" (input) or "m" (a marker at each block begin).
type AsciicastRecord struct {
	TS   int64
	Code string
	Data []byte
}

// AsciicastRecords calls head once, before the first record, with the
// recording's header and the timestamp its times count from, then rec
// with each record of conv's terminal history in evs (the log in order),
// as WriteAsciicastClean (raw false) or WriteAsciicast (raw true) writes
// them: for a player that renders the recording itself (the console). It
// returns the number of records.
func AsciicastRecords(conv string, evs iter.Seq2[*events.Event, error], raw bool, head func(AsciicastHeader, int64) error, record func(AsciicastRecord) error) (int, error) {
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
		n++
		return record(AsciicastRecord{TS: ts, Code: code, Data: data})
	}
	out := func(ts int64, data []byte) error {
		if !raw {
			data = bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
		}
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
	echo := map[string][]byte{} // block id → the part of its exec line an echo would still show
	emit := func(ev *events.Event) error {
		p, err := ev.Decode()
		if err != nil {
			return err
		}
		if !raw {
			return emitClean(p, ev.TS, out, rec, echo)
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
			if err := head(hdr, t0); err != nil {
				return n, err
			}
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
	return n, nil
}

// emitClean writes the clean records of one event (WriteAsciicastClean).
func emitClean(p events.Payload, ts int64, out func(int64, []byte) error, rec func(int64, string, []byte) error, echo map[string][]byte) error {
	switch d := p.(type) {
	case *events.PtyOutput:
		data := d.Data
		if line, ok := echo[d.BlockID]; ok {
			// The first output of a block may be its exec line echoed
			// (a program turned echo on): not shown.
			switch {
			case bytes.HasPrefix(data, line):
				data = data[len(line):]
				delete(echo, d.BlockID)
			case bytes.HasPrefix(line, data):
				echo[d.BlockID] = line[len(data):]
				data = nil
			default:
				delete(echo, d.BlockID)
			}
		}
		if len(data) == 0 {
			return nil
		}
		return out(ts, data)
	case *events.PtyPrompt:
		if strings.HasPrefix(d.Line, "\n") {
			return out(ts, []byte("\n")) // the line break before it is the program's
		}
		return nil
	case *events.PtyTruncated:
		return out(ts, []byte(d.Line))
	case *events.PtyInput:
		switch d.Source {
		case "exec":
			if d.BlockID != "" {
				echo[d.BlockID] = d.Data
			}
			return nil // shown as "$ <cmd>" at its block's begin
		default:
			if err := rec(ts, "i", d.Data); err != nil {
				return err
			}
			return out(ts, []byte(TypedText(d.Data)))
		}
	case *events.PtyBlockBegin:
		if err := rec(ts, "m", []byte(fmt.Sprintf("block %d: %s", d.Block.Seq, d.Block.Cmd))); err != nil {
			return err
		}
		if err := rec(ts, "i", []byte(d.Block.Cmd+"\r")); err != nil {
			return err
		}
		return out(ts, []byte("$ "+d.Block.Cmd+"\n"))
	}
	return nil
}
