package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// ErrNoLog is returned when a home has no log to replay.
var ErrNoLog = errors.New("replay: no log")

// Log is a read-only view of a home's log. It reads the segment files
// directly and takes no lock, so replay works while a daemon owns the log.
//
// Segments are tidwall/wal binary segments: a file named by the 20-digit
// index of its first entry, holding entries as uvarint(length) followed by
// that many bytes. Each entry is a cmlab entry (wal.DecodeEntry checks its
// version byte, CRC32C and stored seq). An incomplete or undecodable entry
// at the very end of the last segment is an append in flight (or a torn
// tail the owner will repair at its next open): reading stops before it.
// Anywhere else it is corruption and an error wrapping wal.ErrCorrupt.
type Log struct {
	dir  string
	segs []segment
}

type segment struct {
	first uint64
	path  string
}

// OpenLog lists the segments of the log in dir (home/wal).
func OpenLog(dir string) (*Log, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s", ErrNoLog, filepath.Base(dir))
		}
		return nil, err
	}
	l := &Log{dir: dir}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) != 20 {
			continue // LOCK, .START/.END leftovers of a truncation, temp files
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil || first == 0 {
			continue
		}
		l.segs = append(l.segs, segment{first: first, path: filepath.Join(dir, name)})
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].first < l.segs[j].first })
	return l, nil
}

// Entry is one log entry: its sequence, its exact bytes and its event.
type Entry struct {
	Seq   uint64
	Raw   []byte
	Event *events.Event
}

// Entries iterates over the entries with from ≤ seq ≤ to (to 0: to the end
// as it stands while reading). An error ends the iteration.
func (l *Log) Entries(ctx context.Context, from, to uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for i, s := range l.segs {
			if to != 0 && s.first > to {
				return
			}
			if i+1 < len(l.segs) && l.segs[i+1].first <= from {
				continue // wholly before from
			}
			if err := ctx.Err(); err != nil {
				yield(Entry{}, err)
				return
			}
			data, err := os.ReadFile(s.path)
			if err != nil {
				yield(Entry{}, fmt.Errorf("replay: read segment %s: %w", filepath.Base(s.path), err))
				return
			}
			last := i == len(l.segs)-1
			seq := s.first
			for off := 0; off < len(data); seq++ {
				size, n := binary.Uvarint(data[off:])
				torn := n <= 0 || uint64(len(data)-off-n) < size
				var ev *events.Event
				var raw []byte
				if !torn {
					raw = data[off+n : off+n+int(size)]
					ev, err = wal.DecodeEntry(raw, seq)
				}
				if torn || err != nil {
					end := !torn && off+n+int(size) == len(data)
					if last && (torn || end) {
						return // append in flight or torn tail: the log ends here
					}
					if torn {
						err = fmt.Errorf("%w: incomplete entry", wal.ErrCorrupt)
					}
					yield(Entry{}, fmt.Errorf("replay: segment %s offset %d seq %d: %w", filepath.Base(s.path), off, seq, err))
					return
				}
				off += n + int(size)
				if seq < from {
					continue
				}
				if to != 0 && seq > to {
					return
				}
				if !yield(Entry{Seq: seq, Raw: raw, Event: ev}, nil) {
					return
				}
			}
		}
	}
}

// Events is Entries without the raw bytes.
func (l *Log) Events(ctx context.Context, from, to uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		for e, err := range l.Entries(ctx, from, to) {
			if !yield(e.Event, err) || err != nil {
				return
			}
		}
	}
}

// LastSeq reads the log to its end and returns the last sequence (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	var last uint64
	if len(l.segs) > 0 {
		// Only the last segment needs reading: earlier ones end where it begins.
		tail := &Log{dir: l.dir, segs: l.segs[len(l.segs)-1:]}
		last = l.segs[len(l.segs)-1].first - 1
		for e, err := range tail.Entries(ctx, 0, 0) {
			if err != nil {
				return 0, err
			}
			last = e.Seq
		}
	}
	return last, nil
}
