package ship

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrDiverged: the stream's history is not this log's (another home ships
// under this id, or this home's log was replaced by a shorter one).
var ErrDiverged = errors.New("ship: the stream and the local log diverge")

// ErrBusy: another shipper runs for the home.
var ErrBusy = errors.New("ship: another shipper runs for this home")

// Options configure a Shipper. Zero values take the documented defaults.
type Options struct {
	Home home.Home
	Conn Conn
	// Stream is the stream's name; default DefaultStream(home id).
	Stream string
	// Replicas of the stream when the shipper creates it; default 1 (3 on
	// a three-node cluster; see docs/jetstream.md).
	Replicas int
	// Poll is how often the end of the log is polled for new events;
	// default 50ms.
	Poll time.Duration
	// Window is the most events published before waiting for their
	// acknowledgements (and writing the cursor); default 512.
	Window int
	// AckTimeout bounds the wait for one acknowledgement; default 5s.
	AckTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts after a
	// failure (doubling from min to max); default 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// Progress, when set, is called with the state after each write of
	// state/ship.json, from the shipper's goroutine.
	Progress func(State)
}

// Shipper ships one home's log to its stream. Run it once.
type Shipper struct {
	opts   Options
	homeID string
	key    []byte // state/ship-key: each message's MAC (auth.go)

	mu    sync.Mutex
	state State
}

// New validates opts and gives the home its id if it has none.
func New(opts Options) (*Shipper, error) {
	if opts.Home.Dir == "" {
		return nil, errors.New("ship: no home")
	}
	if opts.Conn.URL == "" {
		return nil, errors.New("ship: no NATS URL")
	}
	// The id, the key, the lock and the cursor are written in state/:
	// never through a link.
	if err := opts.Home.CheckPath("state"); err != nil {
		return nil, fmt.Errorf("ship: %w", err)
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Replicas < 1 || opts.Replicas > 5 {
		return nil, fmt.Errorf("ship: replicas %d: want 1–5", opts.Replicas)
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.Window <= 0 {
		opts.Window = 512
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 5 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(10*time.Second, opts.MinBackoff)
	}
	// A cursor names the id its home shipped under: with state/home-id
	// gone, a new id would be another home's stream. Refused before
	// anything is written.
	if _, err := home.ReadHomeID(opts.Home); errors.Is(err, os.ErrNotExist) {
		// Only a valid id (letters, digits, _ and -) goes into the printed
		// command: the cursor's bytes are not to be pasted into a shell.
		if prev, err := ReadState(opts.Home); err == nil && home.ValidateHomeID(prev.HomeID) == nil {
			return nil, fmt.Errorf("ship: state/home-id is gone, and %s names the id this home shipped under, %s\n  fix: if this is that home, write the id back (echo %s > state/home-id, from the home) and ship again; if the cursor is another home's, with no cmlab ship running remove state/ship.json and ship again",
				opts.Home.Rel(StateFile(opts.Home)), prev.HomeID, prev.HomeID)
		}
	}
	id, err := EnsureHomeID(opts.Home)
	if err != nil {
		return nil, fmt.Errorf("ship: home id: %w\n  fix: write the home's id back into state/home-id (state/ship.json's home_id and the compaction archive's ARCHIVE name it)", err)
	}
	if opts.Stream == "" {
		opts.Stream = DefaultStream(id)
	}
	key, err := EnsureKey(opts.Home)
	if err != nil {
		// A new key would not check what the old one signed.
		return nil, fmt.Errorf("ship: ship key: %w\n  fix: copy it back from the compaction archive (cp ARCHIVE/ship-key state/ship-key) or another copy kept off the machine", err)
	}
	s := &Shipper{opts: opts, homeID: id, key: key}
	prev, err := ReadState(opts.Home)
	switch {
	case err == nil:
		if err := prev.CheckHome(opts.Home, id); err != nil {
			return nil, err
		}
		s.state = prev
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	s.state.HomeID, s.state.URL, s.state.Retrying, s.state.Stopped = id, opts.Conn.URL, false, false
	if s.state.Stream != opts.Stream {
		// Another stream: what it holds decides where shipping resumes.
		s.state.Stream, s.state.Shipped = opts.Stream, 0
	}
	return s, nil
}

// HomeID is the id of the shipped home.
func (s *Shipper) HomeID() string { return s.homeID }

// State returns the shipper's current state (what state/ship.json holds).
func (s *Shipper) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// update writes state/ship.json first, then makes the new state what
// State returns, so State never runs ahead of the file status and
// /metrics read. Only the shipper's goroutine calls it.
func (s *Shipper) update(fn func(*State)) error {
	st := s.State()
	fn(&st)
	err := writeState(s.opts.Home, st)
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ship: write cursor: %w", err)
	}
	if s.opts.Progress != nil {
		s.opts.Progress(st)
	}
	return nil
}

// permanent reports errors retrying cannot cure.
func permanent(err error) bool {
	return errors.Is(err, ErrOtherHome) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrBadMessage) || errors.Is(err, ErrBusy)
}

// Run ships until ctx ends (then it returns nil) or a permanent error:
// another home's stream or cursor, or a stream that diverges from the log.
// Any other failure is recorded in state/ship.json and retried with
// exponential backoff.
func (s *Shipper) Run(ctx context.Context) error {
	unlock, err := lockShipper(s.opts.Home)
	if err != nil {
		return err
	}
	defer unlock()
	backoff := s.opts.MinBackoff
	for {
		progressed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if permanent(err) {
			s.update(func(st *State) {
				st.LastError, st.LastErrorAt, st.Retrying, st.Stopped = err.Error(), now(), false, true
			})
			return err
		}
		if progressed {
			backoff = s.opts.MinBackoff
		}
		// state/ship.json is a report here: failing to write it must not
		// stop the retries.
		_ = s.update(func(st *State) {
			st.LastError, st.LastErrorAt, st.Retrying = fmt.Sprintf("%v (retrying in %s)", err, backoff), now(), true
		})
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// session connects, finds where the stream ends and ships from there until
// an error. progressed reports whether it got as far as shipping.
func (s *Shipper) session(ctx context.Context) (progressed bool, err error) {
	r, err := wal.OpenReader(s.opts.Home.WALDir())
	if err != nil {
		return false, err
	}
	nc, err := s.opts.Conn.connect("cmlab ship " + s.homeID)
	if err != nil {
		return false, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*s.opts.Window))
	if err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.AckTimeout)
	st, err := openStream(rctx, js, s.opts.Stream, s.homeID, true, s.opts.Replicas)
	if err == nil {
		var shipped uint64
		shipped, err = s.resync(rctx, st, r)
		if err == nil {
			err = s.update(func(st *State) { st.Shipped, st.Retrying = shipped, false })
		}
	}
	cancel()
	if err != nil {
		return false, err
	}
	return true, s.pump(ctx, js, r)
}

// resync returns the last seq the stream holds, after checking that it is
// this log's event.
func (s *Shipper) resync(ctx context.Context, st jetstream.Stream, r *wal.Reader) (uint64, error) {
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("ship: stream %s: %w", s.opts.Stream, err)
	}
	last := info.State.LastSeq
	if last == 0 {
		return 0, nil
	}
	raw, err := st.GetMsg(ctx, last)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Purged or deleted: nothing to compare; the sequence still binds.
		return last, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ship: stream %s seq %d: %w", s.opts.Stream, last, err)
	}
	id, err := checkHeaders(raw.Header, s.opts.Stream, last, s.homeID)
	if err != nil {
		return 0, err
	}
	var local *events.Event
	for ev, err := range r.Events(last) {
		if err != nil {
			return 0, err
		}
		local = ev
		break
	}
	if local == nil {
		localLast, _ := r.LastSeq()
		return 0, fmt.Errorf("%w: stream %s holds home %s's events up to seq %d (event %s), the local log of home %s ends at seq %d: another home ships under this id, or this log was replaced",
			ErrDiverged, s.opts.Stream, s.homeID, last, id, s.homeID, localLast)
	}
	if local.ID != id {
		return 0, fmt.Errorf("%w: stream %s seq %d is event %s, the local log's seq %d is event %s: another home ships under id %s",
			ErrDiverged, s.opts.Stream, last, id, last, local.ID, s.homeID)
	}
	return last, nil
}

