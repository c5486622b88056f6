// Package engine owns one home's log and projectors: open → repair → catch
// up → serve appends. Every mutation of cmlab goes through Engine.Append;
// the committer applies the projections and the in-memory observers after
// the fsync and before acknowledging, so a client reads its own write
// (unless the views lag the log, see below).
//
// Open: wal.Open locks the log and repairs a torn tail (its wal.repaired
// event is committed before catch-up and read by it); a view swap a crash
// interrupted is finished (projections.FinishRegenerate); projections.Open
// loads state/checkpoint.json, checks every view against its whole-view
// CRC and cuts or empties views as the catch-up plan says (package
// projections, "Catch-up"); then the events from the projector's
// ReplayFrom to the log's end are applied in batches of 1024, a checkpoint
// is written, and complete foreign lines in feedback.jsonl are ingested.
// Only then does Open return.
//
// Instead of that catch-up, every view is regenerated from the whole log
// (projections.Regenerate: rebuilt inside the home, feedback.jsonl's lines
// sorted, swapped in view by view, the checkpoint last) when
// Options.RebuildViews asks (`cmlab rebuild` in place, and recover after a
// salvage rewrote the log), when a salvage marked the views stale, when
// feedback.jsonl is not vouched for by the checkpoint (short, its tail or
// whole-view CRC differs, no checkpoint), when the checkpoint is past the
// log, or when the catch-up meets, where its own line belongs past the
// checkpoint, a corrupt line or one with an id the log holds
// (projections.ErrFeedbackDamaged). Regenerated reports what changed.
//
// Checkpoints: every Options.CheckpointEvery applied events (default 1000)
// or Options.CheckpointInterval after the first uncovered event (default
// 1 s, also driven by a ticker while idle), after catch-up, and on Close.
// A failed checkpoint does not fail the log (the log stays the truth; the
// next catch-up is longer); CheckpointErr reports it. After a failed apply
// no checkpoint is written any more, so the views never claim more than
// the log.
//
// Feedback: appends that write feedback.jsonl are serialised and preceded
// by ingestion of foreign lines (see package projections, "Legacy
// writers"), combined by one goroutine into groups, the next queued to
// the log while the one before is fsynced (feedback_combine.go); ErrFeedbackBusy when an unfinished foreign line does not
// complete within Options.FeedbackWait. IngestFeedback sweeps on demand.
// Only a line that is a JSON object whose id neither the log nor an
// earlier line of the batch holds is ingested; the others are set aside:
// copied to quarantine/, blanked in place (same length, so no cursor a
// poll handed out moves or lands mid-line) and ingested blank with
// feedback.ingested's SetAside naming why (FeedbackSetAside lists them). The set
// of ids the log holds is built from the whole log the first time a
// foreign line needs it, then kept up to date by the committer.
//
// Verification after open: with Options.VerifyAfterOpen (the daemon),
// Open's cost does not grow with the history. projections.Open checks
// each view's tail (TailBytes) and trusts its whole-view CRC
// (projections.Options.DeferWholeCheck), and opens no sealed view (an
// ended terminal block's output, vouched for by the checkpoint's one
// record of state/sealed-views.jsonl); once Open has returned, a
// goroutine reads those views (projections.VerifyViews) and the sealed
// ones, one at a time (projections.VerifySealed). A view whose
// bytes anywhere before the checkpoint differ is then regenerated from the
// whole log like at open (regenerateLive: feedback appends and the
// committer's apply wait meanwhile; the report says which views), so a
// damaged old byte costs one regeneration, found within one read of the
// views after start (Verified). Checkpoints extend the CRCs trusted at
// open, so a daemon stopped before its verification ended leaves the
// damage to the next start's. Without the option, Open reads every view.
//
// ReadOnly refuses appends (ErrReadOnly) but still brings the views up to
// the log at open.
package engine
