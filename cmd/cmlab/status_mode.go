package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// gatherMode fills the report's version, read-only state and adoption
// report (issue 28 B8, A1). A running daemon says whether it refuses
// writes (its health); without one, a home made by 'cmlab replay --into'
// is read-only (serve serves it so unless --writable).
func gatherMode(h home.Home, rep *statusReport) {
	rep.Version = versionString()
	switch {
	case rep.Daemon != nil && rep.Health != nil && rep.Health.ReadOnly:
		rep.ReadOnly, rep.ReadOnlyReason = true, "the daemon was started read-only: every write is refused"
	case rep.Daemon != nil && rep.Health != nil:
	default:
		m, err := replayedHome(h)
		var ce *cliError
		switch {
		case err == nil && m != nil:
			rep.ReadOnly = true
			rep.ReadOnlyReason = fmt.Sprintf("a replay of %s up to seq %d ('cmlab serve' serves it read-only unless --writable)", m.From, m.UpToSeq)
		case errors.As(err, &ce):
			rep.ReadOnly = true
			rep.ReadOnlyReason = fmt.Sprintf("a replay whose mark state/replayed.json cannot be read; fix: %s", ce.Fix)
		}
	}
	if a, err := engine.ReadAdoptReport(h); err == nil {
		rep.Adopted = a
	}
}

// printVersionMode prints the version and mode lines of 'cmlab status'.
func printVersionMode(w io.Writer, rep statusReport) {
	v := rep.Version + " (this command)"
	if rep.Daemon != nil {
		v += "; daemon " + rep.Daemon.Version
	}
	fmt.Fprintf(w, "version:     %s\n", v)
	if rep.ReadOnly {
		fmt.Fprintf(w, "mode:        read-only: %s\n", rep.ReadOnlyReason)
	} else {
		fmt.Fprintf(w, "mode:        read-write\n")
	}
}

// printLogBytes prints the log line: bytes written, and the bytes on disk
// when preallocated space (or a torn tail the next open repairs) makes
// the files larger.
func printLogBytes(w io.Writer, rep statusReport) {
	fmt.Fprintf(w, "log:         %d bytes written in %d segment(s)", rep.LogBytes, rep.LogSegments)
	if rep.LogAllocatedBytes > rep.LogBytes {
		fmt.Fprintf(w, " (%d bytes on disk: the rest is space preallocated ahead of the writer)", rep.LogAllocatedBytes)
	}
	fmt.Fprintf(w, ", last seq %d\n", rep.LastSeq)
	if a := rep.Adopted; a != nil {
		fmt.Fprintf(w, "adopted:     %s, at %s\n", a.Summary(), a.At)
	}
}

// writtenSegments is segs with the last one's size cut to the bytes
// written in it (u), for the retention line: the preallocated zeros are
// not retained log.
func writtenSegments(segs []wal.SegmentInfo, u wal.Usage) []wal.SegmentInfo {
	if len(segs) == 0 {
		return segs
	}
	out := append([]wal.SegmentInfo(nil), segs...)
	var before int64
	for _, s := range out[:len(out)-1] {
		before += s.Size
	}
	if w := u.Written - before; w >= 0 && w <= out[len(out)-1].Size {
		out[len(out)-1].Size = w
	}
	return out
}
