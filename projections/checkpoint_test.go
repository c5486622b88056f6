package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

// crashedHome projects all of evs into a new home, checkpointing after the
// first cut events, and stops without a final checkpoint (a crash): the
// views run past the checkpoint.
func crashedHome(t *testing.T, evs []*events.Event, cut int) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	p, err := Open(Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	applyBatches(t, p, evs[:cut], 50)
	if err := p.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	applyBatches(t, p, evs[cut:], 50)
	if err := p.CloseNoCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return h
}

// applyBatches applies evs in batches of size events.
func applyBatches(t *testing.T, p *Projector, evs []*events.Event, size int) {
	t.Helper()
	for len(evs) > 0 {
		n := min(len(evs), size)
		if err := p.Apply(evs[:n]); err != nil {
			t.Fatal(err)
		}
		evs = evs[n:]
	}
}

func copyHome(t *testing.T, src home.Home) home.Home {
	t.Helper()
	dst := home.Home{Dir: t.TempDir()}
	err := filepath.WalkDir(src.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src.Dir, p)
		to := filepath.Join(dst.Dir, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// seal writes cp as a checkpoint that passes the sum check.
func seal(t *testing.T, h home.Home, cp Checkpoint) {
	t.Helper()
	cp.Sum = 0
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	cp.Sum = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	if b, err = json.Marshal(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.CheckpointFile(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointTailCheck: catch-up trusts a view only when its bytes at
// the checkpointed size are what the checkpoint recorded there. A
// checkpoint whose sizes lie (mid-line, or re-sealed with wrong sizes),
// whose sum does not match, or a view whose tail was damaged, leads to a
// rebuild of the views concerned, and the views end byte-identical to a
// rebuild from the log; the true checkpoint, and the same one in the old
// version 1 format, are trusted (catch-up from the checkpoint's seq).
func TestCheckpointTailCheck(t *testing.T) {
	const total, cut = 600, 400
	evs := workloadEvents(WorkloadEveryType, 5, total)
	want := rebuildInto(t, workloadSrc(WorkloadEveryType, 5, total), RebuildOptions{NoSync: true})
	crashed := crashedHome(t, evs, cut)
	truth, err := ReadCheckpoint(crashed)
	if err != nil || truth == nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if truth.Version != 2 || truth.Seq != cut || len(truth.Tails) == 0 {
		t.Fatalf("checkpoint version %d seq %d tails %d", truth.Version, truth.Seq, len(truth.Tails))
	}
	for v, n := range truth.Views {
		if _, ok := truth.Tails[v]; ok != (n > 0) {
			t.Fatalf("view %s of size %d: tail present %v", v, n, ok)
		}
	}
	// The view with the longest checkpointed content, to damage.
	var big string
	for v, n := range truth.Views {
		if n > truth.Views[big] && v != FeedbackView {
			big = v
		}
	}
	clone := func() Checkpoint {
		c := Checkpoint{Version: truth.Version, Seq: truth.Seq, Views: map[string]int64{}, Tails: map[string]uint32{}}
		for v, n := range truth.Views {
			c.Views[v] = n
		}
		for v, x := range truth.Tails {
			c.Tails[v] = x
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		tamper   func(t *testing.T, h home.Home)
		from     uint64 // expected ReplayFrom
		unsealed bool   // ReadCheckpoint refuses it
	}{
		{"true checkpoint", func(*testing.T, home.Home) {}, cut + 1, false},
		{"version 1 of the true checkpoint", func(t *testing.T, h home.Home) {
			c := clone()
			b, _ := json.Marshal(map[string]any{"version": 1, "seq": c.Seq, "views": c.Views})
			os.WriteFile(h.CheckpointFile(), b, 0o600)
		}, cut + 1, false},
		// Version 1 has no tails: only a JSONL view's cut point is checked
		// (it must end a line); raw views (pty block output) are trusted.
		{"version 1 JSONL sizes mid-line", func(t *testing.T, h home.Home) {
			c := clone()
			for v, n := range c.Views {
				if n > 0 && strings.HasSuffix(v, ".jsonl") {
					c.Views[v] = n - 1
				}
			}
			b, _ := json.Marshal(map[string]any{"version": 1, "seq": c.Seq, "views": c.Views})
			os.WriteFile(h.CheckpointFile(), b, 0o600)
		}, 1, false},
		{"re-sealed halved sizes", func(t *testing.T, h home.Home) {
			c := clone()
			for v := range c.Views {
				c.Views[v] /= 2
			}
			seal(t, h, c)
		}, 1, false},
		{"re-sealed without tails", func(t *testing.T, h home.Home) {
			c := clone()
			c.Tails = nil
			seal(t, h, c)
		}, 1, false},
		{"sum does not match", func(t *testing.T, h home.Home) {
			b, _ := os.ReadFile(h.CheckpointFile())
			c := clone()
			c.Seq--
			c.Sum = truth.Sum
			b2, _ := json.Marshal(c)
			if bytes.Equal(b, b2) {
				t.Fatal("tamper changed nothing")
			}
			os.WriteFile(h.CheckpointFile(), b2, 0o600)
		}, 1, true},
		{"view damaged before its checkpointed size", func(t *testing.T, h home.Home) {
			path := filepath.Join(h.Dir, filepath.FromSlash(big))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			at := truth.Views[big] - 3 // inside the last checkpointed line, not its newline
			b[at] ^= 0x01
			os.WriteFile(path, b, 0o600)
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := copyHome(t, crashed)
			tc.tamper(t, h)
			if _, err := ReadCheckpoint(h); errors.Is(err, ErrCheckpoint) != tc.unsealed {
				t.Fatalf("ReadCheckpoint: %v", err)
			}
			p, err := Open(Options{Home: h, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			from := p.ReplayFrom()
			if from != tc.from {
				t.Fatalf("ReplayFrom %d, want %d", from, tc.from)
			}
			applyBatches(t, p, evs[from-1:], 50)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if d, err := Compare(h, want); err != nil || d != nil {
				t.Fatalf("views differ from a rebuild: %v %v", d, err)
			}
			// The checkpoint Close wrote is trusted as a whole.
			p, err = Open(Options{Home: h, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.ReplayFrom(); got != total+1 {
				t.Fatalf("after close ReplayFrom %d, want %d", got, total+1)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The checkpoint's sum is checked on the file's own bytes when they are
// as writeCheckpoint writes them (no re-encoding of a checkpoint that
// lists thousands of views), and ReadCheckpointSeq trusts a checkpoint
// exactly when ReadCheckpoint does: the same answer for every flipped
// bit tried at every byte, and for a re-indented file, which only the
// re-encoding accepts.
func TestCheckpointSumOnTheFileBytes(t *testing.T) {
	const total, cut = 300, 200
	h := crashedHome(t, workloadEvents(WorkloadEveryType, 7, total), cut)
	good, err := os.ReadFile(h.CheckpointFile())
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ReadCheckpoint(h)
	if err != nil || cp == nil || cp.Seq != cut {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	if sum, ok := rawSum(good); !ok || sum != cp.Sum {
		t.Fatalf("the written checkpoint does not pass the check on its bytes: %q…", good[max(0, len(good)-60):])
	}
	if seq, ok, err := ReadCheckpointSeq(h); err != nil || !ok || seq != cut {
		t.Fatalf("ReadCheckpointSeq: %d %v %v", seq, ok, err)
	}
	outcome := func() (string, string) {
		full := "refused"
		if c, err := ReadCheckpoint(h); err == nil && c != nil {
			full = fmt.Sprint("seq ", c.Seq)
		}
		seqOnly := "refused"
		if seq, ok, err := ReadCheckpointSeq(h); err == nil && ok {
			seqOnly = fmt.Sprint("seq ", seq)
		}
		return full, seqOnly
	}
	refused := 0
	for i := range good {
		for _, mask := range []byte{0x01, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= mask
			if err := os.WriteFile(h.CheckpointFile(), b, 0o600); err != nil {
				t.Fatal(err)
			}
			full, seqOnly := outcome()
			if full != seqOnly {
				t.Fatalf("byte %d ^ %#x: ReadCheckpoint %s, ReadCheckpointSeq %s", i, mask, full, seqOnly)
			}
			if full == "refused" {
				refused++
			}
		}
	}
	// Every flip but those of the final newline changes what is summed.
	t.Logf("refused %d of %d", refused, 2*len(good))
	if want := 2 * (len(good) - 1); refused < want {
		t.Fatalf("%d of %d flipped checkpoints refused, want at least %d", refused, 2*len(good), want)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, good, "", "  "); err != nil {
		t.Fatal(err)
	}
	if _, ok := rawSum(indented.Bytes()); ok {
		t.Fatal("an indented checkpoint passed the check on its bytes")
	}
	if err := os.WriteFile(h.CheckpointFile(), indented.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if full, seqOnly := outcome(); full != fmt.Sprint("seq ", cut) || seqOnly != full {
		t.Fatalf("indented checkpoint: ReadCheckpoint %s, ReadCheckpointSeq %s", full, seqOnly)
	}
}

// sealCheckpoint's one encoding is byte for byte the two it replaces: the
// sum of the encoding with Sum zero, then the encoding with the sum.
func TestSealCheckpointEqualsTwoEncodings(t *testing.T) {
	for i, cp := range []Checkpoint{
		{Version: 2, Seq: 1, Views: map[string]int64{}},
		{Version: 2, Seq: 987654321, Views: map[string]int64{"feedback/feedback.jsonl": 12, "lab/runs.jsonl": 0, "pty/c/blocks/b.out": 1 << 40},
			Tails: map[string]uint32{"feedback/feedback.jsonl": 7}, CRCs: map[string]uint32{"feedback/feedback.jsonl": 1<<32 - 1}},
	} {
		c := cp
		want, err := c.sum()
		if err != nil {
			t.Fatal(err)
		}
		c.Sum = want
		old, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sealCheckpoint(&cp)
		if err != nil || cp.Sum != want || string(got) != string(old)+"\n" {
			t.Fatalf("case %d: sum %d (want %d) %v\n%s\nwant\n%s", i, cp.Sum, want, err, got, old)
		}
		if s, ok := rawSum(got); !ok || s != want {
			t.Fatalf("case %d: rawSum %d %v", i, s, ok)
		}
	}
}

// Checkpoint.Vouches makes the checks Open makes before it trusts a view's
// size: the line boundary of a JSONL view, the tail checksum, the
// whole-view CRC when the checkpoint has crcs.
func TestCheckpointVouches(t *testing.T) {
	const v = RunsView
	data := []byte("{\"runId\":\"run_a\"}\n{\"runId\":\"run_b\"}\n")
	first := int64(bytes.IndexByte(data, '\n') + 1)
	sum := func(n int64) uint32 { return crc32.Checksum(data[:n], castagnoli) }
	at := func(n int64) *Checkpoint {
		return &Checkpoint{Version: checkpointVersion, Views: map[string]int64{v: n}, Tails: map[string]uint32{v: sum(n)}, CRCs: map[string]uint32{v: sum(n)}}
	}
	for _, tc := range []struct {
		name string
		cp   func() *Checkpoint
		want bool
	}{
		{"true size", func() *Checkpoint { return at(first) }, true},
		{"the whole file", func() *Checkpoint { return at(int64(len(data))) }, true},
		{"not listed", func() *Checkpoint { return &Checkpoint{Version: checkpointVersion, Views: map[string]int64{}} }, true},
		{"mid-line, its own checksums", func() *Checkpoint { return at(first - 1) }, false},
		{"past the file", func() *Checkpoint {
			c := at(int64(len(data)))
			c.Views[v]++
			return c
		}, false},
		{"checksums of another size", func() *Checkpoint {
			c := at(first)
			c.Views[v] = int64(len(data))
			return c
		}, false},
		{"whole-view CRC differs", func() *Checkpoint {
			c := at(first)
			c.CRCs[v]++
			return c
		}, false},
		{"no crc for the view", func() *Checkpoint {
			c := at(first)
			c.CRCs = map[string]uint32{}
			return c
		}, false},
		{"written before crcs", func() *Checkpoint {
			c := at(first)
			c.CRCs = nil
			return c
		}, true},
		{"version 1, on a line boundary", func() *Checkpoint {
			return &Checkpoint{Version: checkpointVersionV1, Views: map[string]int64{v: first}}
		}, true},
		{"version 1, mid-line", func() *Checkpoint {
			return &Checkpoint{Version: checkpointVersionV1, Views: map[string]int64{v: first - 1}}
		}, false},
	} {
		if got := tc.cp().Vouches(v, data); got != tc.want {
			t.Errorf("%s: Vouches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A checkpoint over mapCheckpointOver (a terminal home's, a view per
// block) is read through a mapping: ReadCheckpointSeq gives its seq, and
// refuses it exactly when ReadCheckpoint does, at flips sampled across it.
func TestCheckpointSeqOfALargeCheckpoint(t *testing.T) {
	h := crashedHome(t, workloadEvents(WorkloadEveryType, 7, 50), 40)
	cp := &Checkpoint{Version: checkpointVersion, Seq: 123456, Views: map[string]int64{}, Tails: map[string]uint32{}, CRCs: map[string]uint32{}}
	for i := range 6000 {
		name := fmt.Sprintf("pty/conv_%d/blocks/blk_%08d.json", i%4, i)
		cp.Views[name], cp.Tails[name], cp.CRCs[name] = int64(i*7), uint32(i*13), uint32(i*17)
	}
	if err := writeCheckpoint(h, cp, true); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(h.CheckpointFile())
	if err != nil || len(good) <= mapCheckpointOver {
		t.Fatalf("checkpoint of %d bytes (%v), want over %d", len(good), err, mapCheckpointOver)
	}
	if seq, ok, err := ReadCheckpointSeq(h); err != nil || !ok || seq != 123456 {
		t.Fatalf("ReadCheckpointSeq: %d %v %v", seq, ok, err)
	}
	for _, i := range []int{0, 10, len(good) / 3, len(good) / 2, len(good) - 20, len(good) - 2} {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		if err := os.WriteFile(h.CheckpointFile(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		c, ferr := ReadCheckpoint(h)
		seq, ok, serr := ReadCheckpointSeq(h)
		if (ferr == nil) != (serr == nil && ok) || (ferr == nil && c.Seq != seq) {
			t.Fatalf("byte %d flipped: ReadCheckpoint %v %v, ReadCheckpointSeq %d %v %v", i, c != nil, ferr, seq, ok, serr)
		}
	}
}
