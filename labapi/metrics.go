package labapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cmlab/cmlab/wal"
)

// metrics are the daemon's own instruments, in a registry of this server's
// (never the process-wide default one), exposed at GET /metrics by
// prometheus/client_golang. The log's figures are read from Log().Stats()
// at each scrape (logCollector). docs/metrics.md lists every name.
type metrics struct {
	reg          *prometheus.Registry
	http         *prometheus.CounterVec // {route, code}
	appendLat    prometheus.Histogram   // seconds per API append (queue + write + fsync + apply)
	appendErrors prometheus.Counter

	// The event stream counts with atomics (events.go, tests); the
	// registry reads them.
	sseClients atomic.Int64
	sseDropped atomic.Uint64
	sseSent    atomic.Uint64

	serverOnce sync.Once // registers what needs the Server (logCollector)
}

var appendBounds = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.http = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cmlab_http_requests_total",
		Help: "HTTP requests by route pattern and status code."}, []string{"route", "code"})
	m.appendLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cmlab_api_append_seconds",
		Help: "Latency of API appends, from request to durable and projected.", Buckets: appendBounds})
	m.appendErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "cmlab_api_append_errors_total",
		Help: "API appends that failed."})
	registerRuntimeCollectors(m.reg) // metrics_ops.go
	m.reg.MustRegister(m.http, m.appendLat, m.appendErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cmlab_sse_clients", Help: "Connected event-stream clients."},
			func() float64 { return float64(m.sseClients.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cmlab_sse_dropped_total", Help: "Event-stream clients dropped for being too slow."},
			func() float64 { return float64(m.sseDropped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cmlab_sse_events_total", Help: "Events sent on event streams."},
			func() float64 { return float64(m.sseSent.Load()) }))
	return m
}

func (m *metrics) observeHTTP(route string, status int) {
	m.http.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

func (m *metrics) observeAppend(d time.Duration, n int, err error) {
	if err != nil {
		m.appendErrors.Inc()
		return
	}
	m.appendLat.Observe(d.Seconds())
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	m := s.metrics
	m.serverOnce.Do(func() { m.reg.MustRegister(logCollector{s}, shipCollector{s}, opsCollector{s}) })
	w.Header().Set("Cache-Control", "no-store")
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

// logCollector reports the log's and the terminal's figures as they are at
// the scrape.
type logCollector struct{ s *Server }

var (
	descAppends     = prometheus.NewDesc("cmlab_wal_appends_total", "Events made durable by the log since open.", nil, nil)
	descGroups      = prometheus.NewDesc("cmlab_wal_groups_total", "Group commits (one write + one fsync each).", nil, nil)
	descBytes       = prometheus.NewDesc("cmlab_wal_bytes_total", "Entry bytes written.", nil, nil)
	descFsyncErrors = prometheus.NewDesc("cmlab_wal_fsync_errors_total", "Failed fsyncs.", nil, nil)
	descLastSeq     = prometheus.NewDesc("cmlab_wal_last_seq", "Sequence of the last durable event.", nil, nil)
	descDegraded    = prometheus.NewDesc("cmlab_degraded", "1 when the log cannot make writes durable.", nil, nil)
	descFsync       = prometheus.NewDesc("cmlab_wal_fsync_seconds", "Time of each group commit's fsync.", nil, nil)
	descGroupSize   = prometheus.NewDesc("cmlab_wal_group_size", "Events per group commit.", nil, nil)
	descShells      = prometheus.NewDesc("cmlab_pty_shells", "Conversations with a running shell (slots in use).", nil, nil)
	descShellsMax   = prometheus.NewDesc("cmlab_pty_shells_max", "Most conversations with a running shell at once.", nil, nil)
)

func (c logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppends, descGroups, descBytes, descFsyncErrors, descLastSeq, descDegraded, descFsync, descGroupSize, descShells, descShellsMax} {
		ch <- d
	}
}

func (c logCollector) Collect(ch chan<- prometheus.Metric) {
	lg := c.s.opts.Engine.Log()
	st := lg.Stats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descAppends, st.Appends)
	counter(descGroups, st.Groups)
	counter(descBytes, st.Bytes)
	counter(descFsyncErrors, st.FsyncErrors)
	ch <- prometheus.MustNewConstMetric(descLastSeq, prometheus.GaugeValue, float64(lg.LastSeq()))
	degraded := 0.0
	if c.s.errFn() != nil {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, degraded)
	ch <- constHistogram(descFsync, st.FsyncSeconds)
	ch <- constHistogram(descGroupSize, st.GroupSize)
	if p := c.s.opts.Pty; p != nil {
		sl := p.Slots(context.Background())
		ch <- prometheus.MustNewConstMetric(descShells, prometheus.GaugeValue, float64(len(sl.Shells)))
		ch <- prometheus.MustNewConstMetric(descShellsMax, prometheus.GaugeValue, float64(sl.MaxShells))
	}
}

// constHistogram turns one of the log's histograms into a metric.
func constHistogram(d *prometheus.Desc, h wal.Histogram) prometheus.Metric {
	cum := h.Cumulative()
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = cum[i]
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}
