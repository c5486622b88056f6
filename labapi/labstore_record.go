package labapi

import (
	"encoding/binary"
	"fmt"

	"github.com/cmlab/cmlab/events"
)

// A record's value in runIdx and expIdx (format cmlab-labstore-2), after
// the CRC every value starts with (lsPut):
//
//	+-------+------------------+--------------------------------+
//	| fill  | ts (8 bytes, BE) | the record (msgpack)           |
//	+-------+------------------+--------------------------------+
//
// The record is, for an event of the current version, the bytes of the
// run or experiment inside the event's payload, copied as they are (found
// by events.MapValue): the build neither encodes a record nor keeps a
// decoded one. The timestamps a producer left empty are filled when the
// record is read, as labOpOf fills them from the event: createdAt
// (lsFillCreated) and updatedAt (lsFillUpdated) from ts, the event's
// unix milliseconds. A record the store encodes itself (an adopted line,
// an older payload version) is stored filled, fill 0.
const (
	lsFillCreated = 1 << iota // createdAt, when empty, is ts
	lsFillUpdated             // updatedAt, when empty, is ts

	lsRecordHead = 9 // fill and ts
)

// decodeRecord reads a record's value (without its CRC) into rec, an
// *events.LabRun or *events.LabExperiment, and fills its timestamps.
func decodeRecord(v []byte, rec any) error {
	if len(v) < lsRecordHead || v[0]&^(lsFillCreated|lsFillUpdated) != 0 {
		return fmt.Errorf("record head % x", v[:min(len(v), lsRecordHead)])
	}
	fill, ts := v[0], int64(binary.BigEndian.Uint64(v[1:lsRecordHead]))
	var created, updated *string
	switch r := rec.(type) {
	case *events.LabRun:
		created = &r.CreatedAt
	case *events.LabExperiment:
		created, updated = &r.CreatedAt, &r.UpdatedAt
	default:
		return fmt.Errorf("no record of type %T", rec)
	}
	if err := events.Unmarshal(v[lsRecordHead:], rec); err != nil {
		return err
	}
	if fill&lsFillCreated != 0 && *created == "" {
		*created = events.FormatISO(ts)
	}
	if fill&lsFillUpdated != 0 && updated != nil && *updated == "" {
		*updated = events.FormatISO(ts)
	}
	return nil
}
