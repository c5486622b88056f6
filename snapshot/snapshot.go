package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrInvalid is returned by Read for a file that must not be trusted.
var ErrInvalid = errors.New("snapshot: invalid")

var magic = []byte("CMSNAP1\n")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes a snapshot.
type Header struct {
	Model   string `msgpack:"model"`
	Version string `msgpack:"version"`
	Seq     uint64 `msgpack:"seq"`
	EventID string `msgpack:"eventId"`
}

type file struct {
	Header
	Body []byte `msgpack:"body"`
}

// Write stores body as the snapshot of h.Model at path.
func Write(path string, h Header, body []byte) error {
	enc, err := msgpack.Marshal(file{Header: h, Body: body})
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	b := make([]byte, 0, len(magic)+len(enc)+4)
	b = append(b, magic...)
	b = append(b, enc...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) // the old snapshot stays
		return fmt.Errorf("snapshot: write %s: %w", filepath.Base(path), err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("snapshot: fsync %s: %w", dir, err)
	}
	return nil
}

// Read loads the snapshot at path if it is whole and was written for model
// at version. A missing file wraps os.ErrNotExist; any other refusal wraps
// ErrInvalid.
func Read(path, model, version string) (Header, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Header{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	if len(b) < len(magic)+4 || !bytes.Equal(b[:len(magic)], magic) {
		return Header{}, nil, fmt.Errorf("%w: %s is not a snapshot file", ErrInvalid, filepath.Base(path))
	}
	n := len(b) - 4
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return Header{}, nil, fmt.Errorf("%w: %s fails its CRC", ErrInvalid, filepath.Base(path))
	}
	var f file
	if err := msgpack.Unmarshal(b[len(magic):n], &f); err != nil {
		return Header{}, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, filepath.Base(path), err)
	}
	if f.Model != model || f.Version != version {
		return Header{}, nil, fmt.Errorf("%w: %s is of %s version %s, this code writes %s version %s",
			ErrInvalid, filepath.Base(path), f.Model, f.Version, model, version)
	}
	return f.Header, f.Body, nil
}
