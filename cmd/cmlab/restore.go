package main

import (
	"context"
	"fmt"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship"
	"github.com/spf13/cobra"
)

type restoreOpts struct {
	nats, stream, creds, homeID, into string
	keys                              restoreKeyOpts // restore_auth.go
	to                                uint64
}

// newRestoreCmd builds 'cmlab restore'.
func newRestoreCmd(g *globalOpts) *cobra.Command {
	o := &restoreOpts{}
	c := &cobra.Command{
		Use:   "restore --nats URL --home-id ID --into DIR",
		Short: "Rebuild a home (log and views) from its NATS JetStream stream",
		Long: `Read the home's events back from its stream and build DIR as the home: the
log (entries byte for byte as shipped) and the views, then state/home-id and
a shipping cursor at the last seq, so 'cmlab ship --home DIR' goes on where
the lost machine stopped. DIR must not exist or be empty.

A stream lacking any seq (a deleted message, a purged front) is refused
before anything is written: exit 3, naming the missing seqs. A stream of
another home is refused naming both ids.

Every event the shipper publishes carries a MAC under the home's ship key
(state/ship-key; compaction keeps a copy as ship-key in its archive). Give
it with --key FILE or --key-from-archive DIR: a message that fails it — an
event forged or copied from another home, or one of the home's own events
published again at another seq — is refused with exit 3 naming its seq, and
nothing is written; --to SEQ restores the events before it (time travel: no
home id, no cursor). Without a key an authenticated stream is refused
unless --unauthenticated.`,
		Example: `  cmlab restore --nats nats://127.0.0.1:4222 --home-id 0193… --key /backup/ship-key --into ~/.cm
  cmlab restore --nats nats://127.0.0.1:4222 --home-id 0193… --key-from-archive /mnt/cold/cmlab-wal --into ~/.cm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.nats == "" || o.homeID == "" || o.into == "" {
				return &usageError{"--nats, --home-id and --into are required"}
			}
			into, err := home.Resolve(o.into)
			if err != nil {
				return err
			}
			key, err := o.keys.key(o.homeID, nil)
			if err != nil {
				return err
			}
			var legacy uint64
			res, err := ship.Restore(cmd.Context(), ship.RestoreOptions{Conn: ship.Conn{URL: o.nats, Creds: o.creds},
				Stream: o.stream, HomeID: o.homeID, Into: into, Progress: restoreTicker(g), UpTo: o.to,
				Key: key, Unauthenticated: o.keys.unauthenticated, Legacy: &legacy})
			if err != nil {
				return shipExit(err)
			}
			// The read models too, so that the first start is fast.
			if err := leaveReadModels(cmd.Context(), into); err != nil {
				return err
			}
			if legacy > 0 {
				fmt.Fprintf(g.stderr, "cmlab restore: %d event(s) carried no MAC (shipped before ship keys, or restored --unauthenticated): not authenticated\n", legacy)
			}
			if g.json {
				return labPrintJSON(g, map[string]any{"into": into.Dir, "homeId": o.homeID, "first": res.First, "last": res.Last, "events": res.Events})
			}
			fmt.Fprintf(g.stdout, "restored home %s: %d events (seq %d–%d) into %s\n", o.homeID, res.Events, res.First, res.Last, into.Dir)
			return nil
		},
	}
	c.SetContext(context.Background())
	f := c.Flags()
	f.StringVar(&o.nats, "nats", "", "NATS server URL")
	f.StringVar(&o.homeID, "home-id", "", "id of the home to restore (its state/home-id)")
	f.StringVar(&o.into, "into", "", "directory of the restored home (must not exist or be empty)")
	f.StringVar(&o.stream, "stream", "", "stream name (default CMLAB_<home-id>)")
	f.StringVar(&o.creds, "creds", "", "NATS credentials file")
	f.Uint64Var(&o.to, "to", 0, "restore only up to this seq (time travel: the new home gets no home id nor cursor)")
	o.keys.flags(f, "")
	return c
}

// shipExit gives a gap in a stream exit code 3, as log corruption.
func shipExit(err error) error {
	if f := restoreFix(err, ""); f != nil { // restore_auth.go
		return f
	}
	return err
}

func restoreTicker(g *globalOpts) func(uint64) {
	tick := replayTicker()
	return func(seq uint64) {
		if tick() {
			fmt.Fprintf(g.stderr, "cmlab restore: restored up to seq %d\n", seq)
		}
	}
}
