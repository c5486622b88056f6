package pty

import (
	"fmt"
	"reflect"
	"testing"
)

const testNonce = "0123456789abcdef0123456789abcdef"

// render flattens items into a comparable form: output merged, marks as
// tokens.
func renderItems(items []Item) []string {
	var out []string
	for _, it := range items {
		switch it.Kind {
		case ItemOutput:
			if n := len(out); n > 0 && len(out[n-1]) > 0 && out[n-1][0] == 'o' {
				out[n-1] += string(it.Data)
			} else {
				out = append(out, "o"+string(it.Data))
			}
		case ItemBegin:
			out = append(out, "B")
		case ItemPrompt:
			out = append(out, fmt.Sprintf("P exit=%d ts=%d cwd=%q", it.Exit, it.TS, it.Cwd))
		}
	}
	return out
}

func TestMarkerParserSplits(t *testing.T) {
	b := "\x1b]6973;B;" + testNonce + "\a"
	p := func(exit, ts int, cwd string) string {
		return fmt.Sprintf("\x1b]6973;P;%s;%d;%d;%d;%s\a", testNonce, exit, ts, len(cwd), cwd)
	}
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"plain", "hello\r\nworld\r\n", []string{"ohello\nworld\n"}},
		{"lone cr", "a\rb\r\r\nc\r", []string{"oa\nb\n\nc\n"}},
		{"block", b + "out\r\n" + p(0, 1700000000000, "/tmp"), []string{"B", "oout\n", `P exit=0 ts=1700000000000 cwd="/tmp"`}},
		{"no newline before prompt", "abc" + p(3, 5, "/"), []string{"oabc", `P exit=3 ts=5 cwd="/"`}},
		{"cwd with bel and semicolons", p(0, 1, "/a;b\a;c\x1b]"), []string{`P exit=0 ts=1 cwd="/a;b\a;c\x1b]"`}},
		{"cr before mark", "x\r" + p(1, 2, "/"), []string{"ox\n", `P exit=1 ts=2 cwd="/"`}},
		{"wrong nonce", "\x1b]6973;B;ffff\a", []string{"o\x1b]6973;B;ffff\a"}},
		{"forged prompt text", "__FWS_PROMPT__ ts=1 cwd_b64=eA== exit=0\n", []string{"o__FWS_PROMPT__ ts=1 cwd_b64=eA== exit=0\n"}},
		{"other escapes", "\x1b[31mred\x1b[0m\x1b]0;title\a", []string{"o\x1b[31mred\x1b[0m\x1b]0;title\a"}},
		{"esc then mark", "\x1b" + b + "z", []string{"o\x1b", "B", "oz"}},
		{"truncated mark then text", "\x1b]6973;P;" + testNonce + ";0;1;9;ab\a" + "tail", []string{"o\x1b]6973;P;" + testNonce + ";0;1;9;ab\atail"}},
		{"utf8", "h\xc3\xa9llo \xe2\x82\xac\r\n", []string{"oh\xc3\xa9llo \xe2\x82\xac\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			whole := NewMarkerParser(testNonce)
			items := append(whole.Feed([]byte(tc.in)), whole.Flush()...)
			if got := renderItems(items); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("one chunk:\n got %q\nwant %q", got, tc.want)
			}
			// Every split into two chunks, and byte by byte.
			for cut := 0; cut <= len(tc.in); cut++ {
				pp := NewMarkerParser(testNonce)
				var items []Item
				items = append(items, pp.Feed([]byte(tc.in[:cut]))...)
				items = append(items, pp.Feed([]byte(tc.in[cut:]))...)
				items = append(items, pp.Flush()...)
				if got := renderItems(items); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("split at %d:\n got %q\nwant %q", cut, got, tc.want)
				}
			}
			pp := NewMarkerParser(testNonce)
			var all []Item
			for i := 0; i < len(tc.in); i++ {
				all = append(all, pp.Feed([]byte{tc.in[i]})...)
			}
			all = append(all, pp.Flush()...)
			if got := renderItems(all); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("byte by byte:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMarkerParserRandomSplits: streams built from mark fragments, CRs and
// text parse the same whatever the read boundaries.
func TestMarkerParserRandomSplits(t *testing.T) {
	pieces := []string{
		"\x1b]6973;B;" + testNonce + "\a",
		fmt.Sprintf("\x1b]6973;P;%s;%d;%d;%d;%s\a", testNonce, 0, 17, 4, "/a\nb"),
		"\x1b]6973;", "\x1b", "\r", "\n", "\r\n", "abc", "\a", ";", testNonce, "P;", "B;", "\xe2\x82\xac",
	}
	rng := uint64(42)
	next := func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	for iter := 0; iter < 2000; iter++ {
		var in []byte
		for k := next(30); k >= 0; k-- {
			in = append(in, pieces[next(len(pieces))]...)
		}
		whole := NewMarkerParser(testNonce)
		want := renderItems(append(whole.Feed(in), whole.Flush()...))
		p := NewMarkerParser(testNonce)
		var got []Item
		for rest := in; len(rest) > 0; {
			n := 1 + next(len(rest))
			got = append(got, p.Feed(rest[:n])...)
			rest = rest[n:]
		}
		got = append(got, p.Flush()...)
		if g := renderItems(got); !reflect.DeepEqual(g, want) {
			t.Fatalf("input %q:\n split %q\n whole %q", in, g, want)
		}
		// Output never holds a bare '\r'.
		for _, it := range got {
			if it.Kind == ItemOutput && bytesContains(it.Data, '\r') {
				t.Fatalf("input %q: output keeps a CR: %q", in, it.Data)
			}
		}
	}
}

func bytesContains(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// BenchmarkMarkerParser: throughput of the parser over terminal-like
// output (lines ending in CRLF, a mark pair every 64 KiB).
func BenchmarkMarkerParser(b *testing.B) {
	var chunk []byte
	for len(chunk) < 64<<10 {
		chunk = append(chunk, "some program output line of about sixty bytes ..........\r\n"...)
	}
	chunk = append(chunk, "\x1b]6973;B;"+testNonce+"\a"...)
	chunk = append(chunk, fmt.Sprintf("\x1b]6973;P;%s;0;1;4;/tmp\a", testNonce)...)
	p := NewMarkerParser(testNonce)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		for off := 0; off < len(chunk); off += 4096 {
			p.Feed(chunk[off:min(off+4096, len(chunk))])
		}
	}
}
