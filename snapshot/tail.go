package snapshot

import (
	"fmt"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// Tail is what FeedTail read.
type Tail struct {
	// Read counts the events fed.
	Read int
	// Last is the last seq on disk (the covered seq when nothing follows).
	Last uint64
	// Refused says why the snapshot covering seq cannot be resumed on this
	// log ("" when it can): the caller empties its model and calls FeedTail
	// again with seq 0.
	Refused string
}

// FeedTail feeds observe the log of r after seq, the seq a model's
// snapshot covers (0: none; the whole log from first, its first retained
// seq), to the end of what is on disk, without the log's lock. When seq
// is in the retained log, the event there must be id: the same pass that
// reads the tail checks it, so nothing before seq is read.
func FeedTail(r *wal.Reader, first, seq uint64, id string, observe func(*events.Event)) (Tail, error) {
	t := Tail{Last: seq}
	from, check := first, false
	if seq != 0 && seq >= first {
		from, check = seq, true
	}
	for ev, err := range r.Events(from) {
		if err != nil {
			return t, err
		}
		if check {
			check = false
			if ev.Seq != seq || ev.ID != id {
				t.Refused = fmt.Sprintf("%v: covered seq %d is not event %s in this log", ErrInvalid, seq, id)
				return t, nil
			}
			continue
		}
		t.Read++
		t.Last = ev.Seq
		observe(ev)
	}
	if check {
		t.Refused = fmt.Sprintf("%v: covers seq %d, the log ends before it", ErrInvalid, seq)
	}
	return t, nil
}
