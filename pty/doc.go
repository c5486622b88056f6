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
// (back-pressure only past 16 MiB queued, which blocks the program, never
// a client). The appender goroutine turns what was queued while its
// previous append was in flight — at most 4 MiB of output per append, so
// a flood is group-committed in chunks of that size — into one
// engine.Append (one fsync):
// pty.output {block_id, spool_offset, data} (≤ 256 KiB each), and for a
// prompt mark pty.prompt {line, spool_offset} — the canonical line
// "__FWS_PROMPT__ ts=<ms> cwd_b64=<base64> exit=<rc>\n", preceded by "\n"
// when the spool does not end with one — followed, in the same append, by
// the pty.block.end of the block it closes. The projector writes the data
// and lines at their offsets into pty/<conversationId>/output.spool, before
// the engine feeds observers the commit; cursors are byte offsets into
// exactly that file and a reader sees a byte only after it is durable.
//
// # What a crash may lose
//
// Terminal output is acknowledged when a reader can see it: read_spool,
// wait_for, block output and follow serve only committed (fsynced) bytes.
// A daemon killed at any moment loses only output never acknowledged:
// what the program had written into the pty but the daemon had not yet
// committed — the kernel's pty buffer, the reader's queue (at most 16 MiB)
// and the append in flight (at most 4 MiB of output). After the restart
// the spool is exactly the log's pty.output, pty.prompt and pty.truncated
// events of the conversation, in order, offsets contiguous from 0, and
// every acknowledged byte is in it (TestFloodSIGKILL); the block that was
// running is closed failed, daemon_crashed. Output of a program still
// running when the daemon died goes nowhere: its terminal is gone.
//
// # Memory: the spool is read from its file
//
// The file is the only copy of the output the daemon keeps (the log holds
// it too, as events). The manager's read model (state.go) keeps, per
// conversation, the spool's size, its last byte, the recent blocks,
// prompts, inputs and the output spans of each block, and the last
// TailBuffer (1 MiB) bytes of the spool — at most twice that between
// trims. Recent: past Options.HistoryBlocks (100) closed blocks, a
// conversation holding twice as many drops the oldest, with the prompts
// and inputs before the first block kept, and only counts them; a
// question about them is answered from the conversation's events view
// (pty/<c>/events.jsonl) read back, with the answer the whole model gave
// (history.go), and checked against CRC-32C sums the model keeps of what
// it dropped, per drop of ~100 blocks: a read of one dropped block or a
// page of the block list decodes and checks only the drops that hold it,
// found by their seqs (history_drops.go). read_spool, block output,
// search, and the part of a wait older than the tail are served by offset
// from output.spool (pread), opened beneath the home through package
// confine (no symlink followed, a regular file only), with no lock held:
// a slow disk never stalls the committer. A file that cannot give the
// bytes the log accounts for (the views lag the log, or it was removed) is
// ErrSpoolUnavailable, never a short answer.
//
// A wait is woken by each commit and scans from where it left off:
//
//   - substring: exact over any range; the file is read in 1 MiB chunks
//     overlapping by len(match)-1, so a match across a chunk or across the
//     tail's start is found; a range already scanned is not scanned again;
//   - regex: the range is streamed (regexp.FindReaderIndex over the file,
//     then the tail); it is never loaded whole. A regex match may be of any
//     length, so after a scan without a match the next one starts at most
//     TailBuffer bytes before the end scanned: a match that begins more than
//     TailBuffer bytes before the end of the output committed at one wake-up
//     and is not complete by then is not found (a match that straddles the
//     tail and is complete when scanned is found);
//   - prompt: from the prompt records, which are kept in memory.
//
// A search hit's line is cut to 16 KiB each side of the match.
//
// # Output caps
//
// Options.BlockOutputCap (default 64 MiB, 'cmlab serve --pty-block-cap')
// bounds the output stored for one block, Options.ConversationOutputCap
// (default 1 GiB, --pty-conversation-cap) a conversation's spool,
// Options.TotalOutputCap (default 4 GiB, --pty-total-cap) the spools of
// all conversations together (scope "total"; its marker names the flag).
// Past a
// cap the program keeps running and its output is still read (the pty
// never blocks it), but the appender drops it: when the cap is crossed it
// appends pty.truncated {block_id, spool_offset, line, dropped, limit,
// scope} whose line, a visible marker ("[cmlab: output truncated at the
// block cap of N bytes; …]"), the projector writes into the spool and the
// block's output like a prompt line; the bytes dropped after it are
// counted and, before the block's END, a last pty.truncated with the count
// and a second marker is appended. The END's dropped_bytes is the block's
// total (the sum of its pty.truncated dropped). Prompt lines and markers
// are always written. status shows both caps, the bytes dropped in the
// conversation and, for the running block, its size and drops. A daemon
// killed while a block drops output loses the count of bytes dropped
// since the first marker (never stored, so nothing else is lost).
//
// # Snapshot
//
// The read model (everything above but the tail: its recent past and the
// counts of what it dropped, so its size does not grow with the history) is written to
// state/snapshots/pty.msgpack (SnapshotFile; a model of the read-model
// kit, snapshot.Attach: msgpack, CRC-32C, tmp → fsync → rename → dir
// fsync, the kit's code-version rule) at engine checkpoints once
// 10,000 events have passed since the last one, and at close. It names the
// seq it covers and that event's id (SnapshotCovers reads the seq without
// loading the model). At start the manager loads it if its CRC, model,
// code version and event id agree with the log, and is fed only the log
// after that seq (engine.ResumableObserver); a refused snapshot is logged
// ("terminal snapshot ignored") and the model rebuilt from the whole log.
// The blocks a crash left open are closed from the model (CloseCrashed
// reads the snapshot and the log after it the same way), so a start never
// reads the log before the snapshot's seq. After a snapshot load the tail
// is empty: the first reads come from the file.
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
// # Agents (issue 25)
//
// Every call that starts or feeds a block answers resume_cursor, the spool
// size before its input (exec_block, exec_interactive, send, interrupt;
// expect_send keeps the match's end, which precedes its input); status
// says input_cursor, the same for the last input. A prompt wait never
// matches a prompt older than the latest block's BEGIN, whatever its
// from_cursor: a wait from 0 on a running block waits for that block.
// ExecWait / AwaitBlock (run.go) answer when a block ended: status, exit
// code, its clean output (bounded) and the cursor after its prompt. A
// wait or read on a conversation with no terminal history is NotFound at
// once. A block given a cwd runs there and gives the shell's directory
// back after it (commandLine).
//
// The clean view (clean.go) is what a reader gets unless it asks raw:
// sentinel lines (by the prompt records' offsets) and an echoed exec line
// (by the exec's pty.input) are hidden, what send, expect_send and
// interrupt typed is shown where it was typed (input.go records every
// pty.input with the spool size when it committed). The spool and the
// cursors are unchanged: a clean answer's cursors are spool offsets.
// CleanText and TypedText serve renderers without a read model;
// WriteAsciicastClean writes what the terminal looked like.
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
package pty
