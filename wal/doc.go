// Package wal is cmlab's write-ahead log: one entry per event, stored in
// segment files written by github.com/tidwall/wal (binary format: uvarint
// length, then the entry bytes; a segment is named by the 20-digit
// sequence of its first entry — see segment.go), each entry framed by our
// own header so that damage can be detected and a torn tail repaired.
//
// # Entry format
//
//	+------+----------------+-------------------------------+
//	| 0xC1 | CRC32C (4, BE) | msgpack event envelope        |
//	+------+----------------+-------------------------------+
//	  ver    Castagnoli CRC over the envelope bytes
//
// The envelope (package events) starts with its seq as a fixed-width
// uint64, which lets scans check order without decoding, and lets the
// committer encode envelopes in the appenders' goroutines and patch the
// seq in afterwards. An entry whose seq is not its index is corrupt, as is
// an empty entry (tidwall/wal turns a zero-filled tail into phantom empty
// entries) or one whose envelope does not decode.
//
// # Writing
//
// Append validates and encodes its events in the caller's goroutine and
// hands them to one committer goroutine (Enqueue does only that, and
// Pending.Wait the rest, so that one caller can queue its next append
// while the last is fsynced), which groups whatever is waiting,
// patches in the sequences and writes the group with one WriteBatch. A
// syncer goroutine makes written groups durable: one fsync of the tail
// segment (fdatasync: data and the size needed to read it back) covering
// every group written before it began (through a descriptor of its own, so
// the committer writes the next group meanwhile;
// tidwall fsyncs a filled segment itself before opening the next), a
// directory fsync when any of them created a segment file (tidwall/wal
// does not; files.go mirrors its cycle rule to know; a log or quarantine
// directory Open creates is made durable in its parent the same way),
// then Options.Apply
// (the projections), and only then the acknowledgements, in sequence
// order. A write or fsync error puts the log into a failed state: every
// waiting appender gets the error, nothing more is acknowledged or
// fsynced, the fsync is never retried, and the process must reopen the
// log. The three calls a group commit makes go through the Writer seam
// (files.go), where Faults injects write errors, short writes, ENOSPC and
// fsync failures for tests.
//
// tidwall/wal keeps the tail segment's bytes in a slice it grows by
// append; the log gives it one with room for the whole segment as soon as
// the segment is opened, made in the background (tailbuf.go), so no
// WriteBatch copies a growing segment. Before each fsync the syncer
// yields to the appenders the previous one answered, so that their next
// appends join it rather than wait for two fsyncs. Options.AckTrace
// decomposes each acknowledgement's latency by stage (`cmlab bench wal`).
//
// The tail segment is preallocated: a background goroutine keeps zeros
// ahead of its entries, so that group commits overwrite allocated blocks
// and their fdatasync commits no metadata (prealloc.go). Zeros ending the
// last segment at a multiple of 1 MiB are therefore no damage: readers
// stop there, Open truncates them silently, Close cuts them. Zeros up to
// a sector boundary followed by more entries there are what a power cut
// leaves of unacknowledged groups: a torn tail ("zero gap"), cut whole.
//
// # Opening
//
// Open takes an exclusive flock on LOCK (holding the owner's pid; a second
// opener's error names it), then checks every entry of every segment. A
// torn tail — bad bytes running to the end of the last segment with no good
// entry after them — is cut: the bytes go to the quarantine directory in a
// file named <segment>-at-<offset>.torn, the segment is truncated and
// fsynced, and a wal.repaired event is appended (directly, before the
// committer starts; Apply is not called for it). A cut whose event an
// earlier Open failed or died writing (the segment ends at the cut, or
// the half-written event is the torn tail cut now) is recorded by the
// next Open, before its own. Damage anywhere else — a log whose first segment
// does not start at sequence 1 (or, compacted, at the first retained seq
// of its manifest) included — is corruption of acknowledged data: Open refuses with a
// *CorruptError (wrapping ErrCorrupt) naming segment, byte offset and
// sequence, and changes nothing. Salvage is the operator's explicit way
// past it: every intact entry kept byte for byte, damaged bytes
// quarantined, each lost entry replaced by a wal.salvaged placeholder at
// its own seq. Open also refuses, changing nothing, a directory holding a
// tidwall/wal truncation marker (<seq>.START, <seq>.END), for which
// tidwall would delete segments.
//
// # Compaction
//
// Log.Compact (compact.go) removes whole segments from the front of the
// log — every segment whose entries all lie before a given seq, never the
// tail — moving them to an archive directory or deleting them; package
// compact decides how far. wal/MANIFEST records it (manifest.go), JSON
// replaced atomically (.MANIFEST.tmp, fsync, rename, directory fsync):
//
//	{"version":1,
//	 "first_seq":4711,                  the first retained seq: wal/ starts with segment 00000000000000004711
//	 "removed":[{"first":1,"last":4710, a removed range (contiguous from 1, in order, ending at first_seq-1;
//	             "segments":3,            adjacent ranges with the same fate are merged)
//	             "bytes":12582912,
//	             "archive":"/abs/dir",    where its segment files went; absent: deleted
//	             "at":1764000000000}],    unix ms of the compaction that removed it last
//	 "compacted_at":1764000000000,       unix ms of the last compaction
//	 "home_id":"0193…",                  the home's id (state/home-id), since home ids exist
//	 "sum":123456}                       CRC-32C (Castagnoli) of the same JSON with sum 0
//
// Compaction only moves history (archive.go): the archive directory is
// never wal/, inside it, or the home under any name (real paths and
// device/inode compared); each copy is read back after the archive's
// fsync and checked frame by frame before the manifest is written; the
// archive records its home id and segments in ARCHIVE and is refused for
// another home, by compaction and by every reader. VerifyArchives checks
// every archived range (`wal verify` frame by frame, `status` by stat).
//
// A manifest that is damaged, or missing from a log that starts past
// seq 1, is ErrBadManifest: RepairManifest (manifest_repair.go, `cmlab
// compact --repair-manifest`) rebuilds it from the segments in wal/ and
// in the archive; Salvage refuses it, since placeholders would replace
// history the archive still holds. Salvage does salvage damaged archived
// segments in place, like the log's own.
//
// Order: copy each segment to the archive (tmp, fsync, rename; then the
// archive directory is fsynced) → write the manifest → remove the segment
// files → fsync the log directory. Before the manifest is durable nothing
// was removed; after it, segment files before first_seq ("pending") are
// no part of the log: readers skip them and the next Open or Compact
// removes them, for an archived range only once the archive holds an
// identical copy (made then if missing). A manifest that does not parse
// or fails its sum, or whose first_seq has no segment starting exactly
// there (past the log, inside a segment, or a missing retained head), is
// corruption: Open refuses naming the segment, and nothing is removed.
// A log without a manifest whose first segment is not 1 is still missing
// entries. ENOSPC while copying or writing the manifest removes nothing.
// tidwall/wal's TruncateFront is not used: it rewrites a segment through
// a <seq>.START marker, which Open keeps refusing.
//
// Readers (Log.Events, Reader, Verify, Stat, Salvage) start a compacted
// log at first_seq. Events and Reader read the sequences before it from
// the archive the manifest names (Options.Archive / Reader.SetArchive
// point elsewhere, for a moved archive); a deleted range, or an archive
// lacking a segment, is a *CompactedError (ErrCompacted, not ErrCorrupt)
// whose message says how to restore the archive. Log.Read does the
// same; FirstSeq is the first retained seq.
//
// # Reading
//
// Log.Events reads segment files sequentially (not through tidwall's
// per-entry Read) and hands each entry's envelope to package events'
// codec (events.DecodeEnvelopeFast: the canonical layout without
// reflection, fuzzed against the msgpack library, which takes anything
// else); the log itself keeps only its frame (entry.go: version, CRC32C,
// the seq patched in place). Open checks frames, CRCs and
// stored seqs of every segment but does not decode envelopes; Verify does. Reader, Verify and Stat read a log without its lock, so
// `cmlab wal dump|verify|stat` work while the daemon holds it; Reader.Follow
// polls for new entries. Log.Stats reports appends, group commits, group
// size and fsync latency histograms and the last fsync error.
//
// # Verification after open
//
// Open's check of every segment costs a read of the whole log. With
// Options.VerifyAfterOpen (the daemon's engine) Open reads the last
// segment — the one a crash can tear, repaired as above — and every sealed
// segment that wal/VERIFIED does not list with its current size and mtime
// (the first time: all of them; then those sealed since the last open),
// then rewrites that record. A listed segment is taken to hold the seqs
// the record says, so a missing or cut segment is still refused at open,
// naming it. StartVerification then reads every listed segment's entries
// in a goroutine Close waits for; the caller starts it once it serves.
// Damage found there (bit rot: bytes changed, size and mtime not) fails
// the log with the *CorruptError Open would have returned (wrapped in
// ErrFailed): nothing more is appended, the fix is the same (`cmlab
// recover --salvage`), and the segment is dropped from the record, so the
// next open refuses the log at once. The window is one read of the sealed
// segments after the start; Verified reports the outcome.
package wal
