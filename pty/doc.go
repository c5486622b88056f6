// Package pty is the agent terminal of seed 001: one bash per conversation
// under a pseudo-terminal (github.com/creack/pty), blocks, the spool and
// its byte-offset cursors, wait_for / wait_prompt / expect_send and
// interactive sessions — every output byte going through the log.
//
// # The shell
//
// bash --noediting --noprofile --rcfile <ours> -i, in its own session with
// the pty as controlling terminal, a fixed 200×50 window, TERM=dumb, echo
// and ONLCR off (so typed commands never reach the spool). The rc file
// (written 0600 into a private temporary directory and deleted once the
// first prompt is seen) installs, last:
//
//   - PROMPT_COMMAND=__fws_prompt, whose first statement captures $? and
//     which prints the raw prompt mark (exit code, ts in ms, cwd);
//   - PS0, printed after a command line is read: the raw BEGIN mark.
//
// The raw marks (parser.go) carry a 128-bit nonce held in shell variables
// that are never exported: a child process cannot print a valid mark, and
// a mark with a wrong nonce, or the canonical sentinel text printed by a
// program, is ordinary output. The parser strips valid marks from the
// stream wherever reads split them and normalises "\r\n" and a lone "\r"
// to "\n".
//
// A command is typed as one line, eval $'<quoted>', so a multi-line
// command yields one BEGIN mark and one prompt.
//
// # Events and the spool
//
// The reader goroutine never waits for the log: it queues parsed items
// (back-pressure only past 32 MiB queued, which blocks the program, never
// a client). The appender goroutine turns everything queued while its
// previous append was in flight into one engine.Append (one fsync):
// pty.output {block_id, spool_offset, data} (≤ 256 KiB each), and for a
// prompt mark pty.prompt {line, spool_offset} — the canonical line
// "__FWS_PROMPT__ ts=<ms> cwd_b64=<base64> exit=<rc>\n", preceded by "\n"
// when the spool does not end with one — followed, in the same append, by
// the pty.block.end of the block it closes. The projector writes the data
// and lines at their offsets into pty/<conversationId>/output.spool; the
// manager keeps the same bytes in memory, fed by the engine observer, so
// cursors are byte offsets into exactly that file and a reader sees a byte
// only after it is durable.
//
// # Blocks and modes
//
// exec_block / exec_interactive append pty.block.begin (with the request
// id, body hash and response snapshot) and pty.input in one append BEFORE
// the line is typed: a retried request finds the snapshot and types
// nothing, also after a restart. send and expect_send record pty.input
// the same way. Modes (idle, block_running, interactive) are derived from
// the log only: a block is open from its BEGIN to its END. Every block gets
// exactly one END: at the prompt that follows its BEGIN mark (status
// completed, or failed for a non-zero exit in block mode; cancelled after
// end_session's Ctrl+C), when the shell dies (failed, reason
// shell_exited/eio), when it is torn down (cancelled, reason
// reset/shutdown), or at the next daemon start (failed, daemon_crashed:
// CloseCrashed). Because the prompt and its END commit together, a prompt
// match already sees the session finalised (seed §4.4, §3.8).
//
// # Locking
//
// A per-conversation lock (a one-slot channel, so waits honour contexts)
// serialises exec, send, expect_send, end_session and reset (seed §6).
// stateMu guards the log-derived state and is never held across an append
// (the observer takes it inside the committer).
//
// # Processes
//
// Input (commands, send, ^C) is written by one writer goroutine per shell,
// in order, so a program that never reads its terminal cannot block a
// request or the per-PTY lock. At most Options.MaxShells shells run at
// once (slots.go): a slot is freed when its shell ends — end_session ends
// the running block and then the shell; the shell's own exit; or the idle
// reaper, which ends the shell of a conversation idle (no block or session,
// no input or output) for Options.IdleTimeout. reset replaces a shell in
// its slot. Interrupt types ^C for the running block and returns (the
// block ends cancelled, reason interrupted, when the prompt comes back).
//
// # Cursors
//
// A wait given FromEnd (the bridge's meaning of an omitted from_cursor)
// scans from the spool's end when it arrives, never old output.
// FollowBlockOutput waits, woken by commits, for a block's output past an
// offset or its END, so a client streams a block without polling. Interrupts are typed as ^C so the line discipline signals the
// foreground process group. Teardown SIGKILLs every process whose session
// id is the shell's (read from /proc), reaps bash, and closes the master.
// A shell whose children keep the pty open after it exits is detected by
// its waiter, which kills the leftovers.
//
// Known limit: the in-memory spool holds a conversation's whole history.
package pty
