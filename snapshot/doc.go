// Package snapshot writes and reads the snapshot file of one in-memory read
// model (issue 16): the model's state encoded with msgpack, the seq of the
// log it covers and that event's id, the model's name and code version,
// and a CRC-32C over all of it. Write is crash-safe (temporary file →
// fsync → rename → fsync of the directory), so a reader sees the old file
// or the new one, never a mix; a failed write (a full disk) leaves the old
// file, and its owner retries at the next checkpoint. Read refuses a file
// that fails its CRC, names another model or another code version
// (ErrInvalid); Check refuses one whose covered seq is not the same event
// in the log (or lies past its end). The caller then rebuilds the model
// from the log, and the daemon logs why. Start = load the snapshot + apply
// the log after its seq (engine.ResumableObserver); FeedTail does the same
// over a wal.Reader for commands without a daemon, checking the covered
// event in the same pass that reads the tail.
//
// # The read-model kit (kit.go)
//
// Every model kept in a snapshot implements Model (Observe, Covered,
// Encode, Decode) and has a Kind (name, schema, how many events a
// snapshot waits for). The kit gives the rest once: the file
// (Kind.File), the one code-version rule (Kind.Version: the schema and
// CodeVersion, the build), the load and check at start (Kind.Load), the
// gated write (Writer; Written for a model a one-shot command writes
// itself) and the attachment to a live engine (Attach: remove
// stale temporary files, load or start empty, subscribe, write at
// checkpoints). The step state, the retention model and the terminal's
// model (package pty) use it (the Lab state lives in a store of its own,
// state/labstore.db, package labapi). The writes go through a
// home.FS passed by value (the engine's Options.FS, Writer.FS): the fault
// and crash tests fail or block a stage of them with internal/faultfs;
// there is no package-level hook.
//
// # The models
//
// Every file is under state/snapshots/ and written at the engine's
// checkpoints (engine.OnCheckpoint) once enough events passed, and at
// close:
//
//	steps.msgpack      the step state (steps.State, loaded by steps.NewJournal)
//	retention.msgpack  the retention/status model (package retention): open steps,
//	                   open terminal blocks, steps awaiting review, the timestamp index
//	pty.msgpack        the terminal's model (package pty): conversations, their
//	                   recent blocks, prompts, inputs and output spans and the
//	                   counts of what was dropped; what the log holds open
//
// The request-id index keeps its covered seq in its own file
// (state/reqindex.db, package reqindex). The compaction's read-models holder
// (package compact) needs the log after the oldest seq any of them covers.
//
// # SSE positions
//
// /api/events keeps no state per client: a client resumes with
// Last-Event-ID (the seq of the last event it saw) and the server reads
// the log after it. There is nothing to snapshot; a client that resumes
// from before the first retained seq of a compacted log is read back
// from the archive, or told the range was removed.
package snapshot
