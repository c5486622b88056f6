package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
