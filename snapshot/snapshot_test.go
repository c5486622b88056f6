package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestRoundTripAndEveryDamageRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "snapshots", "m.msgpack")
	h := Header{Model: "m", Version: "1/test", Seq: 42, EventID: "ev-42"}
	body := []byte("\x83\xa1aXYZ body bytes")
	if err := Write(path, h, body); err != nil {
		t.Fatal(err)
	}
	got, gotBody, err := Read(path, "m", "1/test")
	if err != nil || got != h || !bytes.Equal(gotBody, body) {
		t.Fatalf("read back %+v %q %v", got, gotBody, err)
	}
	if left, _ := filepath.Glob(path + ".tmp-*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if _, _, err := Read(path, "m", "2/test"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("other version: %v", err)
	}
	if _, _, err := Read(path, "other", "1/test"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("other model: %v", err)
	}
	good, _ := os.ReadFile(path)
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		os.WriteFile(path, b, 0o600)
		if _, _, err := Read(path, "m", "1/test"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	for n := range len(good) {
		os.WriteFile(path, good[:n], 0o600)
		if _, _, err := Read(path, "m", "1/test"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	os.Remove(path)
	if _, _, err := Read(path, "m", "1/test"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

// TestFailedWriteKeepsOld: a write that cannot complete leaves the old
// snapshot whole.
func TestFailedWriteKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.msgpack")
	h := Header{Model: "m", Version: "1", Seq: 1}
	if err := Write(path, h, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// A directory where the file should go makes the rename fail.
	if err := Write(filepath.Join(path, "x"), h, []byte("new")); err == nil {
		t.Fatal("write under a file succeeded")
	}
	if _, b, err := Read(path, "m", "1"); err != nil || string(b) != "old" {
		t.Fatalf("old snapshot: %q %v", b, err)
	}
}

// decodeFile reads what msgpack.Unmarshal reads, for bodies of every bin
// width (nil, empty, 8-, 16- and 32-bit lengths), with the body a slice of
// the file's bytes that an append cannot overrun; a body longer than the
// bytes left, or bytes after the fields, is an error and no panic.
func TestDecodeFileEqualsUnmarshal(t *testing.T) {
	for _, size := range []int{-1, 0, 1, 200, 70_000, 1 << 20} {
		var body []byte
		if size >= 0 {
			body = bytes.Repeat([]byte{0xa5, 0x00, 0x5a}, size/3+1)[:size]
		}
		want := file{Header: Header{Model: "labstate", Version: "3/x", Seq: uint64(size + 2), EventID: "ev"}, Body: body}
		b, err := msgpack.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var old file
		if err := msgpack.Unmarshal(b, &old); err != nil {
			t.Fatal(err)
		}
		got, err := decodeFile(b)
		if err != nil || got.Header != old.Header || !bytes.Equal(got.Body, old.Body) || (got.Body == nil) != (old.Body == nil) {
			t.Fatalf("size %d: %+v %v, msgpack.Unmarshal gives %+v", size, got.Header, err, old.Header)
		}
		if size > 0 {
			if &got.Body[0] != &b[len(b)-size] || cap(got.Body) != size {
				t.Fatalf("size %d: the body is not the file's bytes (cap %d)", size, cap(got.Body))
			}
		}
		if _, err := decodeFile(append(bytes.Clone(b), 0xc0)); err == nil {
			t.Fatalf("size %d: a byte after the fields was accepted", size)
		}
		if size > 0 {
			if _, err := decodeFile(b[:len(b)-1]); err == nil {
				t.Fatalf("size %d: a body cut short was accepted", size)
			}
		}
	}
}
