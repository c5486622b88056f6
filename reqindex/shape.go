package reqindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
)

// bbolt's file begins with two meta pages (page 0 at offset 0, page 1 at
// offset pageSize), each a 16-byte page header followed by, in the
// machine's byte order:
//
//	off  0 magic uint32 (0xED0CDAED)   off 32 freelist pgid uint64
//	off  4 version uint32 (2)          off 40 high-water pgid uint64
//	off  8 pageSize uint32             off 48 txid uint64
//	off 12 flags uint32                off 56 checksum uint64 (FNV-64a of off 0–55)
//	off 16 root pgid, sequence uint64
//
// bbolt maps the file and reads the pages the newest valid meta names
// without checking they lie inside the file: a file cut short makes it
// fault on its map (SIGBUS), which ends the process. checkShape reads the
// meta pages with plain reads first and refuses a file shorter than the
// high-water mark the newest valid meta records.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumOffset  = 56
)

// errShape is the error of a file bbolt must not map.
var errShape = errors.New("not a whole bbolt file")

// checkShape refuses a file whose meta pages are unreadable or which is
// shorter than the pages its newest valid meta claims.
func checkShape(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", errShape, fi.Mode().Type())
	}
	size := fi.Size()
	m0, err0 := readMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, pageSize)
	var best *boltMeta
	switch {
	case err0 == nil && err1 == nil:
		best = &m0
		if m1.txid > m0.txid && m1.pageSize == m0.pageSize {
			best = &m1
		}
	case err0 == nil:
		best = &m0
	case err1 == nil:
		best = &m1
	default:
		return fmt.Errorf("%w: no valid meta page (%v; %v)", errShape, err0, err1)
	}
	need := int64(best.pgid) * int64(best.pageSize)
	if size < need || size < 2*int64(best.pageSize) {
		return fmt.Errorf("%w: %d bytes, its meta (txid %d) needs %d pages of %d bytes (%d bytes): cut short",
			errShape, size, best.txid, best.pgid, best.pageSize, need)
	}
	if best.root >= best.pgid || (best.freelist >= best.pgid && best.freelist != ^uint64(0)) {
		return fmt.Errorf("%w: meta names pages past its high-water mark", errShape)
	}
	return nil
}

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

func readMeta(r io.ReaderAt, pageOff int64) (boltMeta, error) {
	var b [metaSumOffset + 8]byte
	if _, err := r.ReadAt(b[:], pageOff+pageHeaderSize); err != nil {
		return boltMeta{}, fmt.Errorf("meta page at %d: %w", pageOff, err)
	}
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, fmt.Errorf("meta page at %d: bad magic or version", pageOff)
	}
	h := fnv.New64a()
	h.Write(b[:metaSumOffset])
	if h.Sum64() != ne.Uint64(b[metaSumOffset:]) {
		return boltMeta{}, fmt.Errorf("meta page at %d: checksum mismatch", pageOff)
	}
	m := boltMeta{pageSize: ne.Uint32(b[8:]), root: ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]),
		pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}
	if m.pageSize < 512 || m.pageSize > 1<<20 || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, fmt.Errorf("meta page at %d: page size %d", pageOff, m.pageSize)
	}
	return m, nil
}

// faultsPanic makes a fault on a mapped page in this goroutine a panic
// (which the caller recovers into an error) rather than the end of the
// process, until the returned function restores the previous setting.
// The shape check keeps known cuts away from the map; this is the net
// under what it cannot see (a file cut while open, a hole on a bad disk).
func faultsPanic() (restore func()) {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}
