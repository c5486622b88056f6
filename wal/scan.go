package wal

import (
	"os"

	"github.com/cmlab/cmlab/events"
)

// ScanFile reads one segment file on its own — no manifest, no
// neighbouring segment, no lock — and returns every entry from its start
// that passes its checks, stopping at the first frame that does not (or
// at preallocated zeros). It tells which events a copy of a segment holds
// whatever state the log around it is in: the damage matrix
// (fuzz/torture) counts the copies of each acknowledged event with it.
func ScanFile(path string) ([]*events.Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*events.Event
	for p := 0; p < len(data); {
		entry, n, reason := frameAt(data, p)
		if reason != "" || n == 0 || len(entry) == 0 {
			break
		}
		ev, err := DecodeEntry(entry, 0)
		if err != nil {
			break
		}
		out = append(out, ev)
		p += n
	}
	return out, nil
}
