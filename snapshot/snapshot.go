package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/cmlab/cmlab/home"
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

// Write stores body as the snapshot of h.Model at path (WriteFS on the
// real file system).
func Write(path string, h Header, body []byte) error { return WriteFS(nil, path, h, body) }

// WriteFS stores body as the snapshot of h.Model at path through fsys
// (home.WriteDurable's seam; nil is the real file system): the fault and
// crash tests pass one that fails or blocks a stage of the write.
func WriteFS(fsys home.FS, path string, h Header, body []byte) error {
	// Encoded straight after the magic into one buffer sized for it: a
	// Lab state's body is 145 MB at 1M events, copied once here.
	buf := bytes.NewBuffer(make([]byte, 0, len(magic)+len(body)+len(h.Model)+len(h.Version)+len(h.EventID)+64))
	buf.Write(magic)
	if err := msgpack.NewEncoder(buf).Encode(file{Header: h, Body: body}); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	b := buf.Bytes()
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	err := home.WriteDurable(path, home.WriteOptions{FS: fsys, TempPattern: filepath.Base(path) + ".tmp-*"}, home.Bytes(b))
	if err != nil {
		return fmt.Errorf("snapshot: write %s: %w", filepath.Base(path), err)
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
	f, err := decodeFile(b[len(magic):n])
	if err != nil {
		return Header{}, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, filepath.Base(path), err)
	}
	if f.Model != model || f.Version != version {
		return Header{}, nil, fmt.Errorf("%w: %s is of %s version %s, this code writes %s version %s",
			ErrInvalid, filepath.Base(path), f.Model, f.Version, model, version)
	}
	return f.Header, f.Body, nil
}

// Check refuses a snapshot whose header does not fit the log it is to be
// resumed on: the log ends at last, its first retained seq is first, and
// idAt returns the id of the event at a seq. The covered seq must be in
// the log with the same event id; a seq before first (compacted away) is
// trusted on the file's CRC alone. Refusals wrap ErrInvalid.
func Check(h Header, first, last uint64, idAt func(seq uint64) (string, error)) error {
	if h.Seq > last {
		return fmt.Errorf("%w: covers seq %d, the log ends at %d", ErrInvalid, h.Seq, last)
	}
	if h.Seq == 0 || h.Seq < first {
		return nil
	}
	id, err := idAt(h.Seq)
	if err != nil || id != h.EventID {
		return fmt.Errorf("%w: covered seq %d is not event %s in this log", ErrInvalid, h.Seq, h.EventID)
	}
	return nil
}

// decodeFile decodes the msgpack encoding of a file (a map of its
// fields), its body a slice of b rather than a copy (msgpack.Unmarshal
// copies a bin value: another 145 MB, and 0.6 s of a 3.4 s start, for a
// Lab state of 1M events). The decoder reads b through a bytes.Reader,
// which it uses as it is (no read-ahead), so the reader's position is the
// decoder's.
func decodeFile(b []byte) (file, error) {
	var f file
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	n, err := dec.DecodeMapLen()
	if err != nil {
		return f, err
	}
	if n < 0 {
		return f, errors.New("nil instead of a map")
	}
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return f, err
		}
		switch key {
		case "model":
			f.Model, err = dec.DecodeString()
		case "version":
			f.Version, err = dec.DecodeString()
		case "seq":
			f.Seq, err = dec.DecodeUint64()
		case "eventId":
			f.EventID, err = dec.DecodeString()
		case "body":
			var size int
			if size, err = dec.DecodeBytesLen(); err != nil || size < 0 {
				break // nil body
			}
			at := len(b) - r.Len()
			if size > r.Len() {
				return f, fmt.Errorf("body of %d bytes, %d left", size, r.Len())
			}
			f.Body = b[at : at+size : at+size]
			_, err = r.Seek(int64(size), io.SeekCurrent)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return f, fmt.Errorf("field %q: %w", key, err)
		}
	}
	if r.Len() != 0 {
		return f, fmt.Errorf("%d bytes after the snapshot's fields", r.Len())
	}
	return f, nil
}

// RemoveStale removes the temporary files a write to path left when a
// crash interrupted it.
func RemoveStale(path string) {
	stale, _ := filepath.Glob(path + ".tmp-*")
	for _, f := range stale {
		os.Remove(f)
	}
}

var codeVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			v += "+" + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			v += "+dirty"
		}
	}
	return v
})

// CodeVersion names the build of this program (module version and VCS
// revision when the build recorded them): a model's snapshot version is
// its schema number and this, so a snapshot another build wrote is
// rebuilt from the log rather than trusted.
func CodeVersion() string { return codeVersion() }
