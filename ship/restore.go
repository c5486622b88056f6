package ship

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/replay"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	Conn   Conn
	Stream string // default DefaultStream(HomeID)
	HomeID string
	// Into is the home to build; it must not exist or be empty.
	Into home.Home
	// UpTo is the last seq to include (0: all the stream holds). A restore
	// with UpTo is time travel (replay --from-nats): the new home is not
	// given the home id nor a shipping cursor, so it never ships under it.
	UpTo uint64
	// Progress, when set, is called after each applied batch.
	Progress func(seq uint64)
	// Key is the home's ship key (state/ship-key, or ship-key in its
	// archive): every message's MAC is checked with it (auth.go) and a
	// full restore gives it to the new home. Without it an authenticated
	// stream is refused (ErrNeedKey) unless Unauthenticated.
	Key             []byte
	Unauthenticated bool
	// Legacy, after Restore, counts the messages restored without a MAC.
	Legacy *uint64
}

// Restore builds a home from its stream: the log (entries byte for byte)
// and the views, through replay.To. A stream lacking any seq up to the
// bound is refused first with a *GapError (wrapping ErrGap) naming them,
// and nothing is created. A full restore (UpTo 0) writes the home id and a
// cursor at the last seq, so `cmlab ship` on the new home goes on where the
// old one stopped. On failure a directory Restore created is removed.
func Restore(ctx context.Context, o RestoreOptions) (*replay.ToResult, error) {
	src, err := OpenSource(ctx, o.Conn, o.Stream, o.HomeID)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	src.SetKey(o.Key, o.Unauthenticated)
	if o.Legacy != nil {
		defer func() { *o.Legacy = src.Unauthenticated() }()
	}
	last, _ := src.LastSeq(ctx)
	if o.UpTo > last {
		return nil, fmt.Errorf("ship: stream %s ends at seq %d, before --to %d", src.Stream(), last, o.UpTo)
	}
	if err := src.Gap(o.UpTo); err != nil {
		return nil, err
	}
	if last == 0 {
		return nil, fmt.Errorf("%w: stream %s holds no event of home %s", replay.ErrNothing, src.Stream(), o.HomeID)
	}
	_, statErr := os.Stat(o.Into.Dir)
	created := errors.Is(statErr, os.ErrNotExist)
	res, err := restore(ctx, o, src, last)
	if err != nil && created {
		os.RemoveAll(o.Into.Dir)
	}
	return res, err
}

func restore(ctx context.Context, o RestoreOptions, src *Source, last uint64) (*replay.ToResult, error) {
	res, err := replay.To(ctx, replay.ToOptions{Into: o.Into, Source: src, UpTo: o.UpTo, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	if o.UpTo != 0 {
		return res, nil
	}
	if err := WriteHomeID(o.Into, o.HomeID); err != nil {
		return nil, err
	}
	if o.Key != nil {
		if err := WriteKey(o.Into, o.Key); err != nil {
			return nil, err
		}
	}
	st := State{HomeID: o.HomeID, Stream: src.Stream(), URL: o.Conn.URL, Shipped: last, LastSeq: last}
	if err := writeState(o.Into, st); err != nil {
		return nil, err
	}
	return res, nil
}
