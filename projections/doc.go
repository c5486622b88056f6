// Package projections builds the views clients read — JSONL stores, spool
// files, idempotency maps — as pure functions of log events (SPEC §4), keeps
// them in step with the log across crashes (checkpoints and catch-up), takes
// in lines that legacy programs append to the feedback store, and rebuilds
// everything from the log (Rebuild, Compare: `cmlab rebuild`).
//
// # Views
//
// Every view is append-only. Paths are home-relative; <sessionId>,
// <conversationId> and <blockId> are ids that pass home.ValidateID.
//
//	feedback/feedback.jsonl      one FeedbackEntry per line (seed 003 field names, exactly
//	                             as events.FeedbackEntry; createdAt = the event's ts when empty):
//	                             feedback.submitted → 1 line; experiment.submitted → one line
//	                             per entry (before its experiment record); feedback.ingested →
//	                             Raw + "\n" (a legacy writer's line, byte for byte)
//	lab/runs.jsonl               run.imported → the LabRun (createdAt filled from ts when empty)
//	lab/experiments.jsonl        experiment.created/submitted/updated → the full LabExperiment;
//	                             the last record per experimentId wins; createdAt, and on
//	                             submitted/updated updatedAt, filled from ts when empty
//	lab/sessions/<s>/events.jsonl       one SessionEventLine per Lab event (lab.*, feedback.*,
//	                             run.*, experiment.*, idempotency.recorded) whose stream is the
//	                             Lab session <s> ("lab_…"): {seq,id,type,createdAt,requestId?,data};
//	                             data is the payload with its records as projected (createdAt
//	                             filled), e.g. {"entry":{…}} for feedback.submitted
//	lab/sessions/<s>/idempotency.jsonl  one IdempotencyLine {requestId,type,entityId,createdAt,
//	                             response} for every event carrying a request id (req) whose
//	                             stream is the Lab session <s>. type: "feedback", "submit",
//	                             "import", "experiment", "experiment.update", the Kind of an
//	                             idempotency.recorded, else the event type. Requests on other
//	                             streams (terminal conversations, mandates) are not written to
//	                             any session's map: their dedupe is rebuilt from the log (labapi)
//	                             and they appear with request_id in pty/<c>/events.jsonl.
//	steps/steps.jsonl            one StepRecord per step transition {seq,at,event,mandate_id,
//	                             step_id,status,…the transition's own fields}; step.planned gives
//	                             one record per planned step (status pending), step.reset one
//	                             with status pending. The last record per (mandate_id, step_id)
//	                             holds the current status; earlier records hold the plan's and
//	                             earlier transitions' fields (no state is merged, so each record
//	                             depends on its event alone).
//	pty/<c>/output.spool         the concatenation, in log order, of every pty.output Data, every
//	                             pty.prompt Line and every pty.truncated Line (the marker of
//	                             output dropped past a cap) of conversation <c> (the event's stream)
//	pty/<c>/blocks/<b>.out       the concatenation of the pty.output Data and pty.truncated Line
//	                             with block_id <b>
//	pty/<c>/blocks.jsonl         the Block record of every pty.block.begin and pty.block.end;
//	                             the last line per block_id wins
//	pty/<c>/events.jsonl         the agent_block_* stream: one PtyEventLine per pty event
//	                             (agent_session_started, agent_block_begin, agent_block_delta,
//	                             agent_block_end, agent_prompt, agent_input, agent_session_reset,
//	                             agent_session_ended, agent_output_truncated: spool_offset, len,
//	                             line, dropped and reason = the cap's scope). A delta carries block_id, spool_offset and
//	                             len, never the output bytes (they are in the spool); input data
//	                             is included.
//
// The spool offsets inside pty.output and pty.prompt are the producer's
// claim; the projector appends and does not seek to them, so the spool is
// always exactly the concatenation above.
//
// Purity: a line depends on its event only (ts, never the clock; encoders
// are deterministic). An event whose payload cannot be decoded (unknown
// version, malformed) projects nothing anywhere, in every projection alike
// (Rebuild reports the count). An event whose id cannot be a path component
// skips the views that need that path and keeps going: a conversation id
// that fails ValidateID writes no pty view; a block id that fails writes
// no blocks/<b>.out (the spool still gets the bytes); a Lab stream that is
// not a valid "lab_…" id writes no session view (feedback, runs and
// experiments still get their lines). Nothing is ever written outside the
// home.
//
// # Writing
//
// View files stay open (at most Options.MaxOpenFiles, default 256; beyond
// that all are flushed, fsynced if not yet covered by a checkpoint, and
// closed) with 64 KiB buffered writers. Apply hands every byte to the
// kernel (write(2)) before it returns, so a client reads its own write as
// soon as the append is acknowledged; fsync happens only at checkpoints.
//
// # Checkpoint
//
// state/checkpoint.json: {"version":2,"seq":N,"views":{"<view>":size,…},
// "tails":{"<view>":crc,…},"crcs":{"<view>":crc,…},"sum":crc}
// (checkpoint.go). tails holds each non-empty view's CRC-32C over its last
// TailBytes before size, read back at checkpoint time for views whose size
// changed and carried over for the others; crcs the CRC-32C of all its
// bytes before size, carried along as the projector writes (read back
// only after an insertion); sum covers the rest. Version 2 files without
// crcs (written before they existed) get the tail check only; version 1
// files (no tails, no sum) only the line-boundary check of step 2.
// Version 3 adds "sealed":{count,size,tail,crc}, the record of
// state/sealed-views.jsonl: the output views of terminal blocks that ended
// (or went quiet for Options.SealAfter events) leave "views" for that
// append-only file at a checkpoint, so neither the checkpoint nor Open
// grows with the number of blocks (sealed.go); a checkpoint with nothing
// sealed is still written as version 2.
// The engine checkpoints every 1000 applied events or 1 s after the first
// event not covered (engine.DefaultCheckpointEvery/Interval), on Close, and
// after catch-up. Order: flush, fsync every view written since the last
// checkpoint, fsync the directories of files created since then, then
// replace the checkpoint atomically (tmp, fsync, rename, fsync dir).
//
// # Catch-up (Open, then the engine applies the log from ReplayFrom)
//
//  1. No readable checkpoint: every view is rebuilt from seq 1.
//  2. For each view in the checkpoint: longer than its size → cut back to
//     it (feedback.jsonl excepted, see below); exactly its size → intact;
//     shorter or missing → emptied and rebuilt. A view whose bytes before
//     its size do not match its tail checksum or its whole-view CRC, or a
//     JSONL view whose size does not end a line, is rebuilt like a missing
//     one; a checkpoint whose sum does not match is treated as unreadable
//     (step 1). feedback.jsonl is never rebuilt this way: when it is not
//     vouched for (short, a checksum differs, no readable checkpoint) and
//     not empty, FeedbackDamaged says so and the engine regenerates
//     (below, "Regenerate").
//  3. All intact: apply the events after the checkpoint's seq. Otherwise
//     apply from seq 1, but writes of events up to the checkpoint's seq go
//     only to the views being rebuilt (intact ones already hold them).
//  4. A view file that the checkpoint does not list is new since it: its
//     old bytes are cut when the projector first opens it.
//  5. A checkpoint whose seq is past the end of the log (a log cut by
//     salvage) is ignored: every view is rebuilt.
//
// # Legacy writers (feedback/feedback.jsonl)
//
// The legacy feedback protocol, drawn once (the code: feedback_legacy.go
// here, engine/feedback_legacy.go in the engine):
//
//	another program            engine (under its feedback mutex)          projector
//	---------------            ---------------------------------          ---------
//	appends "{...}\n" past E ─► ForeignFeedback: complete lines past E
//	                           ClassifyForeign: JSON object, id not held?
//	                             no ─► SetAsideForeign ─► quarantine/, cut from the file
//	                             yes ─► feedback.ingested{Raw, Offset} events,
//	                                    ahead of ours in one commit group
//	POST /api/feedback ──────► Append: feedback.submitted (fsynced) ──► Apply: writeFeedback
//	                                                                      at E: E += line
//	                                                                      own torn bytes: completed
//	                                                                      foreign bytes: adopted in
//	                                                                      place (TakeAdopted) ─┐
//	                           feedback.ingested for the adopted ◄───────────────────────────┘
//	unfinished last line ────► wait FeedbackWait, then ErrFeedbackBusy (nothing appended)
//
// where E is the end of feedback.jsonl the log accounts for. The rules:
//
// Other programs may append lines to feedback.jsonl. The projector knows the
// end that the log accounts for (E, the checkpointed size, advanced by each
// line it projects) and never cuts the file. Of the complete lines past E,
// only those that are JSON objects whose id (when they have one) the log
// does not hold are ingested (ClassifyForeign); the engine moves the
// others to quarantine/ and out of the file (SetAsideForeign). During a
// catch-up (StrictForeign) a corrupt or held-id line met where the
// projector's own line belongs is damage, not a foreign line: Apply fails
// with ErrFeedbackDamaged and the engine regenerates. Outside a rebuild, each line L
// it projects goes through this check:
//
//   - The file is no longer than E: L is written at E.
//   - Bytes follow E and start with L (all of L, or a prefix of L running to
//     the end of the file): they are the projector's own output from before
//     a crash (possibly torn); they are kept and any missing tail of L is
//     written after them. Nothing is written twice.
//   - Other bytes follow E: foreign. If they end with '\n', they are kept
//     where they are, their lines reported (TakeAdopted) and the engine
//     appends them as feedback.ingested events right after the commit; L is
//     written after them. If they end with an unfinished line, Apply fails
//     with ErrFeedbackPartial (such a line may be neither moved nor written
//     after).
//
// The engine makes the last two foreign cases rare: before every append
// that writes feedback (feedback.submitted, experiment.submitted,
// feedback.ingested) it reads the file past E under a mutex; complete
// foreign lines become feedback.ingested events (Raw = the line without its
// '\n', Offset = where it starts) placed in the same commit group ahead of
// the new events; an unfinished last line is waited for (engine
// FeedbackWait, default 2 s) and the append fails with ErrFeedbackBusy if
// it does not end in time. At open, after catch-up, the engine ingests the
// complete lines appended while it was down; an unfinished last line stays
// untouched until it is completed (a daemon may also sweep on a timer).
//
// Adopted lines (foreign bytes found where the projector's own line
// belonged: a foreign write racing a commit, or one made while the daemon
// was down right after events it had made durable but not yet projected)
// stay where they are and precede the projector's line, although their
// feedback.ingested events come later in the log. Every projection
// reproduces that layout:
//
//   - A feedback.ingested line at an offset the projector adopted is a
//     no-op (the bytes are already accounted for).
//   - A feedback.ingested line whose Offset lies before the end while the
//     file is being written anew (Rebuild, a replay from empty, a catch-up
//     rewriting a cut file) is inserted at Offset, moving the lines written
//     after it.
//   - A catch-up first scans the events it will re-apply for
//     feedback.ingested lines (ExpectIngested); verification steps over
//     such a line found in place instead of taking it for a new foreign one,
//     so nothing is ingested twice.
//   - No checkpoint is written while adopted lines await their events
//     (ErrIngestPending): a crash then finds them again at catch-up.
//
// A feedback.ingested event with a negative Offset (unknown) is appended.
//
// # Regenerate (regenerate.go)
//
// For a home whose views cannot be trusted to be the log's projection (an
// in-place `cmlab rebuild`, a salvage that rewrote the log, a damaged
// feedback.jsonl): every view is rebuilt into state/regen inside the home;
// each line of the old feedback.jsonl is sorted against the rebuilt one —
// a line the log produces is dropped (the new file has it); a line before
// the old checkpoint's size that the log no longer produces (damaged, or
// a lost entry's) goes to quarantine/ as replaced; past that size, a
// corrupt line or one whose id the log holds goes to quarantine/, any
// other complete line is another program's and follows the log's lines
// (the engine ingests it), an unfinished last line stays last (dropped if
// it is the start of one of the log's lines: a torn write). The report
// names each changed view (lines removed and added, first line, the offset
// past which clients' cursors are invalid) and each line set aside, and
// the removed lines of other views are kept in quarantine/ too. Then
// state/regen.json lists the swap; each view is renamed into place with a
// directory fsync, stale views removed, the new checkpoint renamed last,
// and the marker (and state/views-stale, which a salvage writes before it
// rewrites the log so that a crash in between still regenerates) removed.
// A crash before the marker leaves the old views and checkpoint; after it,
// FinishRegenerate at the next open completes the swap.
//
// # Rebuild
//
// Rebuild removes the views of the destination, renders events on
// GOMAXPROCS workers (rendering is pure) and writes them in log order from
// one goroutine, then writes a checkpoint. Compare reports the first
// differing file and byte offset between two homes; an unfinished last line
// of the live feedback.jsonl is ignored.
package projections
