package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cmlab/cmlab/events"
)

// entryVersion is the first byte of every entry.
const entryVersion = 0xC1

// entryHeader is the version byte plus the CRC32C.
const entryHeader = 5

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about damaged log bytes.
var ErrCorrupt = errors.New("wal: corrupt")

// An entry is the log's frame around an envelope (the envelope's bytes are
// package events' codec: events.AppendEnvelope, events.DecodeEnvelopeFast):
//
//	+---------+------------------+-------------------------------+
//	| 0xC1    | CRC32C (4, BE)   | envelope (msgpack map; its    |
//	| version | of the envelope  | first field seq, fixed-width) |
//	+---------+------------------+-------------------------------+
//
// The log patches the seq in place (sealEntry) and checks it on read.

// EncodeEntry returns the entry bytes for ev: version, CRC32C, envelope.
// The envelope bytes are exactly those of events.EncodeEnvelope.
func EncodeEntry(ev *events.Event) ([]byte, error) {
	b, err := events.AppendEnvelope(make([]byte, entryHeader, entryHeader+events.EnvelopeBound(ev)), ev)
	if err != nil {
		return nil, err
	}
	b[0] = entryVersion
	binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[entryHeader:], castagnoli))
	return b, nil
}

// DecodeEntry checks and decodes entry bytes. wantSeq, when non-zero, must
// equal the stored seq. Every failure wraps ErrCorrupt.
func DecodeEntry(b []byte, wantSeq uint64) (*events.Event, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty entry", ErrCorrupt)
	case len(b) < entryHeader:
		return nil, fmt.Errorf("%w: entry of %d bytes is shorter than its header", ErrCorrupt, len(b))
	case b[0] != entryVersion:
		return nil, fmt.Errorf("%w: version byte 0x%02x, want 0x%02x", ErrCorrupt, b[0], entryVersion)
	}
	env := b[entryHeader:]
	if got, want := crc32.Checksum(env, castagnoli), binary.BigEndian.Uint32(b[1:5]); got != want {
		return nil, fmt.Errorf("%w: crc32c mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	ev, err := events.DecodeEnvelopeFast(env)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if wantSeq != 0 && ev.Seq != wantSeq {
		return nil, fmt.Errorf("%w: entry stores seq %d at index %d", ErrCorrupt, ev.Seq, wantSeq)
	}
	return ev, nil
}