// pump follows the log from the cursor and publishes in windows: publish
// what is there (up to Window events), wait for every acknowledgement,
// advance the cursor, repeat.
func (s *Shipper) pump(ctx context.Context, js jetstream.JetStream, r *wal.Reader) error {
	fctx, cancel := context.WithCancel(ctx)
	evc := make(chan *events.Event, s.opts.Window)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	from := s.State().Shipped + 1
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(evc)
		for ev, err := range r.Follow(fctx, from, s.opts.Poll) {
			if err != nil {
				errc <- err
				return
			}
			select {
			case evc <- ev:
			case <-fctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	next := from
	batch := make([]*events.Event, 0, s.opts.Window)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return err
		case ev, ok := <-evc:
			if !ok {
				return ctx.Err()
			}
			batch = append(batch, ev)
		}
	fill:
		for len(batch) < s.opts.Window {
			select {
			case ev, ok := <-evc:
				if !ok {
					break fill
				}
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		for _, ev := range batch {
			if ev.Seq != next {
				return fmt.Errorf("ship: the log reader yielded seq %d, expected %d", ev.Seq, next)
			}
			next++
		}
		if err := s.publish(ctx, js, batch); err != nil {
			return err
		}
		last := batch[len(batch)-1].Seq
		if err := s.update(func(st *State) {
			st.Shipped, st.LastSeq, st.Retrying = last, max(st.LastSeq, last+uint64(len(evc))), false
		}); err != nil {
			return err
		}
	}
}

// publish publishes batch and waits for every acknowledgement, in order.
func (s *Shipper) publish(ctx context.Context, js jetstream.JetStream, batch []*events.Event) error {
	futs := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, ev := range batch {
		data, err := wal.EncodeEntry(ev)
		if err != nil {
			return fmt.Errorf("ship: encode seq %d: %w", ev.Seq, err)
		}
		m := nats.NewMsg(Subject(s.homeID, ev.Type))
		m.Data = data
		m.Header.Set(HeaderHomeID, s.homeID)
		m.Header.Set(HeaderSeq, strconv.FormatUint(ev.Seq, 10))
		m.Header.Set(HeaderType, ev.Type)
		m.Header.Set(HeaderMAC, eventMAC(s.key, s.homeID, ev.Seq, data))
		f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(ev.ID), jetstream.WithExpectLastSequence(ev.Seq-1))
		if err != nil {
			return fmt.Errorf("ship: publish seq %d: %w", ev.Seq, err)
		}
		futs = append(futs, f)
	}
	t := time.NewTimer(s.opts.AckTimeout)
	defer t.Stop()
	for i, f := range futs {
		ev := batch[i]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("ship: no acknowledgement of seq %d within %s", ev.Seq, s.opts.AckTimeout)
		case err := <-f.Err():
			return fmt.Errorf("ship: publish seq %d: %w", ev.Seq, err)
		case ack := <-f.Ok():
			if ack.Stream != s.opts.Stream || ack.Sequence != ev.Seq {
				return fmt.Errorf("%w: seq %d was stored as %s seq %d", ErrBadMessage, ev.Seq, ack.Stream, ack.Sequence)
			}
		}
	}
	return nil
}

// lockShipper takes state/ship.lock (flock) so one shipper runs per home.
func lockShipper(h home.Home) (unlock func(), err error) {
	if err := home.MkdirAllSync(h.StateDir()); err != nil {
		return nil, err
	}
	// Never through a link (O_NOFOLLOW): a link is refused, not removed,
	// since a shipper that took the lock through it holds its target.
	f, err := os.OpenFile(h.StateDir()+"/ship.lock", os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("state/ship.lock is a symbolic link: cmlab writes a home's files only inside the home\n  fix: stop any cmlab ship of this home, then rm state/ship.lock (the link) and ship again")
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (state/ship.lock is held)", ErrBusy)
		}
		return nil, fmt.Errorf("ship: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
