package pty

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/projections"
)

// ErrSpoolUnavailable: the spool file cannot give the bytes the log
// accounts for (missing, shorter than the log says while the views lag the
// log, or not a regular file). The log still holds every byte; the views
// catch up (engine.ViewsErr) or `cmlab rebuild` rewrites them.
var ErrSpoolUnavailable = errors.New("spool file unavailable")

// spoolView is a reader's copy of a conversation's spool position, taken
// under stateMu and used outside it: the file is read by offset with no
// lock held, so a reader never stalls the committer.
type spoolView struct {
	conv string
	size int64
	tail []byte // the last len(tail) bytes before size
}

func (v spoolView) tailStart() int64 { return v.size - int64(len(v.tail)) }

// spoolFile opens conv's output.spool beneath the home (package confine:
// no symlink followed, a regular file only).
func (m *Manager) spoolFile(conv string) (*os.File, error) {
	f, err := confine.Open(m.root, projections.PtySpoolView(conv))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSpoolUnavailable, projections.PtySpoolView(conv), err)
	}
	return f, nil
}

// spoolReader reads spool ranges of one view; it opens the file only when
// a range starts before the tail, and once.
type spoolReader struct {
	m   *Manager
	v   spoolView
	f   *os.File
	err error
}

func (m *Manager) reader(v spoolView) *spoolReader { return &spoolReader{m: m, v: v} }

func (r *spoolReader) close() {
	if r.f != nil {
		r.f.Close()
	}
}

// bytes returns the spool's bytes [from, to) (to ≤ v.size). A slice of the
// tail is returned without a copy; the caller must not modify it.
func (r *spoolReader) bytes(from, to int64) ([]byte, error) {
	if from < 0 || to > r.v.size || from > to {
		return nil, fmt.Errorf("%w: [%d, %d) outside [0, %d]", ErrInvalidCursor, from, to, r.v.size)
	}
	ts := r.v.tailStart()
	if from >= ts {
		return r.v.tail[from-ts : to-ts], nil
	}
	out := make([]byte, to-from)
	fileEnd := min(to, ts)
	if err := r.readAt(out[:fileEnd-from], from); err != nil {
		return nil, err
	}
	if to > ts {
		copy(out[fileEnd-from:], r.v.tail[:to-ts])
	}
	return out, nil
}

func (r *spoolReader) readAt(p []byte, off int64) error {
	if r.err != nil {
		return r.err
	}
	if r.f == nil {
		if r.f, r.err = r.m.spoolFile(r.v.conv); r.err != nil {
			return r.err
		}
	}
	n, err := r.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == io.EOF || err == nil {
		return fmt.Errorf("%w: %s holds %d bytes at offset %d, the log %d", ErrSpoolUnavailable,
			projections.PtySpoolView(r.v.conv), off+int64(n), off, r.v.size)
	}
	return fmt.Errorf("%w: %v", ErrSpoolUnavailable, err)
}

// scanChunk is how much of the file a scan reads at once.
const scanChunk = 1 << 20

// index finds the first occurrence of pat in [from, to), reading the file
// in chunks that overlap by len(pat)-1, so a match across chunks is found.
func (r *spoolReader) index(pat []byte, from, to int64) (int64, bool, error) {
	if len(pat) == 0 {
		return 0, false, nil
	}
	ov := int64(len(pat) - 1)
	for pos := from; to-pos >= int64(len(pat)); {
		end := to
		if pos < r.v.tailStart() {
			end = min(to, pos+scanChunk+ov)
		}
		b, err := r.bytes(pos, end)
		if err != nil {
			return 0, false, err
		}
		if i := bytes.Index(b, pat); i >= 0 {
			return pos + int64(i), true, nil
		}
		if end == to {
			break
		}
		pos = end - ov
	}
	return 0, false, nil
}

// runeReader streams [from, to) for regexp.FindReaderIndex, which takes
// a read error for the end of the text: the caller checks rangeReader.err.
func (r *spoolReader) runeReader(from, to int64) (io.RuneReader, *rangeReader) {
	rr := &rangeReader{r: r, pos: from, end: to}
	return bufio.NewReaderSize(rr, 64<<10), rr
}

type rangeReader struct {
	r        *spoolReader
	pos, end int64
	err      error
}

func (rr *rangeReader) Read(p []byte) (int, error) {
	if rr.pos >= rr.end {
		return 0, io.EOF
	}
	n := min(int64(len(p)), rr.end-rr.pos)
	b, err := rr.r.bytes(rr.pos, rr.pos+n)
	if err != nil {
		rr.err = err
		return 0, err
	}
	copy(p, b)
	rr.pos += n
	return int(n), nil
}
