// Package steps owns the durable steps of SPEC §8: the step journal (the
// one writer of step events in a process), the step state rebuilt from the
// log, mandate files, the runner that executes a mandate's commands through
// the transitions, the step's process (started at a gate, named in the log,
// dying with its runner) and world hashing. Package recovery decides about
// steps after a crash (classifier, plan, start-up recovery) on top of it.
//
// # Steps
//
// A mandate commits a plan (step.planned: per step step_id, tool,
// params_hash, pre_hash, expected_post_hash, idem_key, world, dir); each
// step then moves
//
//	pending → executing (observed_pre_hash, pid, pid_start, boot_id)
//	        → completed (post_hash, result_hash)
//	        | failed (error_class, error_msg ≤ 500 chars)
//	        | needs_review (reason, evidence)
//
// and recovery may reset executing → pending (step.reset, same idem_key).
// mandate.cancelled (`cmlab run cancel`) cancels a mandate: no step of it
// takes executing again, and start-up auto-resume skips it. State is
// rebuilt from the transitions (State, an engine observer): fields are
// set, never cleared — an observed_pre_hash survives a reset, so does the
// last recorded process — and a transition for a step or mandate no plan
// names is kept under an orphan step or mandate, never dropped.
//
// # One journal
//
// Journal checks each transition against that state (CheckTransition) and
// appends it under one lock, so a check and its append never interleave
// with another transition's; it carries the request id of an HTTP caller
// in the same event. A daemon builds exactly one, where it is wired
// (daemon.Run, `cmlab mcp`), and hands it to start-up recovery (and
// its auto-resume runners) and to the steps routes: two journals over one
// engine would each check against their own view and could both accept a
// move from the same state. RecordAt appends a decision only while its step
// is still at the transition it was decided on (ErrStale otherwise):
// recovery applies its plans that way.
//
// # A step's process
//
// The runner never lets a step act unrecorded, and a killed runner never
// leaves a step acting:
//
//  1. The world hash before (observed_pre_hash).
//  2. The step's process is started at a gate: /bin/sh running a
//     three-command script (launch.go) that reads one line from a pipe on
//     fd 3 and then execs the step's argv — same pid, same start time. It
//     leads its own process group (Setpgid) and has Pdeathsig SIGKILL.
//     Linux sends that signal when the thread that forked the child ends,
//     so the runner's goroutine is locked to its OS thread
//     (runtime.LockOSThread) from before the start until the process has
//     been waited for: a locked thread is neither reused nor ended while
//     its goroutine runs, so the signal fires only when the runner dies.
//  3. step.executing is recorded with the process: pid, pid_start (field
//     22 of /proc/PID/stat, clock ticks after boot: a reused pid has
//     another) and boot_id (/proc/sys/kernel/random/boot_id), and with the
//     runner's own pid and start time (runner_pid, runner_start): a daemon
//     treats a step its client's runner left executing as that runner's
//     only while the runner lives.
//  4. Only once that append is acknowledged (fsynced) does the runner
//     write the line that opens the gate. A runner killed before that
//     leaves a process that dies at its gate without acting: by Pdeathsig,
//     and in any case the pipe reaches end of file and the script exits
//     125.
//  5. Wait. The step's process group is killed on every way out of the
//     runner (completion, failure, cancellation), so nothing the step
//     forked outlives it; Pdeathsig covers the runner's own death for the
//     step's process, but not for what that process forked.
//
// Process.Running tells recovery whether a recorded step still runs: the
// pid with the recorded start time in this boot, not a zombie, or — once
// the leader is gone — any live process left in its process group (a pid
// is not reused while it names a live group, so a reused pid proves the
// group empty). The classifier answers in_flight then, never
// safe_to_retry, and the runner refuses to start a step beside a process
// of an earlier attempt (ErrInFlight). A process that leaves its group on
// purpose (setsid, a daemon) escapes this, as it escapes any kill of the
// group.
//
// Cancellation: a runner whose context ends with cause ErrCancelled (Ctrl+C
// or SIGTERM on `cmlab run`) kills the step's group, waits for it and
// records step.failed with error_class "cancelled". Any other end of the
// context (daemon shutdown) kills the step and leaves it executing for the
// next start to classify.
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
// expect_post), then for each step not completed runs the sequence above
// with the env allow-list plus CMLAB_MANDATE_ID, CMLAB_STEP_ID,
// CMLAB_IDEM_KEY, then hashes the world after and records completed (result
// hash over exit code and output digest) or failed. A completed step is
// never run again: its recorded result is read from the log. The plan
// records the mandate file (spec) and each step's absolute dir, so the
// daemon can resume it. Worlds of the steps of one mandate should be
// disjoint: a step's pre_hash is its world at plan time.
package steps
