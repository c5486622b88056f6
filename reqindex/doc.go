// Package reqindex is the request-id index of a home (SPEC §6): for every
// request id that a committed event carries, the body hash and the response
// snapshot a retry gets back. It lives on disk (state/reqindex.db, a bbolt
// file), not in the heap, because the answers must survive forever while
// the number of ids grows without bound.
//
// The index is a projection of the log. It records the seq it covers (and
// that event's id) in the same bbolt transaction as the entries, so it may
// lag the log but never claims an event it does not hold. Open trusts the
// file only if bbolt opens it, its format key matches Format, its pages pass
// bbolt's consistency check, every entry passes its CRC, and the covered seq names an event the log still
// holds with the same id; otherwise the file is removed and the index is
// rebuilt from the log. Then the events after the covered seq are applied
// straight to disk in batches.
//
// With Options.VerifyAfterOpen (the daemon) Open's cost does not grow with
// the ids: it checks the format and the covered seq only, and a goroutine
// runs the page check and every entry's CRC once Open has returned. Until
// it passes nothing is written to the file (ids stay pending; Observe waits
// past MaxPending), so bbolt never writes over a damaged page. If it fails,
// the index is rebuilt from the log into state/reqindex.db.rebuild while
// Lookup keeps answering from the old file (an entry failing its CRC is an
// error, "do not act"), then swapped in by rename; Rebuilt says why. A
// compacted log cannot rebuild it: the old file is kept and Verified
// reports the error.
//
// Live events arrive through Observe (an engine observer, called in the
// committer before the appender is acknowledged). They go into a small
// pending map that a flusher goroutine writes to disk, one fsynced
// transaction per flush, every FlushInterval or FlushAt entries; past
// MaxPending, Observe waits for the flusher (back-pressure on the
// committer). Lookup sees pending, flushing and stored entries alike, so an
// acknowledged request is deduplicated at once; after a crash the entries
// not yet flushed are read back from the log at the next Open.
//
// The package also holds what the home's other derived bbolt file, the
// Lab store (package labapi), shares with the index: DerivedFile (the
// open that trusts a file or makes it new, the catch-up from the log and
// the rebuild beside a serving file, each file giving its own batch of
// changes), Live (the pending and flushing
// batches, the flusher and its back-pressure, the check after open, the
// rebuild swapped in while the old file serves, and Close's order; each
// file giving how a batch is written, how a rebuilt file replaces the
// open one and how it is closed), OpenFile, CheckFile, CheckShape,
// FaultsPanic and TrimMapped.
package reqindex
