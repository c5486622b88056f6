package fuzz

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// FuzzPreallocatedTail writes a cleanly closed log of five events, then
// appends arbitrary bytes (at an offset of up to 4095 zeros, so that they
// can end on any sector) and pads the segment with zeros to 1 MiB: the
// shape of a preallocated tail segment after a crash. Then:
//
//  1. Verify and Open never panic, and Open either succeeds or refuses
//     with an error wrapping wal.ErrCorrupt;
//  2. an Open that succeeds keeps the five acknowledged events byte for
//     byte, and the log then verifies clean, without a torn tail or
//     leftover zeros;
//  3. a refusal changes nothing on disk.
func FuzzPreallocatedTail(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0xd0, 0x01, 0xC1, 7, 7}, uint16(0))
	f.Add([]byte{1, 2, 3}, uint16(4000))
	f.Add(bytes.Repeat([]byte{0xEE}, 600), uint16(100))
	f.Fuzz(func(t *testing.T, tail []byte, gap uint16) {
		if len(tail) > 64<<10 {
			return
		}
		root := t.TempDir()
		dir := filepath.Join(root, "wal")
		l, err := wal.Open(wal.Options{Dir: dir, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for i := 0; i < 5; i++ {
			ev := events.MustNew("s", &events.WalSalvaged{LostSeq: uint64(i), Segment: "fuzz"})
			if _, err := l.Append(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			b, err := wal.EncodeEntry(ev)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, b)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "0*"))
		if len(segs) != 1 {
			t.Fatalf("segments %v", segs)
		}
		data, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, make([]byte, int(gap)%4096)...)
		data = append(data, tail...)
		data = append(data, make([]byte, (1<<20)-len(data)%(1<<20))...)
		if err := os.WriteFile(segs[0], data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = wal.Verify(dir)
		l2, err := wal.Open(wal.Options{Dir: dir, NoSync: true})
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			if after, _ := os.ReadFile(segs[0]); !bytes.Equal(after, data) {
				t.Fatal("a refused Open changed the segment")
			}
			return
		}
		defer l2.Close()
		for i, w := range want {
			ev, err := l2.Read(uint64(i + 1))
			if err != nil {
				t.Fatalf("acknowledged seq %d: %v", i+1, err)
			}
			got, _ := wal.EncodeEntry(ev)
			if !bytes.Equal(got, w) {
				t.Fatalf("acknowledged seq %d changed", i+1)
			}
		}
		rep, err := wal.Verify(dir)
		if err != nil || rep.TornTail != nil || len(rep.Bad) != 0 {
			t.Fatalf("Verify after Open: %+v %v", rep, err)
		}
		st, err := wal.Stat(dir)
		if err != nil || st.Segments[len(st.Segments)-1].Preallocated != 0 {
			t.Fatalf("Stat after Open: %+v %v", st, err)
		}
	})
}
