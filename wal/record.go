package wal

import (
	"encoding/json"
	"hash/crc32"
)

// The log's small JSON records — wal/MANIFEST (manifest.go), an archive's
// ARCHIVE (archive.go), wal/VERIFIED (verify.go) — each carry a "sum": the
// CRC-32C of the record's JSON with sum 0, so that a torn or flipped
// record is told from a sound one. Each is one JSON line.

// summed is a pointer to such a record: sumField is its sum.
type summed[R any] interface {
	*R
	sumField() *uint32
}

// recordSum is the sum of r (a copy: its sum is set to 0 to compute it).
func recordSum[R any, P summed[R]](r R) uint32 {
	*P(&r).sumField() = 0
	b, _ := json.Marshal(&r) // plain data: it always marshals
	return crc32.Checksum(b, castagnoli)
}

// soundRecord reports whether r's sum matches its content.
func soundRecord[R any, P summed[R]](r P) bool { return *r.sumField() == recordSum[R, P](*r) }

// encodeRecord sets r's sum and returns its JSON line.
func encodeRecord[R any, P summed[R]](r P) ([]byte, error) {
	*r.sumField() = recordSum[R, P](*r)
	b, err := json.Marshal(r)
	return append(b, '\n'), err
}
