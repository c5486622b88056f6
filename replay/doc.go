// Package replay turns the log into the operator's debugging tool. It
// reads a home's log through wal.Reader — without the lock, so a daemon may
// own and append to it meanwhile — and never modifies it.
//
//   - To builds a new home whose views are exactly as they stood right
//     after a given event (or the last event at or before a time), and copies
//     the log up to that event into its wal/ (entries byte for byte), so the
//     replayed home is self-contained: `cmlab serve --read-only` serves the
//     Lab as of that moment.
//   - Check re-projects the log into a shadow home and compares it with the
//     live views byte for byte; on a difference it names the first diverging
//     sequence, the view file, the byte offset and the event that wrote it.
//     Decode runs the current registry and upcasters over every stored event.
//   - Select/Filter, WriteTable, WriteJSON print events; Trace follows one id
//     (request, feedback, run, experiment, block, step, stream) through the
//     log, and for a request id also the ids its response handed out.
//   - WhatIf replays a mandate's step transitions and asks recovery.Classify,
//     after each one, what recovery would decide had the process died right
//     then. The "current" world hashes are those the log had recorded for
//     each step at that point (post_hash once completed, else the observed
//     pre-hash); for a step left executing it also classifies the hypothesis
//     that its side effect landed before the crash.
//   - Demo builds a sample home through a real daemon, for docs/debugging.md.
//
// Views are the files under feedback/, lab/ (but not lab/exports/), pty/
// and steps/ (ViewFiles). The projector is pluggable (ProjectorFactory), so
// tests can check Check against a deliberately wrong projector.
//
// # Finding the event behind a difference
//
// Views are append-only files (JSONL stores, spools, block outputs), so the
// bytes at offset o of a file were written by the first event after which
// the file is longer than o. Check compares whole files first, from a
// buffered shadow projection without fsync; only when they differ does it
// project again, one event at a time with writes flushed at each Apply,
// watching the sizes of the differing files to find that event. Bytes the
// live file holds beyond everything the log produced are reported with seq
// 0: no event accounts for them.
//
// A daemon may append while Check runs. Check projects the log as it stood
// when it started; a live view that grew past its shadow while the log grew
// is not a difference, and a live view that is a strict prefix of its shadow
// (the daemon wrote an entry but has not projected it yet) is compared again
// until it catches up or CheckOptions.LagWait passes.
package replay
