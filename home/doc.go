// Package home knows the layout of a cmlab home directory (SPEC §2): where
// the log, the views, the state files and the quarantine live, how ids used
// as path components are validated, and the permissions everything gets
// (directories 0700, files 0600).
//
//	wal/                          segments + LOCK
//	state/checkpoint.json         last applied WAL index + byte size of every view file (but sealed ones)
//	state/sealed-views.jsonl      size and checksums of each sealed terminal block view
//	state/daemon.json             pid, start time, boot id, listen address, socket and token file of the running daemon
//	state/daemon.lock             locked (fcntl OFD) by the running daemon for its life (package discovery)
//	state/daemon.sock             the running daemon's Unix socket: the CLI's only way to it
//	state/token                   the operator token (64 hex characters), mode 0600
//	state/reqindex.db             the request-id index (package reqindex), rebuilt from the log when damaged
//	quarantine/                   bytes cut from the log by repair
//	feedback/feedback.jsonl
//	lab/runs.jsonl  lab/experiments.jsonl
//	lab/sessions/<sessionId>/idempotency.jsonl  lab/sessions/<sessionId>/events.jsonl
//	lab/exports/
//	pty/<conversationId>/events.jsonl blocks.jsonl output.spool blocks/<blockId>.out
//	steps/steps.jsonl
//
// The home is chosen by --home, else $CMLAB_HOME, else ~/.cm.
//
// state/token holds the operator token, the secret that opens the terminal,
// steps, recovery, /metrics and /mcp (token.go). The daemon refuses to start
// when the home, state/ or state/token is not private to the user it runs
// as (CheckPrivate) or the token carries less than 256 bits; a command run
// by one user in another user's home refuses to write there (CheckOwner).
// The Lab token that GET /api/config hands out is not stored in the home:
// each daemon run draws its own (package labapi).
//
// # Durable writes (durable.go)
//
// Every file replaced whole — the wal's MANIFEST and archived segments,
// the read models' snapshots, checkpoint.json, daemon.json, the token, the
// home id, the ship cursor, exports — is written by one helper,
// WriteDurable: a temporary file beside it, fsync, rename, fsync of the
// directory; Install is its last step for a file another library wrote
// (the request-id index rebuilt by bolt). Both go through an FS, the one
// fault seam (pebble's errorfs idea), passed by value by whoever writes
// (engine.Options.FS, wal.Options.FS, snapshot.Writer.FS); tests fail or
// block a stage of a write with internal/faultfs.
//
// # Large reads (mapped.go)
//
// ReadMapped reads a file in place through a read-only mapping (the last
// log segment for its usage, a terminal home's checkpoint), turning a
// fault of a file cut short beside into an error.
package home
