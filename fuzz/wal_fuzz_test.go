package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// walSeedEvents are the well-formed events the WAL seeds start from.
func walSeedEvents() []*events.Event {
	a := events.MustNew("wal", &events.WalRepaired{Segment: "00000000000000000001", Offset: 42, Length: 7, Quarantine: "q", Reason: wal.ReasonBadCRC, FirstSeq: 3})
	a.Seq, a.TS, a.ID = 3, 1_700_000_000_000, "018f0000-0000-7000-8000-000000000001"
	b := events.MustNew("lab_1", &events.WalSalvaged{LostSeq: 9, Guess: "between"})
	b.Seq, b.TS, b.ID = 1<<40, -5, "x"
	b.WithRequest("req-1", "sha256-abc", []byte(`{"feedbackId":"fb_1"}`))
	return []*events.Event{a, b}
}

// fixCRC rewrites the CRC of an entry-shaped byte string so that the
// fuzzer's mutations reach envelope decoding instead of dying at the CRC.
func fixCRC(b []byte) []byte {
	if len(b) < 5 {
		return b
	}
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[5:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// FuzzEntry checks wal.DecodeEntry on arbitrary bytes (with, when fix is
// set, a correct CRC over them):
//
//  1. it never panics, and every failure wraps wal.ErrCorrupt;
//  2. a decoded event re-encodes (EncodeEntry) to canonical bytes that
//     decode to the same event and re-encode to the very same bytes
//     (encode∘decode is the identity on canonical entries);
//  3. an entry whose stored seq differs from the wanted one is refused;
//  4. any single flipped byte of a canonical entry is refused;
//  5. with a good CRC, DecodeEntry (which decodes canonical envelopes
//     without reflection) agrees exactly with events.DecodeEnvelope.
func FuzzEntry(f *testing.F) {
	for _, ev := range walSeedEvents() {
		b, err := wal.EncodeEntry(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b[:len(b)/2], false)
		f.Add(b, true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{0xC1, 0, 0, 0, 0}, true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = fixCRC(b)
		}
		ev, err := wal.DecodeEntry(b, 0)
		// With a good header and CRC, DecodeEntry (which has a fast path
		// of its own) must agree with events.DecodeEnvelope exactly.
		if len(b) >= 5 && b[0] == 0xC1 && binary.BigEndian.Uint32(b[1:5]) == crc32.Checksum(b[5:], crc32.MakeTable(crc32.Castagnoli)) {
			lib, lerr := events.DecodeEnvelope(b[5:])
			if (err == nil) != (lerr == nil) {
				t.Fatalf("DecodeEntry err %v, DecodeEnvelope err %v", err, lerr)
			}
			if err == nil && !reflect.DeepEqual(ev, lib) {
				t.Fatalf("DecodeEntry and DecodeEnvelope differ:\n%#v\n%#v", ev, lib)
			}
		}
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		canon, err := wal.EncodeEntry(ev)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		ev2, err := wal.DecodeEntry(canon, ev.Seq)
		if err != nil {
			t.Fatalf("canonical entry does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalise(ev), normalise(ev2)) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, ev2)
		}
		again, _ := wal.EncodeEntry(ev2)
		if !bytes.Equal(again, canon) {
			t.Fatal("canonical encoding is not stable")
		}
		if _, err := wal.DecodeEntry(canon, ev.Seq+1); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("entry with seq %d accepted at index %d", ev.Seq, ev.Seq+1)
		}
		for i := range canon {
			m := bytes.Clone(canon)
			m[i] ^= 0x5A
			if _, err := wal.DecodeEntry(m, 0); err == nil {
				t.Fatalf("flip of byte %d not detected", i)
			}
		}
	})
}

// FuzzEnvelope checks events.DecodeEnvelope on arbitrary bytes:
//
//  1. it never panics; failures wrap events.ErrMalformed;
//  2. a decoded envelope re-encodes to canonical bytes that decode to the
//     same event and re-encode to the same bytes;
//  3. the WAL's hand-written envelope encoder (inside wal.EncodeEntry)
//     produces exactly the bytes of events.EncodeEnvelope.
func FuzzEnvelope(f *testing.F) {
	for _, ev := range walSeedEvents() {
		b, err := events.EncodeEnvelope(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{0x80})
	f.Add([]byte{0xc0})
	// A field declaring a 1.9 GB bin in 16 bytes: the decoder must not
	// allocate by the declared length (a worker was OOM-killed at 17 GB).
	f.Add([]byte("\x87\xa5000\xac\xca\xc6t\xfd00\x950000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := events.DecodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, events.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		canon, err := events.EncodeEnvelope(ev)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		ev2, err := events.DecodeEnvelope(canon)
		if err != nil {
			// A payload that is not one msgpack value makes an envelope that
			// cannot be read back; the WAL refuses to append such events.
			return
		}
		if !reflect.DeepEqual(normalise(ev), normalise(ev2)) {
			t.Fatalf("round trip changed the envelope:\n%+v\n%+v", ev, ev2)
		}
		again, _ := events.EncodeEnvelope(ev2)
		if !bytes.Equal(again, canon) {
			t.Fatal("canonical envelope encoding is not stable")
		}
		entry, err := wal.EncodeEntry(ev2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(entry[5:], canon) {
			t.Fatalf("wal's envelope encoder differs from events.EncodeEnvelope:\n% x\n% x", entry[5:], canon)
		}
	})
}

// normalise maps empty and nil byte fields to nil: omitempty and msgpack
// nil make them indistinguishable on the wire.
func normalise(ev *events.Event) events.Event {
	c := *ev
	if len(c.Resp) == 0 {
		c.Resp = nil
	}
	if len(c.Data) == 0 {
		c.Data = nil
	}
	return c
}
