// Package torture is cmlab's crash loop: it starts a real daemon (the cmlab
// binary, `cmlab serve`) on a temporary home bound to 127.0.0.1:0, drives a
// mixed load against it — feedback posts with and without request ids and
// with retries, run imports and re-imports, experiment creates and submits,
// feedback polls that remember their cursors, server-sent-event readers —
// SIGKILLs the daemon at a random moment, restarts it and checks, after
// every restart:
//
//   - every acknowledged write is present exactly once (feedback ids, run
//     ids, experiment submissions and their feedback entries), and a write
//     whose outcome the crash hid is present at most once;
//   - a request id whose answer was lost to the crash, sent again, is
//     answered 200 and acts at most once; a request id that was answered
//     returns the same snapshot and appends nothing;
//   - the views are byte-identical to a rebuild from the log (a copy of
//     wal/ opened as a fresh home);
//   - every feedback cursor handed out before the crash is still valid and
//     never returns an entry that lay before it;
//   - the event stream resumes after Last-Event-ID with no duplicate;
//   - /api/health says ok.
//
// The run is reproducible in its choices from Options.Seed (goroutine timing
// is not), prints a summary table and, on any violation, keeps the home and
// names the seed so the run can be repeated (`cmlab torture --seed N`).
package torture
