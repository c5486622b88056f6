package ship

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Source reads one home's shipped events back from its stream, checking
// every message. It satisfies replay.Source.
type Source struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	homeID string
	state  jetstream.StreamState // at open
	auth   authenticator
	// FetchWait bounds the wait for one batch of messages (default 5s).
	FetchWait time.Duration
}

// OpenSource connects and finds the home's stream (stream "" is
// DefaultStream(homeID)). It refuses a stream of another home.
func OpenSource(ctx context.Context, conn Conn, stream, homeID string) (*Source, error) {
	if err := ValidateHomeID(homeID); err != nil {
		return nil, err
	}
	if stream == "" {
		stream = DefaultStream(homeID)
	}
	nc, err := conn.connect("cmlab restore " + homeID)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	st, err := openStream(ctx, js, stream, homeID, false, 0)
	if err != nil {
		nc.Close()
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ship: stream %s: %w", stream, err)
	}
	return &Source{nc: nc, js: js, stream: stream, homeID: homeID, state: info.State, FetchWait: 5 * time.Second}, nil
}

// SetKey makes s check every message's MAC with key (auth.go); with key
// nil and unauthenticated set, MACs are not checked; with neither, an
// authenticated stream is refused (ErrNeedKey).
func (s *Source) SetKey(key []byte, unauthenticated bool) {
	s.auth.key, s.auth.unauth = key, unauthenticated
}

// Unauthenticated counts the messages read that carried no MAC (shipped
// before ship keys existed), or all of them read without a key.
func (s *Source) Unauthenticated() uint64 { return s.auth.Legacy }

// Close closes the connection.
func (s *Source) Close() { s.nc.Close() }

// Stream is the stream's name.
func (s *Source) Stream() string { return s.stream }

// LastSeq is the last seq the stream held when opened.
func (s *Source) LastSeq(ctx context.Context) (uint64, error) { return s.state.LastSeq, ctx.Err() }

// Missing lists the sequences in 1..to (0: to LastSeq) the stream lacked
// when opened; nil when it holds them all.
func (s *Source) Missing(to uint64) []Range {
	if to == 0 {
		to = s.state.LastSeq
	}
	return missing(s.state, to)
}

// Gap returns a *GapError for the sequences up to to that the stream
// lacks, nil when none.
func (s *Source) Gap(to uint64) error {
	if m := s.Missing(to); len(m) > 0 {
		return &GapError{Stream: s.stream, Missing: m}
	}
	return nil
}

// fetchBatch is how many messages one pull asks for.
const fetchBatch = 1024

// Events yields the events with from ≤ seq ≤ to (to 0: the last seq at
// open), in order. A missing sequence ends it with a *GapError; a message
// that is not the home's event seq ends it with ErrBadMessage or
// ErrOtherHome.
func (s *Source) Events(ctx context.Context, from, to uint64) iter.Seq2[*events.Event, error] {
	return func(yield func(*events.Event, error) bool) {
		from = max(from, 1)
		if to == 0 || to > s.state.LastSeq {
			to = s.state.LastSeq
		}
		if from > to {
			return
		}
		var cons jetstream.Consumer
		var err error
		blips := 0
		for {
			cons, err = s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
				FilterSubjects: []string{SubjectFilter(s.homeID)},
				DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
				OptStartSeq:    from,
			})
			if err == nil || !s.blip(ctx, err, &blips) {
				break
			}
		}
		if err != nil {
			yield(nil, fmt.Errorf("ship: read stream %s: %w", s.stream, err))
			return
		}
		next := from
		blips = 0
		for next <= to {
			n := int(min(uint64(fetchBatch), to-next+1))
			fctx, cancel := context.WithTimeout(ctx, s.FetchWait)
			b, err := cons.Fetch(n, jetstream.FetchContext(fctx))
			if err != nil {
				cancel()
				if s.blip(ctx, err, &blips) {
					continue
				}
				yield(nil, fmt.Errorf("ship: read stream %s at seq %d: %w", s.stream, next, err))
				return
			}
			got := 0
			for m := range b.Messages() {
				got++
				ev, err := s.decode(m, next)
				if err != nil {
					cancel()
					yield(nil, err)
					return
				}
				next++
				if !yield(ev, nil) || next > to {
					cancel()
					return
				}
			}
			cancel()
			if err := b.Error(); err != nil && got == 0 && !errors.Is(err, context.DeadlineExceeded) {
				if s.blip(ctx, err, &blips) {
					continue
				}
				yield(nil, fmt.Errorf("ship: read stream %s at seq %d: %w", s.stream, next, err))
				return
			}
			if got > 0 {
				blips = 0
			}
			if got == 0 {
				yield(nil, &GapError{Stream: s.stream, Missing: []Range{{next, to}}})
				return
			}
		}
	}
}

