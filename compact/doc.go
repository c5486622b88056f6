// Package compact decides how much of the log's front may go and has
// wal.Log.Compact remove it (`cmlab compact`, and the daemon's policy
// loop). The log's own crash-safe mechanics — the manifest wal/MANIFEST
// naming the first retained seq, archive copies, pending segments
// finished by the next open — live in package wal (wal/compact.go).
//
// # The oldest seq still needed
//
// A segment may be removed only when every entry in it lies before the
// oldest seq still needed: the minimum over the retention holders.
//
//	checkpoint             state/checkpoint.json's seq + 1: catch-up re-applies the log after it
//	open steps             the first step event of every mandate with a step not completed or
//	                       failed (pending, executing, needs_review): recovery classifies it from
//	                       its transitions (openSteps, the one function that reads step state)
//	open terminal blocks   the pty.block.begin of every block without its pty.block.end: start-up
//	                       recovery closes it (daemon_crashed)
//	auto-resume window     the first event newer than now - 2h: start-up recovery resumes mandates
//	                       interrupted within it
//	read models            one after the oldest seq any read model's snapshot covers: the Lab
//	                       state, the step state, the retention model, the terminal's model
//	                       (state/snapshots/, package snapshot; pty.SnapshotCovers) and the
//	                       request-id index (Options.IndexCovered); 1 when one of them has no
//	                       trusted snapshot or Options.ReadModels is empty (daemon.ReadModels). A restart
//	                       loads each snapshot and applies the log after it. It holds only
//	                       against deletion (ReadsArchive): archived segments stay readable through
//	                       the log (wal reads them back from the archive the manifest names), so
//	                       `cmlab rebuild` and replay --check still see the whole history.
//	ship cursor            state/ship.json's shipped seq + 1 when the home ships to NATS
//	                       JetStream (package ship): events its stream has not acknowledged
//	                       exist nowhere else; held against archiving too (the shipper reads
//	                       the log directory)
//	others                 Options.Holders: anything that reads the log from a position of its
//	                       own adds a RetentionHolder
//
// Holders are evaluated before the removal, and the log only grows
// meanwhile, so each answer can only be too old (keeping more), never too
// new. Step, block and window holders answer from the retention model
// (package retention: the daemon's live one, or its snapshot and the log
// after it, LoadModel), never by reading the log from its start: the
// window's first event is found by reading one run of the model's
// timestamp index. Whatever is open now was open at the previous
// compaction too and was kept by it, so it lies in the retained part.
// ScanLog is the same answer from a scan of the whole retained log.
//
// # Policy
//
// Without a policy everything before the oldest needed seq goes. KeepDays
// keeps every segment holding an event of the last N days; KeepBytes
// removes the oldest segments while the log directory holds more than N
// bytes. Holders win over both: a policy never removes what a holder
// needs. The tail segment is never removed.
//
// # After compaction
//
// Archived (Options.Archive): everything still reads — wal readers follow
// the manifest to the archive, so the daemon's start, `cmlab rebuild`,
// `replay --to/--check`, `trace` and `wal dump` see the whole history; if
// the archive was moved, readers take --archive DIR, and if it is gone
// they fail with wal.ErrCompacted naming the missing range and the fix
// (restore the archive). Deleted: only what every read model's snapshot
// covers goes (the read-models holder), so a restart never needs it.
//
// The archive belongs to one home: Run gives the home an id (state/home-id,
// HomeID) and the log records it in the archive and the manifest (wal
// archive.go); it also copies the home's ship key into the archive
// (ship-key), so that the archive can authenticate a restore from the
// home's stream (package ship).
//
// Loop runs a policy periodically for the daemon (cmlab serve
// --compact-keep-days / --compact-keep-bytes / --compact-archive /
// --compact-every, default hourly), in a goroutine the daemon owns.
package compact
