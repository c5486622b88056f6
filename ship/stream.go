package ship

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors of this package; each is wrapped with the details.
var (
	// ErrOtherHome: the stream (or the cursor) belongs to another home id.
	ErrOtherHome = cursor.ErrOtherHome
	// ErrGap: the stream lacks sequences it should hold.
	ErrGap = errors.New("ship: gap in the stream")
	// ErrNoStream: the home has no stream on the server.
	ErrNoStream = errors.New("ship: no stream")
	// ErrBadMessage: a message is not what a shipper publishes (wrong seq,
	// bad entry, id mismatch).
	ErrBadMessage = errors.New("ship: bad message in the stream")
)

// Message headers besides Nats-Msg-Id.
const (
	HeaderHomeID = "Cmlab-Home-Id"
	HeaderSeq    = "Cmlab-Seq"
	HeaderType   = "Cmlab-Type"
)

// Conn is what the shipper and Source need of a server: options of the
// connection.
type Conn struct {
	URL   string // nats://host:port (comma-separated for a cluster)
	Creds string // a .creds file, optional
}

func (c Conn) connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.Timeout(5 * time.Second),
		// Publishes while disconnected fail at once instead of waiting in a
		// buffer: the shipper resumes from what the stream holds anyway.
		nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	nc, err := nats.Connect(c.URL, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("ship: connect %s: %w", c.URL, err)
	}
	return nc, nil
}

// streamHomes returns the home ids of the cmlab.<id>.> filters among
// subjects.
func streamHomes(subjects []string) []string {
	var ids []string
	for _, s := range subjects {
		if rest, ok := strings.CutPrefix(s, "cmlab."); ok {
			if id, ok := strings.CutSuffix(rest, ".>"); ok {
				ids = append(ids, id)
				continue
			}
		}
		ids = append(ids, "?("+s+")")
	}
	return ids
}

// checkStreamConfig refuses a stream that does not hold exactly homeID's
// subject.
func checkStreamConfig(cfg jetstream.StreamConfig, homeID string) error {
	if len(cfg.Subjects) == 1 && cfg.Subjects[0] == SubjectFilter(homeID) {
		return nil
	}
	return fmt.Errorf("%w: stream %s holds home %s's events (subjects %s), not this home %s",
		ErrOtherHome, cfg.Name, strings.Join(streamHomes(cfg.Subjects), ", "), strings.Join(cfg.Subjects, " "), homeID)
}

// openStream finds the home's stream, creating it when create is set.
func openStream(ctx context.Context, js jetstream.JetStream, name, homeID string, create bool, replicas int) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !create {
			return nil, fmt.Errorf("%w %s for home %s on the server", ErrNoStream, name, homeID)
		}
		st, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        name,
			Description: "cmlab home " + homeID,
			Subjects:    []string{SubjectFilter(homeID)},
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  2 * time.Minute,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, name) // created meanwhile by another
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ship: stream %s: %w", name, err)
	}
	if err := checkStreamConfig(st.CachedInfo().Config, homeID); err != nil {
		return nil, err
	}
	return st, nil
}

// checkHeaders checks that a message at stream sequence seq is what a
// shipper of homeID publishes for the home's event seq, and returns its
// event id.
func checkHeaders(h nats.Header, stream string, seq uint64, homeID string) (string, error) {
	if got := h.Get(HeaderHomeID); got != homeID {
		return "", fmt.Errorf("%w: stream %s seq %d is home %s's event, not this home %s", ErrOtherHome, stream, seq, got, homeID)
	}
	if got := h.Get(HeaderSeq); got != strconv.FormatUint(seq, 10) {
		return "", fmt.Errorf("%w: stream %s seq %d carries event seq %q (home %s)", ErrBadMessage, stream, seq, got, homeID)
	}
	id := h.Get(jetstream.MsgIDHeader)
	if id == "" {
		return "", fmt.Errorf("%w: stream %s seq %d has no %s", ErrBadMessage, stream, seq, jetstream.MsgIDHeader)
	}
	return id, nil
}

// Range is an inclusive run of sequences.
type Range struct{ First, Last uint64 }

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(r.First, 10)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// GapError lists the sequences a stream lacks; it wraps ErrGap.
type GapError struct {
	Stream  string
	Missing []Range
}

func (e *GapError) Error() string {
	parts := make([]string, len(e.Missing))
	var n uint64
	for i, r := range e.Missing {
		parts[i] = r.String()
		n += r.Last - r.First + 1
	}
	return fmt.Sprintf("%s: stream %s lacks %d event(s): seq %s", ErrGap, e.Stream, n, strings.Join(parts, ", "))
}

func (e *GapError) Unwrap() error { return ErrGap }

// missing lists the sequences in 1..to that state lacks: before its first
// sequence and the interior deletes.
func missing(state jetstream.StreamState, to uint64) []Range {
	var out []Range
	if state.Msgs == 0 {
		if to > 0 {
			out = append(out, Range{1, to})
		}
		return out
	}
	if state.FirstSeq > 1 {
		out = append(out, Range{1, min(state.FirstSeq-1, to)})
	}
	del := append([]uint64(nil), state.Deleted...)
	sort.Slice(del, func(i, j int) bool { return del[i] < del[j] })
	for _, s := range del {
		if s > to {
			break
		}
		if n := len(out); n > 0 && out[n-1].Last+1 == s {
			out[n-1].Last = s
			continue
		}
		out = append(out, Range{s, s})
	}
	return out
}
