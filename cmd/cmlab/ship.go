package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship"
	"github.com/spf13/cobra"
)

type shipOpts struct {
	nats     string
	stream   string
	creds    string
	replicas int
}

func (o *shipOpts) flags(c *cobra.Command, prefix string) {
	f := c.Flags()
	if prefix == "" {
		f.StringVar(&o.nats, "nats", "", "NATS server URL (comma-separated for a cluster)")
	}
	f.StringVar(&o.stream, prefix+"stream", "", "JetStream stream name (default CMLAB_<home-id>)")
	f.StringVar(&o.creds, prefix+"creds", "", "NATS credentials file")
	f.IntVar(&o.replicas, prefix+"replicas", 1, "replicas of the stream when it is created (3 on a three-node cluster)")
}

func (o *shipOpts) options(h home.Home) ship.Options {
	return ship.Options{Home: h, Conn: ship.Conn{URL: o.nats, Creds: o.creds}, Stream: o.stream, Replicas: o.replicas}
}

// newShipCmd builds 'cmlab ship'.
func newShipCmd(g *globalOpts) *cobra.Command {
	o := &shipOpts{}
	c := &cobra.Command{
		Use:   "ship --nats URL",
		Short: "Ship the log to a NATS JetStream stream, following it until interrupted",
		Long: `Follow the home's log (without its lock: a daemon may serve it) and publish
every event, in seq order, to the JetStream stream of the home, subject
cmlab.<home-id>.<type>, with Nats-Msg-Id = the event's id. The stream (file
storage, --replicas) is created if missing; the home gets an id
(state/home-id) if it has none. The last acknowledged seq is kept in
state/ship.json; 'cmlab status' shows the lag. An unreachable server is
retried with backoff; a stream or cursor of another home is refused.

'cmlab serve --ship URL' runs the same shipper inside the daemon.`,
		Example: `  cmlab ship --nats nats://127.0.0.1:4222
  cmlab ship --nats nats://a:4222,nats://b:4222,nats://c:4222 --replicas 3 --creds ~/.nats/cmlab.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.nats == "" {
				return &usageError{"--nats URL is required"}
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := o.options(h)
			opts.Progress = shipProgress(g.stderr)
			s, err := ship.New(opts)
			if err != nil {
				return err
			}
			st := s.State()
			fmt.Fprintf(g.stdout, "shipping home %s to stream %s at %s (from seq %d); interrupt to stop\n", s.HomeID(), st.Stream, o.nats, st.Shipped+1)
			if err := s.Run(ctx); err != nil {
				return err
			}
			st = s.State()
			fmt.Fprintf(g.stdout, "stopped: shipped up to seq %d\n", st.Shipped)
			return nil
		},
	}
	c.SetContext(context.Background())
	o.flags(c, "")
	return c
}

// shipProgress prints the cursor at most once a second, and every change
// of the last error at once.
func shipProgress(w io.Writer) func(ship.State) {
	var last time.Time
	var lastErr string
	return func(st ship.State) {
		if st.LastError != lastErr && st.Retrying {
			fmt.Fprintf(w, "cmlab ship: %s\n", st.LastError)
		}
		lastErr = st.LastError
		if !st.Retrying && time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(w, "cmlab ship: shipped seq %d (lag %d)\n", st.Shipped, st.Lag())
		}
	}
}

// shipSidecar is the shipper of 'serve --ship', run by the daemon.
func shipSidecar(h home.Home, o *shipOpts, l *slog.Logger) (func(context.Context) error, error) {
	opts := o.options(h)
	opts.Progress = shipStateLogger(l, opts.Progress) // serve_log.go
	s, err := ship.New(opts)
	if err != nil {
		return nil, err
	}
	return s.Run, nil
}
