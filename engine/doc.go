// Package engine owns one home's log and projectors: open → repair → catch
// up → serve appends. Every mutation of cmlab goes through Engine.Append;
// the committer applies the projections and the in-memory observers after
// the fsync and before acknowledging, so a client always reads its own write.
//
// Open: projections.Open loads state/checkpoint.json and cuts or empties
// views as the catch-up plan says (package projections, "Catch-up"); then
// wal.Open locks the log and repairs a torn tail (its wal.repaired event is
// committed before catch-up and read by it); then the events from the
// projector's ReplayFrom to the log's end are applied in batches of 1024,
// a checkpoint is written, and complete foreign lines in feedback.jsonl are
// ingested. Only then does Open return.
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
// writers"); ErrFeedbackBusy when an unfinished foreign line does not
// complete within Options.FeedbackWait. IngestFeedback sweeps on demand.
//
// ReadOnly refuses appends (ErrReadOnly) but still brings the views up to
// the log at open. RebuildViews ignores the checkpoint, so every view is
// rewritten from the log (`cmlab rebuild` in place).
package engine
