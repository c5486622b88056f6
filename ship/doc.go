// Package ship copies a home's log, event by event and in seq order, to a
// NATS JetStream stream, and reads it back from there: `cmlab ship`,
// `cmlab serve --ship`, `cmlab restore` and `cmlab replay --from-nats`.
//
// # Home id
//
// A home has no identifier of its own in the log, so this package gives it
// one: state/home-id, one line holding a UUIDv7, created (tmp → fsync →
// rename → directory fsync) the first time a shipper runs and never
// changed. Restore writes the id it restored into the new home, so a
// machine rebuilt after its disk died ships on into the same stream.
// Copying a home directory copies its id: two homes shipping under one id
// are detected (below) and refused.
//
// # The stream
//
// One stream per home: subjects cmlab.<home-id>.> (exactly that one
// filter), file storage, Options.Replicas replicas, named CMLAB_<home-id>
// unless --stream names it. Each event is one message:
//
//	subject  cmlab.<home-id>.<event type>     e.g. cmlab.0193….feedback.submitted
//	headers  Nats-Msg-Id: <event id>           JetStream drops a retried publish
//	         Nats-Expected-Last-Sequence: seq-1
//	         Cmlab-Home-Id, Cmlab-Seq, Cmlab-Type
//	         Cmlab-Mac: HMAC-SHA256 under the home's ship key (auth.go)
//	data     the log entry bytes as stored: 0xC1, CRC32C, msgpack envelope
//
// The invariant: stream sequence N holds the home's event seq N. Every
// publish asserts it with Nats-Expected-Last-Sequence, so the server stores
// an event only right after its predecessor: a publish lost in a network
// cut or a server restart cannot be overtaken by the next one (that one
// fails too, and the shipper starts again from what the stream holds).
// Nats-Msg-Id makes a retry of an event already stored a duplicate the
// server acknowledges without storing it (within the stream's duplicate
// window); past that window the sequence assertion refuses it instead. So
// the stream holds each event exactly once, in seq order, and a gap (a
// message deleted, or the front purged) is visible as missing stream
// sequences.
//
// # The shipping cursor
//
// state/ship.json records the last seq the stream acknowledged, the stream,
// the last error and when it happened. It is replaced atomically (tmp →
// fsync → rename → directory fsync) after each acknowledged batch. It is
// the status report and a check, not the source of truth: at each
// (re)connection the shipper reads the stream's last sequence, checks that
// message against the local log (same home id, same seq, same event id),
// and resumes right after it. A shipper killed between an acknowledgement
// and the cursor write therefore neither loses nor repeats an event, and a
// cursor written for another home id is refused naming both ids. One
// shipper runs per home (a flock on state/ship.lock).
//
// Refused, naming both ids: a stream whose subjects belong to another home
// id; a message whose Cmlab-Home-Id is another home's; a stream whose event
// at seq N is not the local event N (another home ships under this id); a
// stream holding more events than the local log. Anything else (server
// unreachable, stream not ready, an acknowledgement timing out) is retried
// with exponential backoff, and the error is kept in state/ship.json for
// `cmlab status` until a batch is acknowledged again.
//
// # Reading back
//
// Source reads a home's events from its stream in order, checking each
// message (home id, stream sequence = seq, MAC under the ship key when
// given, entry CRC, event id = Nats-Msg-Id); a message that fails is a
// *MessageError naming its seq; Missing lists the sequences a stream lacks up to a bound.
// Restore refuses a stream with missing sequences (ErrGap, naming them)
// before creating anything, then builds the home with replay.To from the
// Source: the log copy and the views, byte-identical to the original's.
//
// # Compaction
//
// Compaction must never remove a segment holding a seq the stream has not
// acknowledged: those events exist nowhere else. compact.DefaultHolders
// has a "ship cursor" holder for it: state/ship.json's shipped seq + 1,
// held against archiving too (this shipper reads the log directory, not
// the archive). The cursor may lag the stream (a shipper killed between
// an acknowledgement and the cursor write), which only keeps more.
package ship
