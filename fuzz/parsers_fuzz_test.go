package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/steps"
)

const testNonce = "n0nce42"

// mergeItems joins adjacent output items, so that item lists from
// different read splits compare equal when they mean the same stream.
func mergeItems(items []pty.Item) []pty.Item {
	var out []pty.Item
	for _, it := range items {
		if it.Kind == pty.ItemOutput {
			if len(it.Data) == 0 {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Kind == pty.ItemOutput {
				out[n-1].Data = append(out[n-1].Data, it.Data...)
				continue
			}
			it.Data = bytes.Clone(it.Data)
		}
		out = append(out, it)
	}
	return out
}

func parseSplit(stream []byte, cuts []int) []pty.Item {
	p := pty.NewMarkerParser(testNonce)
	var items []pty.Item
	prev := 0
	for _, c := range cuts {
		items = append(items, p.Feed(stream[prev:c])...)
		prev = c
	}
	items = append(items, p.Feed(stream[prev:])...)
	items = append(items, p.Flush()...)
	return mergeItems(items)
}

// cutsFrom turns fuzz bytes into sorted split points of a stream of n bytes.
func cutsFrom(splits []byte, n int) []int {
	if n == 0 {
		return nil
	}
	var cuts []int
	for i := 0; i+1 < len(splits); i += 2 {
		cuts = append(cuts, int(uint16(splits[i])<<8|uint16(splits[i+1]))%(n+1))
	}
	slices.Sort(cuts)
	return cuts
}

func beginMark() []byte { return []byte("\x1b]6973;B;" + testNonce + "\a") }

func promptMark(exit int, ts int64, cwd string) []byte {
	return []byte(fmt.Sprintf("\x1b]6973;P;%s;%d;%d;%d;%s\a", testNonce, exit, ts, len(cwd), cwd))
}

// normaliseModel is the spool's normalisation of one output run with no
// mark inside: "\r\n" and a lone "\r" become "\n".
func normaliseModel(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

// FuzzMarkerParser checks the terminal stream parser (pty.MarkerParser):
//
//  1. any raw stream split at any points across Feed calls yields the
//     same items as the stream fed at once (marks and "\r\n" cut between
//     reads are recognised all the same), and output never holds '\r';
//  2. a stream built from output runs (without ESC) and well-formed BEGIN
//     and PROMPT marks, split anywhere, yields exactly those marks, with
//     their exit code, time and working directory (any bytes), and the
//     normalised output between them.
func FuzzMarkerParser(f *testing.F) {
	f.Add([]byte("ls\r\nfile\r\n"), []byte{0, 3}, []byte("a\rb"), "/home/x", uint8(0))
	f.Add(append(append([]byte("out\r"), beginMark()...), promptMark(1, 1770336000000, "/tmp/;\a")...), []byte{0, 5, 0, 9, 0, 20}, []byte("x\r\ny"), "dir with ; and \a", uint8(2))
	f.Add([]byte("\x1b]6973;B;wrong\a\x1b]6973;P;"+testNonce+";0;1;3;ab"), []byte{0, 1}, []byte{}, "", uint8(130))
	f.Add([]byte("\x1b]6973;"), []byte{}, []byte("\x1b[0m colour"), "é", uint8(255))
	f.Fuzz(func(t *testing.T, raw, splits, outRun []byte, cwd string, exit uint8) {
		// 1. Split invariance on arbitrary bytes.
		whole := parseSplit(raw, nil)
		split := parseSplit(raw, cutsFrom(splits, len(raw)))
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("split changes the parse\nwhole %+v\nsplit %+v", whole, split)
		}
		for _, it := range whole {
			if it.Kind == pty.ItemOutput && bytes.IndexByte(it.Data, '\r') >= 0 {
				t.Fatalf("output keeps a carriage return: %q", it.Data)
			}
		}

		// 2. Model check on a well-formed stream.
		run := bytes.ReplaceAll(outRun, []byte{0x1b}, nil)
		if len(cwd) > 4000 {
			cwd = cwd[:4000]
		}
		ts := int64(1770336000000) + int64(len(raw))
		var stream []byte
		var want []pty.Item
		addOut := func(b []byte) {
			stream = append(stream, b...)
			if n := normaliseModel(b); len(n) > 0 {
				want = append(want, pty.Item{Kind: pty.ItemOutput, Data: n})
			}
		}
		addOut(run)
		stream = append(stream, beginMark()...)
		want = append(want, pty.Item{Kind: pty.ItemBegin})
		addOut(append(bytes.Clone(run), "\r\n"...))
		stream = append(stream, promptMark(int(exit), ts, cwd)...)
		want = append(want, pty.Item{Kind: pty.ItemPrompt, Exit: int(exit), TS: ts, Cwd: cwd})
		addOut(run)
		want = mergeItems(want)
		got := parseSplit(stream, cutsFrom(splits, len(stream)))
		if len(got) != len(want) {
			t.Fatalf("well-formed stream %q\ngot  %d items %+v\nwant %d items %+v", stream, len(got), got, len(want), want)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Kind != w.Kind || !bytes.Equal(g.Data, w.Data) || g.Exit != w.Exit || g.TS != w.TS || g.Cwd != w.Cwd {
				t.Fatalf("item %d of well-formed stream %q\ngot  %+v\nwant %+v", i, stream, g, w)
			}
		}
	})
}

// FuzzMandate checks recovery.ParseMandate, the parser of `cmlab run`
// files: whatever it accepts is valid (Validate agrees), has an id, steps
// with unique valid ids and a program each, and survives a JSON round trip
// unchanged (re-encoding and parsing again gives the same mandate); whatever
// it refuses is refused with ErrInvalidMandate.
func FuzzMandate(f *testing.F) {
	f.Add([]byte(`{"id":"m1","name":"build","steps":[{"id":"fetch","argv":["sh","-c","echo hi > out/a.txt"],"cwd":"work","env":["PATH","HOME"],"world":["out/a.txt"],"expect_post":{"out/a.txt":"hi\n"}}]}`))
	f.Add([]byte(`{"name":"n","steps":[{"id":"a","argv":["true"]},{"id":"b","argv":["false"],"expect_post":"sha256-0000000000000000000000000000000000000000000000000000000000000000"}]}`))
	f.Add([]byte(`{"id":"m","steps":[{"id":"a","argv":["x"],"world":["p"],"expect_post":{"p":null}}]}`))
	f.Add([]byte(`{"id":"..","steps":[]}`))
	f.Add([]byte(`{"id":"m","steps":[{"id":"a","argv":["x"]}]} {}`))
	f.Add([]byte(`{"id":"m","steps":[{"id":"a","argv":["x"],"env":["1BAD"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := steps.ParseMandate(b)
		if err != nil {
			if !errors.Is(err, steps.ErrInvalidMandate) {
				t.Fatalf("refusal does not wrap ErrInvalidMandate: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted mandate fails Validate: %v", err)
		}
		if m.MandateID() == "" || len(m.Steps) == 0 {
			t.Fatalf("accepted mandate without id or steps: %+v", m)
		}
		seen := map[string]bool{}
		for _, s := range m.Steps {
			if s.ID == "" || seen[s.ID] || len(s.Argv) == 0 || s.Argv[0] == "" {
				t.Fatalf("accepted a bad step: %+v", s)
			}
			seen[s.ID] = true
		}
		re, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted mandate does not encode: %v", err)
		}
		m2, err := steps.ParseMandate(re)
		if err != nil {
			t.Fatalf("re-encoded mandate refused: %v\n%s", err, re)
		}
		re2, _ := json.Marshal(m2)
		if !bytes.Equal(re, re2) {
			t.Fatalf("mandate changes in a round trip\n%s\n%s", re, re2)
		}
	})
}
