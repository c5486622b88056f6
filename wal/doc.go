// Package wal is cmlab's write-ahead log: one entry per event, stored in
// segment files written by github.com/tidwall/wal (binary format: uvarint
// length, then the entry bytes), each entry framed by our own envelope so
// that damage can be detected and a torn tail repaired.
//
// # Entry format
//
//	+------+----------------+-------------------------------+
//	| 0xC1 | CRC32C (4, BE) | msgpack event envelope        |
//	+------+----------------+-------------------------------+
//	  ver    Castagnoli CRC over the envelope bytes
//
// The envelope (package events) stores its own seq; an entry whose seq is
// not its WAL index is corrupt, as is an empty entry (tidwall/wal turns a
// zero-filled tail into phantom empty entries) or one whose envelope does
// not decode.
//
// # Writing
//
// Append hands events to one committer goroutine, which groups whatever is
// waiting into one WriteBatch and one fsync, fsyncs the directory when the
// group opened a new segment, calls Options.Apply (the projections) and only
// then acknowledges every appender in the group. A write or fsync error puts
// the log into a failed state: every waiting appender gets the error, the
// fsync is never retried, and the process must reopen the log.
//
// # Opening
//
// The log directory is locked with flock on LOCK. A torn tail of the last
// segment is cut, its bytes saved to the quarantine directory, and a
// wal.repaired event appended. Damage anywhere else is corruption of
// acknowledged data and Open refuses with ErrCorrupt naming segment, offset
// and sequence.
package wal
