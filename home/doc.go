// Package home knows the layout of a cmlab home directory (SPEC §2): where
// the log, the views, the state files and the quarantine live, how ids used
// as path components are validated, and the permissions everything gets
// (directories 0700, files 0600).
//
//	wal/                          segments + LOCK
//	state/checkpoint.json         last applied WAL index + byte size of every view file
//	state/daemon.json             pid, listen address, token file of the running daemon
//	state/token                   random bearer token, mode 0600
//	quarantine/                   bytes cut from the log by repair
//	feedback/feedback.jsonl
//	lab/runs.jsonl  lab/experiments.jsonl
//	lab/sessions/<sessionId>/idempotency.jsonl  lab/sessions/<sessionId>/events.jsonl
//	lab/exports/
//	pty/<conversationId>/events.jsonl blocks.jsonl output.spool blocks/<blockId>.out
//	steps/steps.jsonl
//
// The home is chosen by --home, else $CMLAB_HOME, else ~/.cm.
package home
