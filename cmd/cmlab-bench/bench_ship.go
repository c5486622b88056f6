package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/bench"
	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/ship"
	"github.com/cmlab/cmlab/wal"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

type benchShipOpts struct {
	backlog  int
	clients  int
	requests int
	keep     bool
}

type benchShipResult struct {
	Backlog          int     `json:"backlogEvents"`
	BacklogSeconds   float64 `json:"backlogSeconds"`
	BacklogPerS      float64 `json:"backlogEventsPerSecond"`
	Clients          int     `json:"clients"`
	Requests         int     `json:"requests"`
	Errors           int64   `json:"errors"`
	PostedPerS       float64 `json:"postedEventsPerSecond"`
	ShippedPerS      float64 `json:"shippedEventsPerSecond"`
	LagP50           uint64  `json:"lagP50Events"`
	LagP99           uint64  `json:"lagP99Events"`
	LagMax           uint64  `json:"lagMaxEvents"`
	CatchUpMs        float64 `json:"catchUpMs"`
	LagSamples       int     `json:"lagSamples"`
	LiveShippedTotal uint64  `json:"liveShipped"`
}

// newBenchShipCmd builds 'cmlab-bench ship'.
func newBenchShipCmd(g *globalOpts) *cobra.Command {
	o := &benchShipOpts{}
	c := &cobra.Command{
		Use:   "ship",
		Short: "Ship the log to an in-process NATS JetStream server: events/s, and the lag under the bench api load",
		Long: `Start an in-process NATS server with JetStream (file storage in a scratch
directory, 127.0.0.1), then:

  backlog: ship a log of --backlog mixed Lab events from the first seq and
           report events/s;
  live:    run a daemon with 'serve --ship' over a fresh home, send
           --requests POST /api/feedback from --clients clients (as 'bench
           api'), sample the lag (log last seq − shipped seq) every 10 ms,
           and report events/s shipped, the lag's p50/p99/max and how long
           after the last POST was answered the stream held every event.`,
		Example: `  cmlab-bench ship
  cmlab-bench ship --backlog 20000 --requests 5000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "cmlab-bench-ship-")
			if err != nil {
				return err
			}
			if !o.keep {
				defer os.RemoveAll(dir)
			}
			res, err := benchShip(cmd.Context(), dir, o)
			if err != nil {
				return err
			}
			return printResult(g, res, printBenchShip)
		},
	}
	c.SetContext(context.Background())
	f := c.Flags()
	f.IntVar(&o.backlog, "backlog", 100000, "events in the backlog phase")
	f.IntVar(&o.clients, "clients", 32, "concurrent POST clients in the live phase")
	f.IntVar(&o.requests, "requests", 20000, "POSTs in the live phase")
	f.BoolVar(&o.keep, "keep", false, "keep the scratch directory")
	return c
}

// printBenchShip prints the result of 'cmlab-bench ship' as text.
func printBenchShip(w io.Writer, res *benchShipResult) {
	fmt.Fprintf(w, "backlog: %d events shipped in %.2fs: %.0f events/s\n", res.Backlog, res.BacklogSeconds, res.BacklogPerS)
	fmt.Fprintf(w, "live: %d POST /api/feedback from %d clients (%d errors): %.0f events/s posted, %.0f events/s shipped\n",
		res.Requests, res.Clients, res.Errors, res.PostedPerS, res.ShippedPerS)
	fmt.Fprintf(w, "  lag (log last seq − shipped, %d samples every 10 ms): p50 %d, p99 %d, max %d events; all shipped %.1f ms after the last answer\n",
		res.LagSamples, res.LagP50, res.LagP99, res.LagMax, res.CatchUpMs)
}

func benchShip(ctx context.Context, dir string, o *benchShipOpts) (*benchShipResult, error) {
	if o.backlog <= 0 || o.clients <= 0 || o.requests <= 0 {
		return nil, &usageError{"--backlog, --clients and --requests must be positive"}
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	go ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("bench ship: nats server not ready")
	}
	conn := ship.Conn{URL: fmt.Sprintf("nats://127.0.0.1:%d", ns.Addr().(*net.TCPAddr).Port)}
	res := &benchShipResult{Backlog: o.backlog, Clients: o.clients, Requests: o.requests}

	// Backlog.
	bh := home.Home{Dir: filepath.Join(dir, "backlog")}
	e, err := engine.Open(ctx, engine.Options{Home: bh, NoSync: true})
	if err != nil {
		return nil, err
	}
	batch := make([]*events.Event, 0, 256)
	for ev := range projections.Workload(projections.WorkloadMixedLab, 1, o.backlog) {
		if batch = append(batch, ev); len(batch) == cap(batch) {
			if _, err := e.Append(ctx, batch...); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if _, err := e.Append(ctx, batch...); err != nil {
			return nil, err
		}
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	s, err := ship.New(ship.Options{Home: bh, Conn: conn})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := shipUntilCaughtUp(ctx, s, func() uint64 { return uint64(o.backlog) }, nil); err != nil {
		return nil, err
	}
	res.BacklogSeconds = time.Since(start).Seconds()
	res.BacklogPerS = float64(o.backlog) / res.BacklogSeconds

	// Live: serve --ship under the bench api load.
	lh := home.Home{Dir: filepath.Join(dir, "live")}
	ls, err := ship.New(ship.Options{Home: lh, Conn: conn})
	if err != nil {
		return nil, err
	}
	d, err := daemon.Start(ctx, daemon.Options{Home: lh, Listen: "127.0.0.1:0", Sidecar: ls.Run})
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	info := d.Info
	tok := d.Home.Server.LabToken() // it opens POST /api/feedback, and the operator token never crosses TCP
	r, err := wal.OpenReader(lh.WALDir())
	if err != nil {
		return nil, err
	}
	// The log's last seq is sampled as the seq before the load plus the
	// POSTs answered (each appended one event before its answer): cheap,
	// and never above the real last seq, so the lag is never overstated
	// by more than the requests in flight.
	base, err := r.LastSeq()
	if err != nil {
		return nil, err
	}
	var acked atomic.Uint64
	var lags []uint64
	sctx, stopSampling := context.WithCancel(ctx)
	var sw sync.WaitGroup
	defer func() { stopSampling(); sw.Wait() }()
	sw.Add(1)
	go func() {
		defer sw.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if last, sh := base+acked.Load(), ls.State().Shipped; last > sh {
				lags = append(lags, last-sh)
			} else {
				lags = append(lags, 0)
			}
		}
	}()
	shipped0 := ls.State().Shipped
	start = time.Now()
	_, errs, _, err := bench.PostFeedback(ctx, bench.FeedbackLoad{URL: "http://" + info.Listen, Token: tok,
		IDPrefix: "bench-ship", Requests: o.requests, Clients: o.clients, OnAck: func() { acked.Add(1) }})
	if err != nil {
		return nil, err
	}
	posted := time.Now()
	res.Errors = errs
	res.PostedPerS = float64(o.requests-int(res.Errors)) / posted.Sub(start).Seconds()
	lastNow, err := r.LastSeq()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for ls.State().Shipped < lastNow {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench ship: shipped %d of %d a minute after the load: %s", ls.State().Shipped, lastNow, ls.State().LastError)
		}
		time.Sleep(time.Millisecond)
	}
	caught := time.Now()
	stopSampling()
	sw.Wait()
	res.CatchUpMs = float64(caught.Sub(posted).Microseconds()) / 1000
	res.LiveShippedTotal = ls.State().Shipped - shipped0
	res.ShippedPerS = float64(res.LiveShippedTotal) / caught.Sub(start).Seconds()
	if len(lags) > 0 {
		sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
		res.LagSamples, res.LagP50, res.LagP99, res.LagMax = len(lags), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1]
	}
	if err := d.Stop(); err != nil {
		return nil, err
	}
	return res, nil
}

// shipUntilCaughtUp runs s until it has shipped last().
func shipUntilCaughtUp(ctx context.Context, s *ship.Shipper, last func() uint64, _ func()) error {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for s.State().Shipped < last() {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("bench ship: shipper stopped at seq %d: %v", s.State().Shipped, err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			return fmt.Errorf("bench ship: shipped %d of %d in 5 minutes: %s", s.State().Shipped, last(), s.State().LastError)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	return <-done
}
