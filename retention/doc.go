// Package retention keeps the retention/status read model (issue 16): what
// `cmlab status`, `cmlab compact` and the daemon's compaction policy need
// from the whole log, kept incrementally so that none of them reads the
// log from seq 1.
//
// The model holds, per mandate, its first step event and its steps'
// statuses (the "open steps" retention holder); per "mandate/step" as
// steps/steps.jsonl names it, the order of its first record and its last
// status (status's steps awaiting review); the terminal blocks begun and
// not ended with what status prints about them (left-open blocks and the
// "open terminal blocks" holder); and a timestamp index, runs of at most
// TSBlock seqs within one TSSpan of time with their largest ts, so that
// the first event of the auto-resume window or of a keep-days cutoff is
// found by reading one such run of the log (near that time, so in the
// retained log), never the log from its start.
//
// It keeps open work, not history: a completed step (final: no
// transition leaves completed) leaves the model, and so does a mandate
// whose steps are all completed. Its size follows what is open plus the
// timestamp index (one run per TSBlock seqs or TSSpan of time), not the
// log's length. (A transition the journal would refuse — one reviving a
// completed step — is then counted from that event on.)
//
// The daemon subscribes it to its engine and writes its snapshot
// (state/snapshots/retention.msgpack, package snapshot) at checkpoints once
// SnapshotEvery events passed, and at close. Load, for commands without a
// daemon, reads the snapshot and the log after its seq with wal.OpenReader,
// without the log's lock. A snapshot that fails its CRC, carries another
// code version or names an event the log does not hold at its seq is
// ignored and the model is rebuilt from the (retained) log.
package retention
