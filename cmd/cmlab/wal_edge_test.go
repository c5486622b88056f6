package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// The edge cases of 'cmlab wal verify|dump|stat' that wal_test.go leaves
// out: flag validation, damage in a segment other than the last, a torn
// tail, the zeros a SIGKILLed writer leaves, a log written by another
// process while it is followed, and the promise that none of the three
// commands changes a byte of the home.

const (
	walEdgeChildEnv = "CMLAB_TEST_WAL_EDGE_CHILD" // "append", "hold" or "cli"
	walEdgeDirEnv   = "CMLAB_TEST_WAL_EDGE_DIR"
	walEdgeArgsEnv  = "CMLAB_TEST_WAL_EDGE_ARGS" // JSON list of "cli" arguments
)

// walEdgeClosedHome is walHome (n events on streams a and b, 1 KiB
// segments) with the log closed, as a stopped daemon leaves it.
func walEdgeClosedHome(t *testing.T, n int) string {
	t.Helper()
	h, l := walHome(t, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// walEdgeSegments returns the segment file names of the log in dir, in order.
func walEdgeSegments(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, de := range des {
		if _, err := strconv.ParseUint(de.Name(), 10, 64); err == nil && len(de.Name()) == 20 {
			segs = append(segs, de.Name())
		}
	}
	sort.Strings(segs)
	return segs
}

// walEdgeChild makes the command that re-runs this test binary as
// TestWalEdgeWriterChild with env added; its stderr goes to the buffer.
func walEdgeChild(env ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestWalEdgeWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

// walEdgeLastSegment returns the path, bytes and frame offsets of the
// last segment of the log in dir.
func walEdgeLastSegment(t *testing.T, dir string) (string, []byte, []int) {
	t.Helper()
	segs := walEdgeSegments(t, dir)
	last := filepath.Join(dir, segs[len(segs)-1])
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	return last, b, walEdgeFrames(t, b)
}

// walEdgeFrames returns the byte offset of every frame (uvarint length,
// then the entry) of a segment's bytes.
func walEdgeFrames(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for p := 0; p < len(b); {
		size, k := binary.Uvarint(b[p:])
		if k <= 0 || size == 0 || p+k+int(size) > len(b) {
			t.Fatalf("no frame at offset %d of %d bytes", p, len(b))
		}
		offs = append(offs, p)
		p += k + int(size)
	}
	return offs
}

// walEdgeDigest maps every file and directory under root to its size and
// SHA-256 (directories to "dir").
func walEdgeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			m[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[rel] = fmt.Sprintf("%d bytes sha256 %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// walEdgeUnchanged fails unless root holds exactly the files of before,
// byte for byte.
func walEdgeUnchanged(t *testing.T, root string, before map[string]string, after string) {
	t.Helper()
	now := walEdgeDigest(t, root)
	if !reflect.DeepEqual(now, before) {
		t.Fatalf("%s changed the home:\nbefore %v\nafter  %v", after, before, now)
	}
}

// walEdgeDumpLine is one line of 'wal dump' with every field it may carry.
type walEdgeDumpLine struct {
	Seq       uint64          `json:"seq"`
	V         int             `json:"v"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TS        int64           `json:"ts"`
	Time      string          `json:"time"`
	Stream    string          `json:"stream"`
	Req       string          `json:"req"`
	ReqHash   string          `json:"rh"`
	Resp      json.RawMessage `json:"resp"`
	Data      json.RawMessage `json:"data"`
	DataError string          `json:"data_error"`
}

// walEdgeParse decodes dump output strictly: one JSON object per line,
// no field the dump line does not define.
func walEdgeParse(t *testing.T, out string) []walEdgeDumpLine {
	t.Helper()
	var lines []walEdgeDumpLine
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("dump output does not end in a newline: %q", out)
	}
	for _, ln := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(ln))
		dec.DisallowUnknownFields()
		var d walEdgeDumpLine
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("line %q: %v", ln, err)
		}
		if dec.More() {
			t.Fatalf("line %q holds more than one value", ln)
		}
		lines = append(lines, d)
	}
	return lines
}

// walEdgeSeqs fails unless lines are exactly the seqs from..to, in order.
func walEdgeSeqs(t *testing.T, lines []walEdgeDumpLine, from, to uint64) {
	t.Helper()
	if uint64(len(lines)) != to-from+1 {
		t.Fatalf("%d lines, want seqs %d..%d", len(lines), from, to)
	}
	for i, d := range lines {
		if d.Seq != from+uint64(i) {
			t.Fatalf("line %d has seq %d, want %d", i, d.Seq, from+uint64(i))
		}
	}
}

func TestWalEdgeUsageErrors(t *testing.T) {
	h := walEdgeClosedHome(t, 4)
	noLog := t.TempDir() // a home without a wal directory
	for _, tc := range []struct {
		name string
		args []string
		want string // stderr prefix
	}{
		{"to before from", []string{"wal", "dump", "--from", "5", "--to", "3"}, "cmlab: --to is before --from\n"},
		{"negative from", []string{"wal", "dump", "--from", "-1"}, `cmlab: invalid argument "-1" for "--from" flag`},
		{"negative to", []string{"wal", "dump", "--to", "-2"}, `cmlab: invalid argument "-2" for "--to" flag`},
		{"non-numeric from", []string{"wal", "dump", "--from", "x"}, `cmlab: invalid argument "x" for "--from" flag`},
		{"bad type pattern", []string{"wal", "dump", "--type", "feedback.[", "--type", "x"}, "cmlab: bad --type pattern \"feedback.[\"\n"},
		{"bad poll", []string{"wal", "dump", "--poll", "soon"}, `cmlab: invalid argument "soon" for "--poll" flag`},
		{"zero poll", []string{"wal", "dump", "--follow", "--poll", "0s"}, "cmlab: --poll must be positive, not 0s\n"},
		{"negative poll", []string{"wal", "dump", "--follow", "--poll", "-5ms"}, "cmlab: --poll must be positive, not -5ms\n"},
		{"dump argument", []string{"wal", "dump", "7"}, `cmlab: unknown command "7" for "cmlab wal dump"`},
		{"verify argument", []string{"wal", "verify", "x"}, `cmlab: unknown command "x" for "cmlab wal verify"`},
		{"stat flag of dump", []string{"wal", "stat", "--from", "1"}, "cmlab: unknown flag: --from\n"},
	} {
		for _, home := range []string{h, noLog} {
			t.Run(tc.name, func(t *testing.T) {
				code, out, errs := walCLI(t, append([]string{"--home", home}, tc.args...)...)
				if code != exitUsage || out != "" || !strings.HasPrefix(errs, tc.want) {
					t.Fatalf("%v in %s: exit %d, stdout %q, stderr %q; want exit 2, stderr %q…", tc.args, filepath.Base(home), code, out, errs, tc.want)
				}
			})
		}
	}
	if _, err := os.Stat(filepath.Join(noLog, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command created the log directory: %v", err)
	}
	// Bounds that are not errors: --from 0 is seq 1, --to equal to
	// --from is one event, --from past the end prints nothing.
	for _, tc := range []struct {
		args     []string
		from, to uint64
	}{
		{[]string{"--from", "0"}, 1, 4},
		{[]string{"--from", "3", "--to", "3"}, 3, 3},
		{[]string{"--to", "2"}, 1, 2},
		{[]string{"--from", "4", "--to", "99"}, 4, 4},
		{[]string{"--from", "5"}, 5, 4},
	} {
		code, out, errs := walCLI(t, append([]string{"--home", h, "wal", "dump"}, tc.args...)...)
		if code != 0 || errs != "" {
			t.Fatalf("dump %v: exit %d %s", tc.args, code, errs)
		}
		walEdgeSeqs(t, walEdgeParse(t, out), tc.from, tc.to)
	}
}

func TestWalEdgeNoLogAndEmptyLog(t *testing.T) {
	noLog := t.TempDir()
	before := walEdgeDigest(t, noLog)
	for _, c := range []string{"verify", "dump", "stat"} {
		code, out, errs := walCLI(t, "--home", noLog, "wal", c)
		want := "cmlab: no log in " + noLog + ": stat " + filepath.Join(noLog, "wal") + ": no such file or directory\n" +
			"  fix: check that --home (or $CMLAB_HOME) names the home; if its wal/ was removed, put it back from a backup, or `cmlab restore` the home from the JetStream stream it ships to\n"
		if code != exitError || out != "" || errs != want {
			t.Fatalf("wal %s without a log: exit %d, stdout %q, stderr %q; want exit 1, %q", c, code, out, errs, want)
		}
	}
	walEdgeUnchanged(t, noLog, before, "wal verify|dump|stat without a log")

	// A log directory with no segment, and one as Open leaves it before
	// its first append (an empty first segment, or zeros preallocated).
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	opened := t.TempDir()
	l, err := wal.Open(wal.Options{Dir: filepath.Join(opened, "wal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, h := range []string{empty, opened} {
		before := walEdgeDigest(t, h)
		code, out, errs := walCLI(t, "--home", h, "wal", "dump")
		if code != 0 || out != "" || errs != "" {
			t.Fatalf("dump of an empty log: exit %d, %q %q", code, out, errs)
		}
		code, out, errs = walCLI(t, "--home", h, "--json", "wal", "verify")
		var rep wal.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || errs != "" {
			t.Fatalf("verify --json of an empty log: exit %d %v\n%s%s", code, err, out, errs)
		}
		if rep.Entries != 0 || rep.First != 1 || rep.Last != 0 || len(rep.Bad) != 0 || rep.TornTail != nil {
			t.Fatalf("verify of an empty log: %+v", rep)
		}
		code, out, _ = walCLI(t, "--home", h, "wal", "verify")
		if wantSegs := len(walEdgeSegments(t, filepath.Join(h, "wal"))); code != 0 || out != fmt.Sprintf("segments %d, entries 0, seq 1..0\nok\n", wantSegs) {
			t.Fatalf("verify of an empty log: exit %d %q", code, out)
		}
		code, out, errs = walCLI(t, "--home", h, "--json", "wal", "stat")
		var st wal.StatReport
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || errs != "" {
			t.Fatalf("stat --json of an empty log: exit %d %v\n%s%s", code, err, out, errs)
		}
		if st.Events != 0 || st.First != 1 || st.Last != 0 || len(st.ByType) != 0 || st.Damaged != 0 || st.TornTail {
			t.Fatalf("stat of an empty log: %+v", st)
		}
		for _, s := range st.Segments {
			if s.Entries != 0 || s.Size != s.Preallocated {
				t.Fatalf("segment of an empty log: %+v", s)
			}
		}
		walEdgeUnchanged(t, h, before, "wal verify|dump|stat of an empty log")
	}
}

// TestWalEdgeDumpFields: every line carries seq, v, id, type, ts, time,
// stream and the decoded data, req/rh/resp only when the event has them,
// with the values stored in the log; an event this binary cannot decode
// is still dumped, its payload as base64 beside the reason.
func TestWalEdgeDumpFields(t *testing.T) {
	h := walEdgeClosedHome(t, 3)
	dir := filepath.Join(h, "wal")
	// Append, as a newer binary might have written it, seq 4 of a type
	// this one does not know, with a response that is not JSON.
	data, err := events.Marshal(map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	future := &events.Event{Seq: 4, V: 1, ID: "01a20000-0000-7000-8000-000000000004", Type: "future.thing", TS: 1234, Stream: "s", Req: "r-9", ReqHash: "sha256-y", Resp: json.RawMessage("not json"), Data: data}
	entry, err := wal.EncodeEntry(future)
	if err != nil {
		t.Fatal(err)
	}
	segs := walEdgeSegments(t, dir)
	f, err := os.OpenFile(filepath.Join(dir, segs[len(segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(binary.AppendUvarint(nil, uint64(len(entry))), entry...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := wal.OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stored []*events.Event
	for ev, err := range r.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ev)
	}
	if len(stored) != 4 {
		t.Fatalf("%d events stored", len(stored))
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "dump")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := walEdgeParse(t, out)
	walEdgeSeqs(t, lines, 1, 4)
	raw := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, d := range lines {
		ev := stored[i]
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw[i]), &keys); err != nil {
			t.Fatal(err)
		}
		var names []string
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		want := "data id seq stream time ts type v"
		switch ev.Seq {
		case 2:
			want = "data id req resp rh seq stream time ts type v"
		case 4:
			want = "data data_error id req rh seq stream time ts type v"
		}
		if got := strings.Join(names, " "); got != want {
			t.Fatalf("seq %d carries %s, want %s", ev.Seq, got, want)
		}
		if d.V != ev.V || d.ID != ev.ID || d.Type != ev.Type || d.TS != ev.TS || d.Time != events.FormatISO(ev.TS) || d.Stream != ev.Stream || d.Req != ev.Req || d.ReqHash != ev.ReqHash {
			t.Fatalf("seq %d dumped as %+v, stored as %+v", ev.Seq, d, ev)
		}
		if ev.Seq == 4 {
			if d.DataError != `events: unknown event type: "future.thing" (seq 4)` || string(d.Data) != strconv.Quote(base64.StdEncoding.EncodeToString(data)) || d.Resp != nil {
				t.Fatalf("undecodable payload dumped as %s", raw[i])
			}
			continue
		}
		p, err := ev.Decode()
		if err != nil {
			t.Fatal(err)
		}
		wantData, _ := json.Marshal(p)
		if string(d.Data) != string(wantData) || d.DataError != "" {
			t.Fatalf("seq %d data %s, want %s", ev.Seq, d.Data, wantData)
		}
	}
	if string(lines[1].Resp) != `{"ok":1}` || lines[1].Req != "req-1" || lines[1].ReqHash != "sha256-x" {
		t.Fatalf("request of seq 2 dumped as %s", raw[1])
	}
	// The envelope is fine, so verify has nothing to say; stat counts the type.
	if code, out, _ := walCLI(t, "--home", h, "wal", "verify"); code != 0 || !strings.HasSuffix(out, "entries 4, seq 1..4\nok\n") {
		t.Fatalf("verify: exit %d %q", code, out)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
	var st wal.StatReport
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.ByType["future.thing"] != 1 || st.Events != 4 {
		t.Fatalf("stat: exit %d %v %+v", code, err, st)
	}
	// Type and stream filters on the same log.
	code, out, _ = walCLI(t, "--home", h, "wal", "dump", "--type", "future.*,recovery.applied")
	if lines := walEdgeParse(t, out); code != 0 || len(lines) != 2 || lines[0].Seq != 1 || lines[1].Seq != 4 {
		t.Fatalf("--type list: exit %d %q", code, out)
	}
	// A --type that matches no type this code knows and no event of the
	// log is a typo: a usage error naming the types, not an empty dump.
	code, out, errs = walCLI(t, "--home", h, "wal", "dump", "--type", "nothing.like.this")
	if code != exitUsage || out != "" || !strings.Contains(errs, `--type "nothing.like.this" matches no event type`) {
		t.Fatalf("--type matching nothing: exit %d %q %q", code, out, errs)
	}
}

// TestWalEdgeDamageInEarlierSegment: damage inside an entry of a segment
// that is not the last is corruption: verify exits 3 naming the segment,
// the frame's offset and the seq; dump prints what precedes it, then
// exits 3; stat counts it; none of them writes.
func TestWalEdgeDamageInEarlierSegment(t *testing.T) {
	damages := []struct {
		name   string
		damage func(frame []byte) // frame: the uvarint length and the entry
		reason string             // "" when the reason is not pinned
	}{
		{"entry byte", func(fr []byte) { fr[len(fr)/2] ^= 0x40 }, wal.ReasonBadCRC},
		{"length prefix", func(fr []byte) { fr[0] ^= 0x10 }, ""},
	}
	places := []struct {
		name string
		pick func(n int) int // which of the segment's n frames
	}{
		{"first entry", func(int) int { return 0 }},
		{"middle entry", func(n int) int { return n / 2 }},
		{"last entry", func(n int) int { return n - 1 }},
	}
	for _, tc := range damages {
		for _, pl := range places {
			t.Run(tc.name+" of "+pl.name, func(t *testing.T) {
				h := walEdgeClosedHome(t, 20)
				dir := filepath.Join(h, "wal")
				segs := walEdgeSegments(t, dir)
				if len(segs) < 3 {
					t.Fatalf("segments %v, want at least 3", segs)
				}
				seg := segs[1]
				first, _ := strconv.ParseUint(seg, 10, 64)
				b, err := os.ReadFile(filepath.Join(dir, seg))
				if err != nil {
					t.Fatal(err)
				}
				frames := walEdgeFrames(t, b)
				if len(frames) < 3 {
					t.Fatalf("%d frames in %s", len(frames), seg)
				}
				k := pl.pick(len(frames))
				off, end := frames[k], len(b)
				if k+1 < len(frames) {
					end = frames[k+1]
				}
				tc.damage(b[off:end])
				if err := os.WriteFile(filepath.Join(dir, seg), b, 0o600); err != nil {
					t.Fatal(err)
				}
				seq := first + uint64(k)
				before := walEdgeDigest(t, h)

				code, out, errs := walCLI(t, "--home", h, "wal", "verify")
				where := fmt.Sprintf("segment %s offset %d seq %d: ", seg, off, seq)
				if code != exitCorrupt || !strings.HasPrefix(out, fmt.Sprintf("segments %d, entries 19, seq 1..20\nCORRUPT %s", len(segs), where)) ||
					!strings.HasSuffix(out, ", 1 entries lost)\n") || strings.Count(out, "\n") != 2 ||
					!strings.HasPrefix(errs, "cmlab: wal: corrupt: 1 damaged stretch(es), first at "+where) || !strings.HasSuffix(errs, "then keep every intact entry with 'cmlab recover --salvage --apply --home "+h+"' (stop the daemon first)\n") {
					t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
				}
				code, out, _ = walCLI(t, "--home", h, "--json", "wal", "verify")
				var rep wal.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitCorrupt {
					t.Fatalf("verify --json: exit %d %v", code, err)
				}
				if len(rep.Bad) != 1 || rep.TornTail != nil || rep.Entries != 19 || rep.First != 1 || rep.Last != 20 {
					t.Fatalf("verify --json: %+v", rep)
				}
				bad := rep.Bad[0]
				if bad.Segment != seg || bad.Offset != int64(off) || bad.Seq != seq || bad.Lost != 1 || bad.Length != int64(end-off) || bad.TornTail || (tc.reason != "" && bad.Reason != tc.reason) {
					t.Fatalf("damage reported as %+v; want segment %s offset %d length %d seq %d", bad, seg, off, end-off, seq)
				}

				code, out, errs = walCLI(t, "--home", h, "wal", "dump")
				walEdgeSeqs(t, walEdgeParse(t, out), 1, seq-1)
				if code != exitCorrupt || !strings.HasPrefix(errs, "cmlab: wal: corrupt: "+where) {
					t.Fatalf("dump: exit %d, stderr %q; want exit 3 naming %q", code, errs, where)
				}
				// A range that ends before the damage is readable.
				code, out, errs = walCLI(t, "--home", h, "wal", "dump", "--to", strconv.FormatUint(seq-1, 10))
				if walEdgeSeqs(t, walEdgeParse(t, out), 1, seq-1); code != 0 || errs != "" {
					t.Fatalf("dump --to before the damage: exit %d %s", code, errs)
				}

				code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
				var st wal.StatReport
				if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
					t.Fatalf("stat: exit %d %v", code, err)
				}
				if st.Damaged != 1 || st.TornTail || st.Events != 19 || st.Last != 20 || len(st.Segments) != len(segs) || st.Segments[1].Entries != len(frames)-1 {
					t.Fatalf("stat %+v", st)
				}
				code, out, _ = walCLI(t, "--home", h, "wal", "stat")
				if code != 0 || !strings.Contains(out, ", 19 events, seq 1..20, 1 damaged stretch(es): run 'cmlab wal verify'\n") {
					t.Fatalf("stat: exit %d %q", code, out)
				}
				walEdgeUnchanged(t, h, before, "wal verify|dump|stat of a damaged log")
			})
		}
	}
}

// TestWalEdgeTornTailNotRepaired: half a frame at the end of the last
// segment is a torn tail: reported, exit 0, every good event dumped, and
// left in place — only Open cuts it.
func TestWalEdgeTornTailNotRepaired(t *testing.T) {
	h := walEdgeClosedHome(t, 12)
	dir := filepath.Join(h, "wal")
	segs := walEdgeSegments(t, dir)
	last, b, frames := walEdgeLastSegment(t, dir)
	frame := b[frames[len(frames)-1]:]
	torn := frame[:len(frame)/2]
	if err := os.WriteFile(last, append(append([]byte(nil), b...), torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	before := walEdgeDigest(t, h)

	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	want := fmt.Sprintf("segments %d, entries 12, seq 1..12\ntorn tail (repaired at the next open, or a write in progress): segment %s offset %d seq 13: %s (%d bytes, torn tail)\nok\n",
		len(segs), segs[len(segs)-1], len(b), wal.ReasonIncomplete, len(torn))
	if code != 0 || out != want || errs != "" {
		t.Fatalf("verify: exit %d\n%s%s\nwant\n%s", code, out, errs, want)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "verify")
	var rep wal.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Bad) != 0 || rep.TornTail == nil ||
		rep.TornTail.Offset != int64(len(b)) || rep.TornTail.Seq != 13 || !rep.TornTail.TornTail {
		t.Fatalf("verify --json: exit %d %v %s", code, err, out)
	}
	code, out, errs = walCLI(t, "--home", h, "wal", "dump")
	if walEdgeSeqs(t, walEdgeParse(t, out), 1, 12); code != 0 || errs != "" {
		t.Fatalf("dump: exit %d %s", code, errs)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
	var st wal.StatReport
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || !st.TornTail || st.Damaged != 0 || st.Events != 12 || st.Last != 12 {
		t.Fatalf("stat: exit %d %v %s", code, err, out)
	}
	code, out, _ = walCLI(t, "--home", h, "wal", "stat")
	if code != 0 || !strings.Contains(out, ", 12 events, seq 1..12, bad bytes at the tail") {
		t.Fatalf("stat: exit %d %q", code, out)
	}
	walEdgeUnchanged(t, h, before, "wal verify|dump|stat of a torn tail")

	// The tail was really torn: Open cuts it and quarantines the bytes.
	l, err := wal.Open(wal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rep := l.Repaired(); rep == nil || rep.Length != int64(len(torn)) {
		t.Fatalf("Open did not repair the torn tail: %+v", rep)
	}
}

// TestWalEdgeWriterChild is the child of the tests below, re-executed
// from the test binary: "append" appends walEdgeAppenders×walEdgePerAppender
// events concurrently to the log in $CMLAB_TEST_WAL_EDGE_DIR, in two
// halves (it says "half" and waits for "go" on stdin in between), and
// closes it; "hold" appends walEdgeHeld events, says "ready" and waits to
// be killed; "cli" runs cmlab with the arguments in $CMLAB_TEST_WAL_EDGE_ARGS.
func TestWalEdgeWriterChild(t *testing.T) {
	mode := os.Getenv(walEdgeChildEnv)
	if mode == "" {
		t.Skip("child process only")
	}
	dir := os.Getenv(walEdgeDirEnv)
	ctx := context.Background()
	switch mode {
	case "append":
		l, err := wal.Open(wal.Options{Dir: dir, SegmentSize: 1 << 20})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// Two halves: the parent lets the second go once its follower
		// has printed the first, so the follow surely spans a live write.
		in := bufio.NewScanner(os.Stdin)
		for half := 0; half < 2; half++ {
			var wg sync.WaitGroup
			errc := make(chan error, walEdgeAppenders)
			for g := 0; g < walEdgeAppenders; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := half * walEdgePerAppender / 2; k < (half+1)*walEdgePerAppender/2; k++ {
						if _, err := l.Append(ctx, walEdgeOutput(g, k)); err != nil {
							errc <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if half == 0 {
				fmt.Println("half")
				if !in.Scan() || in.Text() != "go" {
					os.Exit(2)
				}
			}
		}
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	case "cli":
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(walEdgeArgsEnv)), &args); err != nil {
			os.Exit(2)
		}
		os.Exit(run(&globalOpts{stdout: os.Stdout, stderr: os.Stderr}, args))
	case "hold":
		l, err := wal.Open(wal.Options{Dir: dir, SegmentSize: 2 << 20})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for k := 0; k < walEdgeHeld; k++ {
			if _, err := l.Append(ctx, walEdgeOutput(0, k)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		fmt.Println("ready")
		select {}
	}
	os.Exit(2)
}

const (
	walEdgeAppenders   = 4
	walEdgePerAppender = 60
	walEdgeOutputBytes = 8 << 10
	walEdgeHeld        = 40
)

// walEdgeOutput is the k-th event of appender g: 8 KiB of output on
// stream g<g> at spool offset k.
func walEdgeOutput(g, k int) *events.Event {
	return events.MustNew(fmt.Sprintf("g%d", g), &events.PtyOutput{SpoolOffset: int64(k), Data: bytes.Repeat([]byte{byte('a' + g)}, walEdgeOutputBytes)})
}

// walEdgeCheckOutput fails unless lines are seqs 1..n of walEdgeOutput
// events in which each appender's events come in its own order.
func walEdgeCheckOutput(t *testing.T, lines []walEdgeDumpLine, appenders, perAppender int) {
	t.Helper()
	walEdgeSeqs(t, lines, 1, uint64(appenders*perAppender))
	next := map[string]int64{}
	for _, d := range lines {
		var p struct {
			SpoolOffset int64  `json:"spool_offset"`
			Data        []byte `json:"data"`
		}
		if err := json.Unmarshal(d.Data, &p); err != nil || d.Type != events.TypePtyOutput {
			t.Fatalf("seq %d: %s %s %v", d.Seq, d.Type, d.Data, err)
		}
		g, err := strconv.Atoi(strings.TrimPrefix(d.Stream, "g"))
		if err != nil || g < 0 || g >= appenders {
			t.Fatalf("seq %d on stream %q", d.Seq, d.Stream)
		}
		if p.SpoolOffset != next[d.Stream] || !bytes.Equal(p.Data, bytes.Repeat([]byte{byte('a' + g)}, walEdgeOutputBytes)) {
			t.Fatalf("seq %d: stream %s offset %d (want %d), %d data bytes", d.Seq, d.Stream, p.SpoolOffset, next[d.Stream], len(p.Data))
		}
		next[d.Stream]++
	}
}

// TestWalEdgeFollowAnotherProcess: 'wal dump --follow' started on an
// empty log directory prints every event another process appends —
// concurrently, across segment files and their preallocated zeros —
// exactly once and in order, and returns when its context ends.
func TestWalEdgeFollowAnotherProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, done := followDump(ctx, dir, &walDumpOpts{from: 1, follow: true, poll: 2 * time.Millisecond})
	cmd, childErr := walEdgeChild(walEdgeChildEnv+"=append", walEdgeDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "half" {
				// The follower must print the first half while the
				// writer still holds the log.
				deadline := time.Now().Add(10 * time.Second)
				for out.lines() < walEdgeAppenders*walEdgePerAppender/2 && time.Now().Before(deadline) {
					time.Sleep(2 * time.Millisecond)
				}
				if out.lines() != walEdgeAppenders*walEdgePerAppender/2 {
					stdin.Close() // the child exits 2 without "go"
					break
				}
				fmt.Fprintln(stdin, "go")
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("writer: %v (follower had printed %d lines)\n%s", err, out.lines(), childErr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("writer did not finish")
	}
	n := walEdgeAppenders * walEdgePerAppender
	if segs := walEdgeSegments(t, dir); len(segs) < 2 {
		t.Fatalf("the writer filled %d segment(s), want several", len(segs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for out.lines() < n {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d lines, want %d", out.lines(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dump --follow did not return after its context ended")
	}
	out.mu.Lock()
	got := out.b.String()
	out.mu.Unlock()
	walEdgeCheckOutput(t, walEdgeParse(t, got), walEdgeAppenders, walEdgePerAppender)
}

// TestWalEdgeDumpFollowStopsAtTo: with --follow and --to, dump returns
// once seq --to has gone by — also when it is the last event on disk and
// when the filters leave it out — instead of waiting for a later event.
func TestWalEdgeDumpFollowStopsAtTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []uint64
	}{
		{"printed", "", []uint64{6, 7}},
		{"filtered out", "a", []uint64{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, l := walHome(t, 5) // seq 7 will be on stream b
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, done := followDump(ctx, filepath.Join(h, "wal"), &walDumpOpts{from: 6, to: 7, stream: tc.stream, follow: true, poll: 2 * time.Millisecond})
			for _, p := range []events.Payload{&events.WalSalvaged{LostSeq: 5}, &events.RecoveryApplied{}} {
				stream := "a"
				if _, ok := p.(*events.RecoveryApplied); ok {
					stream = "b"
				}
				if _, err := l.Append(context.Background(), events.MustNew(stream, p)); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				cancel()
				<-done
				t.Fatalf("dump --follow --to 7 still waiting with seq 7 on disk; printed %d line(s)", out.lines())
			}
			out.mu.Lock()
			lines := walEdgeParse(t, out.b.String())
			out.mu.Unlock()
			var seqs []uint64
			for _, d := range lines {
				seqs = append(seqs, d.Seq)
			}
			if !reflect.DeepEqual(seqs, tc.want) {
				t.Fatalf("seqs %v, want %v", seqs, tc.want)
			}
		})
	}
}

// walEdgeKilledWriter has a child process open the log of home h with
// 2 MiB segments, append walEdgeHeld events and wait; once the zeros
// preallocated ahead of its entries are on disk, it SIGKILLs the child.
// It returns the segment names.
func walEdgeKilledWriter(t *testing.T, h string) []string {
	t.Helper()
	dir := filepath.Join(h, "wal")
	cmd, childErr := walEdgeChild(walEdgeChildEnv+"=hold", walEdgeDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("writer ended before it was ready: %s", childErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writer not ready")
	}
	// The zeros are written in the background: wait for a size that is a
	// whole number of preallocation units past the data.
	segs := walEdgeSegments(t, dir)
	last := filepath.Join(dir, segs[len(segs)-1])
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(last)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 0 && fi.Size()%(1<<20) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last segment is %d bytes, no preallocation", fi.Size())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	if err := cmd.Wait(); err == nil || !cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("writer not killed: %v", err)
	}
	if segs2 := walEdgeSegments(t, dir); !reflect.DeepEqual(segs2, segs) {
		t.Fatalf("segments %v became %v", segs, segs2)
	}
	return segs
}

// TestWalEdgeKilledWriterPreallocatedTail: a writer SIGKILLed while it
// held the log leaves its last segment ending in preallocated zeros. They
// are not damage: verify is ok, stat shows them as preallocated, dump
// prints every event; a frame torn half-way into them is a torn tail.
// Nothing is written either time.
func TestWalEdgeKilledWriterPreallocatedTail(t *testing.T) {
	h := t.TempDir()
	dir := filepath.Join(h, "wal")
	segs := walEdgeKilledWriter(t, h)
	last := filepath.Join(dir, segs[len(segs)-1])
	before := walEdgeDigest(t, h)
	n := uint64(walEdgeHeld)

	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	if want := fmt.Sprintf("segments %d, entries %d, seq 1..%d\nok\n", len(segs), n, n); code != 0 || out != want || errs != "" {
		t.Fatalf("verify: exit %d\n%s%s\nwant\n%s", code, out, errs, want)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
	var st wal.StatReport
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("stat: exit %d %v", code, err)
	}
	tail := st.Segments[len(st.Segments)-1]
	if st.Events != n || st.Last != n || st.Damaged != 0 || st.TornTail || st.ByType[events.TypePtyOutput] != n ||
		tail.Preallocated == 0 || tail.Size%(1<<20) != 0 || tail.Last != n {
		t.Fatalf("stat %+v", st)
	}
	data := tail.Size - tail.Preallocated
	code, out, _ = walCLI(t, "--home", h, "wal", "stat")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d (+%d preallocated)", data, tail.Preallocated)) {
		t.Fatalf("stat: exit %d %q", code, out)
	}
	code, out, errs = walCLI(t, "--home", h, "wal", "dump")
	if code != 0 || errs != "" {
		t.Fatalf("dump: exit %d %s", code, errs)
	}
	walEdgeCheckOutput(t, walEdgeParse(t, out), 1, walEdgeHeld)
	walEdgeUnchanged(t, h, before, "wal verify|dump|stat of a killed writer's log")

	// Half of the next frame written into the zeros, as a write cut short.
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	frames := walEdgeFrames(t, b[:data])
	frame := b[frames[len(frames)-1]:data]
	f, err := os.OpenFile(last, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(frame[:len(frame)/2], data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before = walEdgeDigest(t, h)
	code, out, errs = walCLI(t, "--home", h, "wal", "verify")
	want := fmt.Sprintf("segments %d, entries %d, seq 1..%d\ntorn tail (repaired at the next open, or a write in progress): segment %s offset %d seq %d: ", len(segs), n, n, segs[len(segs)-1], data, n+1)
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, ", torn tail)\nok\n") || errs != "" {
		t.Fatalf("verify of a torn write into the zeros: exit %d\n%s%s\nwant prefix\n%s", code, out, errs, want)
	}
	code, out, errs = walCLI(t, "--home", h, "wal", "dump")
	if walEdgeCheckOutput(t, walEdgeParse(t, out), 1, walEdgeHeld); code != 0 || errs != "" {
		t.Fatalf("dump: exit %d %s", code, errs)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
	st = wal.StatReport{}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || !st.TornTail || st.Damaged != 0 || st.Events != n {
		t.Fatalf("stat: exit %d %v %s", code, err, out)
	}
	walEdgeUnchanged(t, h, before, "wal verify|dump|stat of a torn write into preallocated zeros")
}

// TestWalEdgeMissingSegmentAndStrayFiles: a segment file gone from the
// middle of the log is corruption named at the end of the segment before
// it; files that are not segments (notes, a directory with a segment's
// name) are ignored; a tidwall truncation marker (.START/.END), for which
// Open refuses the log, makes verify fail saying so.
func TestWalEdgeMissingSegmentAndStrayFiles(t *testing.T) {
	h := walEdgeClosedHome(t, 20)
	dir := filepath.Join(h, "wal")
	segs := walEdgeSegments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("segments %v, want at least 3", segs)
	}
	marker := filepath.Join(dir, "00000000000000000001.START")
	if err := os.WriteFile(marker, []byte("not a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "verify")
	if code != 1 || out != "" || !strings.Contains(errs, "00000000000000000001.START is a tidwall/wal truncation marker") {
		t.Fatalf("verify with a truncation marker: exit %d\n%s%s", code, out, errs)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a segment"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "00000000000000000099"), 0o700); err != nil {
		t.Fatal(err)
	}
	before := walEdgeDigest(t, h)
	code, out, errs = walCLI(t, "--home", h, "wal", "verify")
	if code != 0 || out != fmt.Sprintf("segments %d, entries 20, seq 1..20\nok\n", len(segs)) || errs != "" {
		t.Fatalf("verify with stray files: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = walCLI(t, "--home", h, "wal", "dump")
	if walEdgeSeqs(t, walEdgeParse(t, out), 1, 20); code != 0 {
		t.Fatalf("dump with stray files: exit %d", code)
	}
	walEdgeUnchanged(t, h, before, "wal verify|dump with stray files")

	first1, _ := strconv.ParseUint(segs[1], 10, 64)
	first2, _ := strconv.ParseUint(segs[2], 10, 64)
	fi, err := os.Stat(filepath.Join(dir, segs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, segs[1])); err != nil {
		t.Fatal(err)
	}
	before = walEdgeDigest(t, h)
	lost := first2 - first1
	code, out, errs = walCLI(t, "--home", h, "wal", "verify")
	want := fmt.Sprintf("segments %d, entries %d, seq 1..20\nCORRUPT segment %s offset %d seq %d: %s (0 bytes, %d entries lost)\n", len(segs)-1, 20-lost, segs[0], fi.Size(), first1, wal.ReasonMissing, lost)
	if code != exitCorrupt || out != want || !strings.HasSuffix(errs, "then keep every intact entry with 'cmlab recover --salvage --apply --home "+h+"' (stop the daemon first)\n") {
		t.Fatalf("verify without %s: exit %d\n%s%s\nwant\n%s", segs[1], code, out, errs, want)
	}
	code, out, errs = walCLI(t, "--home", h, "wal", "dump")
	walEdgeSeqs(t, walEdgeParse(t, out), 1, first1-1)
	if wantErr := fmt.Sprintf("cmlab: wal: corrupt: segment %s starts at seq %d, expected %d\n  fix: %s\n", segs[2], first2, first1, corruptFix(h)); code != exitCorrupt || errs != wantErr {
		t.Fatalf("dump without %s: exit %d %q, want %q", segs[1], code, errs, wantErr)
	}
	code, out, _ = walCLI(t, "--home", h, "--json", "wal", "stat")
	var st wal.StatReport
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Damaged != 1 || st.Events != 20-lost || len(st.Segments) != len(segs)-1 {
		t.Fatalf("stat without %s: exit %d %v %s", segs[1], code, err, out)
	}
	walEdgeUnchanged(t, h, before, "wal verify|dump|stat without a segment")
}

// TestWalEdgeFollowAcrossRestart: 'wal dump --follow' left running over a
// SIGKILLed writer whose last write was torn half-way into its
// preallocated zeros goes on, once the next writer's Open has cut the torn
// tail, with that writer's wal.repaired event and its appends: every event
// once, in order, nothing of the torn frame.
func TestWalEdgeFollowAcrossRestart(t *testing.T) {
	h := t.TempDir()
	dir := filepath.Join(h, "wal")
	segs := walEdgeKilledWriter(t, h)
	last := filepath.Join(dir, segs[len(segs)-1])
	st, err := wal.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	tail := st.Segments[len(st.Segments)-1]
	data := tail.Size - tail.Preallocated
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	frames := walEdgeFrames(t, b[:data])
	f, err := os.OpenFile(last, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[frames[len(frames)-1]:data][:(data-int64(frames[len(frames)-1]))/2], data); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, done := followDump(ctx, dir, &walDumpOpts{from: 1, follow: true, poll: 2 * time.Millisecond})
	walEdgeAwaitLines(t, out, walEdgeHeld)

	l, err := wal.Open(wal.Options{Dir: dir, SegmentSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rep := l.Repaired(); rep == nil || rep.Offset != data {
		t.Fatalf("Open repaired %+v, want the torn frame at offset %d", rep, data)
	}
	const more = 5
	for k := 0; k < more; k++ {
		if _, err := l.Append(context.Background(), walEdgeOutput(0, walEdgeHeld+k)); err != nil {
			t.Fatal(err)
		}
	}
	walEdgeAwaitLines(t, out, walEdgeHeld+1+more)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	lines := walEdgeParse(t, out.b.String())
	out.mu.Unlock()
	walEdgeSeqs(t, lines, 1, walEdgeHeld+1+more)
	if lines[walEdgeHeld].Type != events.TypeWalRepaired {
		t.Fatalf("seq %d is %s, want %s", walEdgeHeld+1, lines[walEdgeHeld].Type, events.TypeWalRepaired)
	}
	walEdgeCheckOutput(t, lines[:walEdgeHeld], 1, walEdgeHeld)
	for k, d := range lines[walEdgeHeld+1:] {
		var p events.PtyOutput
		if err := json.Unmarshal(d.Data, &p); err != nil || d.Type != events.TypePtyOutput || d.Stream != "g0" || p.SpoolOffset != int64(walEdgeHeld+k) || len(p.Data) != walEdgeOutputBytes {
			t.Fatalf("seq %d after the restart: %s on %s, offset %d, %d bytes (%v)", d.Seq, d.Type, d.Stream, p.SpoolOffset, len(p.Data), err)
		}
	}
}

// walEdgeAwaitLines waits until out holds n lines, and fails if it holds
// more or if they do not come within 10 s.
func walEdgeAwaitLines(t *testing.T, out *walDumpBuffer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for out.lines() < n {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d lines, want %d", out.lines(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := out.lines(); got != n {
		t.Fatalf("followed %d lines, want %d", got, n)
	}
}

// TestWalEdgeDumpWhileAnotherProcessWrites: one-shot dumps of a log that
// another process is appending to (concurrently, across segments and
// preallocated zeros) each exit 0 with a gapless prefix of the log,
// whatever moment of a write they catch; verify and stat meanwhile report
// no damage to acknowledged entries.
func TestWalEdgeDumpWhileAnotherProcessWrites(t *testing.T) {
	h := t.TempDir()
	dir := filepath.Join(h, "wal")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd, childErr := walEdgeChild(walEdgeChildEnv+"=append", walEdgeDirEnv+"="+dir)
	cmd.Stdin = strings.NewReader("go\n")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n := walEdgeAppenders * walEdgePerAppender
	dumps, partial := 0, 0
	deadline := time.After(60 * time.Second)
	for running := true; running; {
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("writer: %v\n%s", err, childErr.String())
			}
			running = false
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("writer did not finish")
		default:
		}
		var out bytes.Buffer
		if err := dumpWAL(context.Background(), dir, &walDumpOpts{from: 1}, &out); err != nil {
			t.Fatalf("dump %d of a live log: %v", dumps, err)
		}
		lines := walEdgeParse(t, out.String())
		walEdgeSeqs(t, lines, 1, uint64(len(lines)))
		if len(lines) < n {
			partial++
		}
		for _, c := range []string{"verify", "stat"} {
			if code, out, errs := walCLI(t, "--home", h, "wal", c); code != 0 || strings.Contains(out, "CORRUPT") || strings.Contains(out, "damaged") {
				t.Fatalf("wal %s of a live log: exit %d\n%s%s", c, code, out, errs)
			}
		}
		dumps++
	}
	var out bytes.Buffer
	if err := dumpWAL(context.Background(), dir, &walDumpOpts{from: 1}, &out); err != nil {
		t.Fatal(err)
	}
	walEdgeCheckOutput(t, walEdgeParse(t, out.String()), walEdgeAppenders, walEdgePerAppender)
	t.Logf("%d dumps while the writer ran, %d of them partial", dumps, partial)
}

// TestWalEdgeFollowInterrupted: the 'cmlab wal dump --follow' process
// prints the log and waits; an interrupt (Ctrl-C) ends it with exit 0 and
// nothing more printed.
func TestWalEdgeFollowInterrupted(t *testing.T) {
	h := walEdgeClosedHome(t, 12)
	args, _ := json.Marshal([]string{"--home", h, "wal", "dump", "--follow", "--poll", "5ms"})
	cmd, childErr := walEdgeChild(walEdgeChildEnv+"=cli", walEdgeArgsEnv+"="+string(args))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	deadline := time.After(10 * time.Second)
	for len(got) < 12 {
		select {
		case ln, ok := <-lines:
			if !ok {
				t.Fatalf("dump --follow ended after %d lines: %s", len(got), childErr.String())
			}
			got = append(got, ln)
		case <-deadline:
			t.Fatalf("dump --follow printed %d lines", len(got))
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for reading := true; reading; { // until the child closes its stdout
		select {
		case ln, ok := <-lines:
			if ok {
				got = append(got, ln)
			}
			reading = ok
		case <-time.After(10 * time.Second):
			t.Fatal("dump --follow did not end on an interrupt")
		}
	}
	if err := cmd.Wait(); err != nil || childErr.Len() != 0 {
		t.Fatalf("interrupted dump --follow: %v, stderr %q", err, childErr.String())
	}
	walEdgeSeqs(t, walEdgeParse(t, strings.Join(got, "\n")+"\n"), 1, 12)
}

// TestWalEdgeFollowStopsAtDamage: --follow does not wait at damage to
// acknowledged entries: in an earlier segment at once, in the last one
// once a second read finds it again (a first sighting may be a write in
// progress); exit 3 after the events before it.
func TestWalEdgeFollowStopsAtDamage(t *testing.T) {
	for _, which := range []string{"earlier", "last"} {
		t.Run(which+" segment", func(t *testing.T) {
			// 12 events fill two segments and end the second; 20 leave
			// an empty third after Close.
			n := map[string]int{"earlier": 20, "last": 12}[which]
			h := walEdgeClosedHome(t, n)
			dir := filepath.Join(h, "wal")
			segs := walEdgeSegments(t, dir)
			seg := segs[1]
			if which == "last" && seg != segs[len(segs)-1] {
				t.Fatalf("segments %v: %s is not the last", segs, seg)
			}
			first, _ := strconv.ParseUint(seg, 10, 64)
			b, err := os.ReadFile(filepath.Join(dir, seg))
			if err != nil {
				t.Fatal(err)
			}
			frames := walEdgeFrames(t, b)
			b[frames[1]+(frames[2]-frames[1])/2] ^= 0x40
			if err := os.WriteFile(filepath.Join(dir, seg), b, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out walDumpBuffer
			err = dumpWAL(ctx, dir, &walDumpOpts{from: 1, follow: true, poll: 2 * time.Millisecond}, &out)
			var ec *exitCodeError
			if ctx.Err() != nil || !errors.As(err, &ec) || ec.code != exitCorrupt || !errors.Is(err, wal.ErrCorrupt) ||
				!strings.Contains(err.Error(), fmt.Sprintf("segment %s offset %d seq %d: ", seg, frames[1], first+1)) {
				t.Fatalf("dump --follow of a damaged log: %v (context: %v)", err, ctx.Err())
			}
			walEdgeSeqs(t, walEdgeParse(t, out.b.String()), 1, first)
		})
	}
}

// A one-shot dump of a log damaged in its last segment, with good entries
// after the damage, exits 3 naming the place, as verify does (it used to
// print the entries before the damage and exit 0, dropping the rest
// silently: the reader paused at the first sighting as if at a write in
// progress and never looked again).
func TestWalEdgeDumpDamageInLastSegment(t *testing.T) {
	h := walEdgeClosedHome(t, 12)
	dir := filepath.Join(h, "wal")
	segs := walEdgeSegments(t, dir)
	last, b, frames := walEdgeLastSegment(t, dir)
	if len(frames) < 2 {
		t.Fatalf("the last segment holds %d frames, want good ones after the damage", len(frames))
	}
	b[frames[0]+(frames[1]-frames[0])/2] ^= 0x40
	if err := os.WriteFile(last, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := walEdgeDigest(t, h)
	if code, _, _ := walCLI(t, "--home", h, "wal", "verify"); code != exitCorrupt {
		t.Fatalf("verify: exit %d", code)
	}
	code, out, errs := walCLI(t, "--home", h, "wal", "dump")
	if code != exitCorrupt || !strings.Contains(errs, "segment "+segs[len(segs)-1]+" offset 0") {
		t.Fatalf("dump: exit %d, %d lines, stderr %q; want exit 3 naming the segment", code, strings.Count(out, "\n"), errs)
	}
	first, err := strconv.ParseUint(segs[len(segs)-1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	walEdgeSeqs(t, walEdgeParse(t, out), 1, first-1)
	walEdgeUnchanged(t, h, before, "verify and dump")
}
