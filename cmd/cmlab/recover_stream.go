package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship"
	"github.com/cmlab/cmlab/wal"
)

// Salvage never writes placeholders for seqs a copy still holds: the
// home's own JetStream stream (package ship) holds every shipped event.
// 'recover --salvage --apply --from-nats URL' writes those entries back
// byte for byte (each checked: headers, the MAC under state/ship-key,
// CRC, seq); without it a salvage of a home that shipped the lost seqs
// refuses, naming the flag.

// salvageSource is where a salvage may take lost entries from.
type salvageSource struct {
	nats, creds string
}

// salvageFetch opens the home's stream when from names one; the returned
// close is never nil.
func salvageFetch(ctx context.Context, h home.Home, from salvageSource) (func(uint64) ([]byte, error), func(), error) {
	if from.nats == "" {
		return nil, func() {}, nil
	}
	id, err := home.ReadHomeID(h)
	if err != nil {
		return nil, nil, fmt.Errorf("--from-nats: the home has no id (state/home-id): it never shipped: %w", err)
	}
	key, err := ship.ReadKey(ship.KeyFile(h))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	stream := ""
	if st, err := ship.ReadState(h); err == nil {
		stream = st.Stream
	}
	src, err := ship.OpenSource(ctx, ship.Conn{URL: from.nats, Creds: from.creds}, stream, id)
	if err != nil {
		return nil, nil, err
	}
	src.SetKey(key, key == nil)
	last, _ := src.LastSeq(ctx)
	return func(seq uint64) ([]byte, error) {
		if seq > last {
			return nil, nil
		}
		return src.Entry(ctx, seq)
	}, src.Close, nil
}

// refuseShippedLoss refuses a salvage that would put placeholders at seqs
// the home's stream acknowledged (state/ship.json), when no stream was
// given to take them from.
func refuseShippedLoss(h home.Home, lost []wal.LostRange) error {
	st, err := ship.ReadState(h)
	if err != nil || st.Shipped == 0 {
		return nil
	}
	for _, r := range lost {
		if r.First <= st.Shipped {
			return newCLIError(exitCorrupt, "CORRUPT", fmt.Sprintf("the salvage would replace seqs %d..%d with placeholders, but stream %s holds them (shipped up to seq %d); nothing was changed", r.First, min(r.Last, st.Shipped), st.Stream, st.Shipped),
				fmt.Sprintf("take them back from the stream: 'cmlab recover --salvage --apply --from-nats %s' (stop the daemon first)", st.URL))
		}
	}
	return nil
}
