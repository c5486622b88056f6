// Package recovery decides, after a crash, what every durable step is:
// already done, safe to retry, in need of a human (SPEC §8, seed 002), or
// still in flight; it builds and applies the recovery plan and runs
// start-up recovery and auto-resume. The steps themselves — journal,
// state, mandates, runner, the step's process, world hashes — are package
// steps'.
//
// # Classifier
//
// Classify is seed 002's IdempotencyCheck.verify, same inputs, priority
// order and evidence reasons (wal_recorded_completion,
// current_state_matches_expected_post, explicitly_marked_needs_review,
// never_reached_executing, current_pre_matches_expected,
// interrupted_during_execution), with one verdict of ours: in_flight
// (evidence process_still_running, naming the pid) when the step's
// recorded process — same pid and start time, this boot — or a process of
// its process group still runs (steps.Process.Running). It ranks right
// after a recorded completion: while the process runs the world may still
// change, so the step is neither done nor safe to retry, whatever its
// status. It does no I/O: callers pass the world hashes computed now (""
// when a step has no world, which makes the verdict rest on the log alone)
// and whether the process runs.
//
// # Recovery
//
// BuildPlan classifies every step and picks an action: an executing step
// becomes completed (recovered: true, with the evidence), reset, or
// needs_review according to its verdict; a pending step whose world already
// shows its expected post is completed; a failed step keeps its recorded
// failure; a step in flight gets nothing until its process is gone (`cmlab
// recover` exits 4 naming the pid; --apply --wait waits). Apply appends the
// decisions, each only while its step is still at the transition it was
// classified at (steps.Journal.RecordAt), and one recovery.applied event,
// and nothing when there is nothing to decide, so a second run is a no-op.
// `cmlab recover` runs it on a home it opens itself or, when a daemon holds
// the log, asks the daemon (GET /api/recovery/plan, POST
// /api/recovery/apply), which leaves alone steps its own runners moved.
//
// OnStart, at every daemon start: classify, close terminal blocks and
// sessions left open (pty.CloseCrashed), then auto-resume (seed 004)
// mandates interrupted less than Lookback (default 2h) ago whose open steps
// are all already_done or safe_to_retry; the rest (a step in flight, in
// review or failed, no recorded spec, too old) wait for the operator, and
// cancelled mandates are skipped. Decisions and reasons are logged in a
// recovery.applied event (auto: true) when they change, and shown by `cmlab
// recover`. The daemon builds its one step journal, calls Start with it
// (the steps routes get the same journal), which decides and records
// synchronously, and runs the returned Resumer in the background under a
// context it cancels and waits for at shutdown (a step killed then is left
// executing for the next start to classify); each resumed mandate's output
// is appended to state/resume/<mandate_id>.log (0600) and its steps' exit
// codes and output digests are logged.
package recovery
