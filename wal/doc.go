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
// hands them to one committer goroutine, which groups whatever is waiting,
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
// does not start at sequence 1 included, since cmlab never cuts the front
// of its log — is corruption of acknowledged data: Open refuses with a
// *CorruptError (wrapping ErrCorrupt) naming segment, byte offset and
// sequence, and changes nothing. Salvage is the operator's explicit way
// past it: every intact entry kept byte for byte, damaged bytes
// quarantined, each lost entry replaced by a wal.salvaged placeholder at
// its own seq. Open also refuses, changing nothing, a directory holding a
// tidwall/wal truncation marker (<seq>.START, <seq>.END), for which
// tidwall would delete segments.
//
// # Reading
//
// Log.Events reads segment files sequentially (not through tidwall's
// per-entry Read) and decodes envelopes of the canonical layout without
// reflection (entry.go; fuzzed against the msgpack library), falling back
// to events.DecodeEnvelope for anything else. Open checks frames, CRCs and
// stored seqs of every segment but does not decode envelopes; Verify does. Reader, Verify and Stat read a log without its lock, so
// `cmlab wal dump|verify|stat` work while the daemon holds it; Reader.Follow
// polls for new entries. Log.Stats reports appends, group commits, group
// size and fsync latency histograms and the last fsync error.
package wal