// maxBlips bounds how many "no responders" answers in a row a read
// waits out: a cluster that lost a node answers so while it elects new
// leaders (nats.go's own publish retries them too).
const maxBlips = 8

// blip reports whether err is a leadership blip worth another fetch, and
// then waits a growing backoff (50 ms doubling, at most 1 s) first.
func (s *Source) blip(ctx context.Context, err error, n *int) bool {
	if !errors.Is(err, nats.ErrNoResponders) || *n >= maxBlips {
		return false
	}
	d := min(50*time.Millisecond<<*n, time.Second)
	*n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// decode checks m is the home's event want and returns it.
func (s *Source) decode(m jetstream.Msg, want uint64) (*events.Event, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	seq := md.Sequence.Stream
	if seq != want {
		if seq > want {
			return nil, &GapError{Stream: s.stream, Missing: []Range{{want, seq - 1}}}
		}
		return nil, fmt.Errorf("%w: stream %s delivered seq %d after %d", ErrBadMessage, s.stream, seq, want-1)
	}
	ev, err := s.check(m.Headers(), m.Data(), seq)
	if err != nil {
		return nil, &MessageError{Stream: s.stream, Seq: seq, Err: err}
	}
	return ev, nil
}

// Entry returns the log entry bytes of seq as the stream holds them,
// checked like Events checks them (headers, MAC with the key given, CRC,
// event id): what a salvage writes back instead of a placeholder. nil and
// no error when the stream does not hold seq.
func (s *Source) Entry(ctx context.Context, seq uint64) ([]byte, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("ship: stream %s: %w", s.stream, err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ship: stream %s seq %d: %w", s.stream, seq, err)
	}
	a := s.auth
	a.sawMAC = !a.unauth // a lone message: one without a MAC is trusted only --unauthenticated
	if a.key == nil && !a.unauth {
		return nil, &MessageError{Stream: s.stream, Seq: seq, Err: ErrNeedKey}
	}
	if _, err := checkHeaders(raw.Header, s.stream, seq, s.homeID); err != nil {
		return nil, &MessageError{Stream: s.stream, Seq: seq, Err: err}
	}
	if err := a.check(raw.Header, s.stream, s.homeID, seq, raw.Data); err != nil {
		return nil, &MessageError{Stream: s.stream, Seq: seq, Err: err}
	}
	if _, err := s.check(raw.Header, raw.Data, seq); err != nil {
		return nil, &MessageError{Stream: s.stream, Seq: seq, Err: err}
	}
	return raw.Data, nil
}

// check checks the message seq: headers, MAC, entry, event id.
func (s *Source) check(h nats.Header, data []byte, seq uint64) (*events.Event, error) {
	id, err := checkHeaders(h, s.stream, seq, s.homeID)
	if err != nil {
		return nil, err
	}
	if err := s.auth.check(h, s.stream, s.homeID, seq, data); err != nil {
		return nil, err
	}
	ev, err := wal.DecodeEntry(data, seq)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s seq %d: %v", ErrBadMessage, s.stream, seq, err)
	}
	if ev.ID != id {
		return nil, fmt.Errorf("%w: stream %s seq %d holds event %s under message id %s", ErrBadMessage, s.stream, seq, ev.ID, id)
	}
	return ev, nil
}

// MessageError is the error about one message of a stream that is not
// the home's event at its seq (ErrBadMessage, ErrOtherHome, ErrForged,
// ErrNeedKey): Seq says where a restore could stop before it.
type MessageError struct {
	Stream string
	Seq    uint64
	Err    error
}

func (e *MessageError) Error() string { return e.Err.Error() }
func (e *MessageError) Unwrap() error { return e.Err }
