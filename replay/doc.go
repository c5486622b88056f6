// Package replay turns the log into the operator's debugging tool: it reads
// a home's log without taking its lock and answers questions about the past.
//
//   - To rebuilds a new home whose views are exactly as they stood right
//     after a given event (or time), with the log prefix copied beside them,
//     so `cmlab serve --read-only` can serve the Lab as of that moment.
//   - Check re-projects the log into a shadow home and compares it with the
//     live views byte for byte; on a difference it names the first diverging
//     sequence, the view file, the byte offset and the event that wrote it.
//     Decode runs the current upcasters over every stored event.
//   - Print filters and renders events; Trace follows one id (request,
//     feedback, run, experiment, block, step) through the log.
//   - WhatIf replays a mandate's step transitions and asks the recovery
//     classifier, after each one, what it would decide had the process died
//     right then.
//   - Demo builds a sample home to practise on.
//
// The source log is never modified. Views are the files under feedback/,
// lab/ (but not lab/exports/), pty/ and steps/ (see ViewFiles).
//
// # Finding the event behind a difference
//
// Views are append-only files (JSONL stores, spools, block outputs), so the
// bytes at offset o of a file were written by the first event after which
// the file is longer than o. Check compares whole files first; only when
// they differ does it re-project once more, one event at a time, watching
// the sizes of the differing files to find that event.
package replay
