package wal

import "time"

// AckTiming decomposes the latency of one Append, from its call to the
// moment its goroutine has the answer, into the stages of the pipeline
// (Options.AckTrace). The stages add up to Total.
type AckTiming struct {
	// Encode: validating and encoding the events in the caller's goroutine.
	Encode time.Duration
	// WaitGroup: queued until the committer began sealing the group it
	// joined (the committer finishing earlier groups' writes, collecting).
	WaitGroup time.Duration
	// Seal: patching sequences and CRCs into the group's entries.
	Seal time.Duration
	// Write: the group's tidwall WriteBatch (with any wait for the
	// preallocator and any segment cycle it made).
	Write time.Duration
	// WaitSync: written until the fsync that covers it began (the fsync
	// already running, the syncer's yields to queued appends).
	WaitSync time.Duration
	// Fsync: that fsync (and the directory's when a segment was created).
	Fsync time.Duration
	// Apply: Options.Apply and the answers to earlier appends of the groups.
	Apply time.Duration
	// WakeUp: answered until the caller's goroutine ran again.
	WakeUp time.Duration
	// Total: the call until the answer was received.
	Total time.Duration
	// Group is how many events the fsync covered.
	Group int
}

// monoBase anchors mono, the stamps of AckTiming.
var monoBase = time.Now()

// mono is monotonic time in nanoseconds since monoBase.
func mono() int64 { return int64(time.Since(monoBase)) }

// ackStamps are the moments of one append's way through the pipeline
// (set only when Options.AckTrace is set).
type ackStamps struct {
	call, queued, sealStart, sealed, written, syncStart, synced, answered int64
	group                                                                 int
}

func (s *ackStamps) timing(received int64) AckTiming {
	d := func(a, b int64) time.Duration { return time.Duration(b - a) }
	return AckTiming{
		Encode: d(s.call, s.queued), WaitGroup: d(s.queued, s.sealStart), Seal: d(s.sealStart, s.sealed),
		Write: d(s.sealed, s.written), WaitSync: d(s.written, s.syncStart), Fsync: d(s.syncStart, s.synced),
		Apply: d(s.synced, s.answered), WakeUp: d(s.answered, received), Total: d(s.call, received), Group: s.group,
	}
}
