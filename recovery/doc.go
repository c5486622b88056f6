// Package recovery decides, after a crash, what every durable step is:
// already done, safe to retry, or in need of a human (SPEC §8, seed 002),
// and runs mandates through the durable step transitions so that a killed
// run can be recovered and resumed.
//
// # Steps
//
// A mandate commits a plan (step.planned: per step step_id, tool,
// params_hash, pre_hash, expected_post_hash, idem_key, world, dir); each
// step then moves
//
//	pending → executing (observed_pre_hash) → completed (post_hash, result_hash)
//	                                        | failed (error_class, error_msg ≤ 500 chars)
//	                                        | needs_review (reason, evidence)
//
// and recovery may reset executing → pending (step.reset, same idem_key).
// State is rebuilt from the transitions (State, an engine observer):
// fields are set, never cleared — an observed_pre_hash survives a reset —
// and a transition for a step or mandate no plan names is kept under an
// orphan step or mandate, never dropped. Journal is the one writer of step
// events in a process: it checks each transition against that state
// (CheckTransition) and appends it, carrying the request id of an HTTP
// caller in the same event.
//
// # Classifier
//
// Classify is seed 002's IdempotencyCheck.verify, same inputs, priority
// order and evidence reasons (wal_recorded_completion,
// current_state_matches_expected_post, explicitly_marked_needs_review,
// never_reached_executing, current_pre_matches_expected,
// interrupted_during_execution). It does no I/O: callers pass the world
// hashes computed now ("" when a step has no world, which makes the
// verdict rest on the log alone).
//
// # World hashes
//
// "sha256-" + hex over a canonical listing of the step's world paths (see
// world.go): name, kind, size, content digest per entry, sorted; missing
// paths listed as missing; symlinks listed by target, never followed.
//
// # Mandates and the runner
//
// ParseMandate reads a `cmlab run` file (mandate.go documents it). Runner
// plans it once (pre hashes = the worlds at plan time, expected post from
// expect_post), then for each step not completed: world hash → executing
// → run argv in cwd with the env allow-list plus CMLAB_MANDATE_ID,
// CMLAB_STEP_ID, CMLAB_IDEM_KEY → world hash → completed (result hash over
// exit code and output digest) or failed. A completed step is never run
// again: its recorded result is read from the log. The plan records the
// mandate file (spec) and each step's absolute dir, so the daemon can
// resume it. Worlds of the steps of one mandate should be disjoint: a
// step's pre_hash is its world at plan time.
//
// # Recovery
//
// BuildPlan classifies every step and picks an action: an executing step
// becomes completed (recovered: true, with the evidence), reset, or
// needs_review according to its verdict; a pending step whose world
// already shows its expected post is completed; a failed step keeps its
// recorded failure. Apply appends the decisions and one recovery.applied
// event, and nothing when there is nothing to decide, so a second run is a
// no-op. `cmlab recover` runs it on a home it opens itself or, when a
// daemon holds the log, asks the daemon (GET /api/recovery/plan, POST
// /api/recovery/apply), which leaves alone steps its own runners moved.
//
// OnStart, at every daemon start: classify, close terminal blocks and
// sessions left open (pty.CloseCrashed), then auto-resume (seed 004)
// mandates interrupted less than Lookback (default 2h) ago whose open
// steps are all already_done or safe_to_retry; the rest wait for the
// operator. Decisions and reasons are logged in a recovery.applied event
// (auto: true) when they change, and shown by `cmlab recover`. The daemon
// calls Start, which decides and records synchronously, and runs the
// returned Resumer in the background under a context it cancels and waits
// for at shutdown (a step killed then is left executing for the next start
// to classify); each resumed mandate's output is appended to
// state/resume/<mandate_id>.log (0600) and its steps' exit codes and output
// digests are logged.
package recovery
