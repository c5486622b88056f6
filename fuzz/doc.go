// Package fuzz attacks cmlab the way trusted storage systems attack their
// own code: Go fuzz targets for every decoder and parser (this directory's
// *_fuzz_test.go files, seed corpora under testdata/fuzz/<FuzzName>/), a
// corruption campaign over generated logs, disk faults injected through the
// WAL's file seam, and, in the torture subpackage, a crash loop that
// SIGKILLs a real daemon under mixed load and checks the invariants after
// every restart.
//
// Every target checks a property, not just the absence of a panic:
//
//   - FuzzPayloadRoundTrip: for every registered event type, a payload
//     decoded from arbitrary bytes re-encodes to canonical bytes that decode
//     to the same value (encode∘decode is the identity on canonical bytes),
//     and a generated typed value survives encode then decode unchanged.
//   - FuzzFeedbackCursor / FuzzFeedbackLines: the Lab feedback cursor never
//     passes a partial line, never goes backwards, lands on a line boundary,
//     and paging with any limit returns every valid complete line once.
//   - FuzzPOSTBodies: every POST route answers 200 or a 4xx error envelope,
//     never 5xx or a panic, and a 4xx appends nothing to the log.
//   - FuzzCheckpoint: whatever bytes state/checkpoint.json holds, opening the
//     home either fails with an error or yields views identical to a rebuild.
//
// `go test ./fuzz/...` runs the seeds (fast); `go test ./fuzz -run=^$
// -fuzz=FuzzX -fuzztime=30s` fuzzes one target. docs/torture.md describes
// the long campaigns and keeps the latest figures.
package fuzz
