package labapi

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cmlab/cmlab/wal"
)

// metrics are the daemon's own counters; the log's come from Log().Stats().
// Exposed at GET /metrics in the Prometheus text format (version 0.0.4).
type metrics struct {
	mu        sync.Mutex
	http      map[[2]string]uint64 // {route, code} → requests
	appendLat wal.Histogram        // seconds per API append (queue + write + fsync + apply)

	appendErrors atomic.Uint64
	sseClients   atomic.Int64
	sseDropped   atomic.Uint64
	sseSent      atomic.Uint64
}

var appendBounds = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5}

func newMetrics() *metrics {
	return &metrics{http: map[[2]string]uint64{},
		appendLat: wal.Histogram{Bounds: appendBounds, Counts: make([]uint64, len(appendBounds)+1)}}
}

func (m *metrics) observeHTTP(route string, status int) {
	m.mu.Lock()
	m.http[[2]string{route, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

func (m *metrics) observeAppend(d time.Duration, n int, err error) {
	if err != nil {
		m.appendErrors.Add(1)
		return
	}
	v := d.Seconds()
	m.mu.Lock()
	h := &m.appendLat
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += v
	m.mu.Unlock()
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s.writeMetrics(w)
	return nil
}

func (s *Server) writeMetrics(w io.Writer) {
	st := s.opts.Engine.Log().Stats()
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# HELP cmlab_wal_appends_total Events made durable by the log since open.\n# TYPE cmlab_wal_appends_total counter\ncmlab_wal_appends_total %d\n", st.Appends)
	p("# HELP cmlab_wal_groups_total Group commits (one write + one fsync each).\n# TYPE cmlab_wal_groups_total counter\ncmlab_wal_groups_total %d\n", st.Groups)
	p("# HELP cmlab_wal_bytes_total Entry bytes written.\n# TYPE cmlab_wal_bytes_total counter\ncmlab_wal_bytes_total %d\n", st.Bytes)
	p("# HELP cmlab_wal_fsync_errors_total Failed fsyncs.\n# TYPE cmlab_wal_fsync_errors_total counter\ncmlab_wal_fsync_errors_total %d\n", st.FsyncErrors)
	p("# HELP cmlab_wal_last_seq Sequence of the last durable event.\n# TYPE cmlab_wal_last_seq gauge\ncmlab_wal_last_seq %d\n", s.opts.Engine.Log().LastSeq())
	degraded := 0
	if s.errFn() != nil {
		degraded = 1
	}
	p("# HELP cmlab_degraded 1 when the log cannot make writes durable.\n# TYPE cmlab_degraded gauge\ncmlab_degraded %d\n", degraded)
	writeHistogram(w, "cmlab_wal_fsync_seconds", "Time of each group commit's fsync.", st.FsyncSeconds)
	writeHistogram(w, "cmlab_wal_group_size", "Events per group commit.", st.GroupSize)

	m := s.metrics
	m.mu.Lock()
	lat := m.appendLat
	lat.Counts = append([]uint64(nil), lat.Counts...)
	keys := make([][2]string, 0, len(m.http))
	for k := range m.http {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	counts := make([]uint64, len(keys))
	for i, k := range keys {
		counts[i] = m.http[k]
	}
	m.mu.Unlock()
	writeHistogram(w, "cmlab_api_append_seconds", "Latency of API appends, from request to durable and projected.", lat)
	p("# HELP cmlab_api_append_errors_total API appends that failed.\n# TYPE cmlab_api_append_errors_total counter\ncmlab_api_append_errors_total %d\n", m.appendErrors.Load())
	p("# HELP cmlab_http_requests_total HTTP requests by route pattern and status code.\n# TYPE cmlab_http_requests_total counter\n")
	for i, k := range keys {
		p("cmlab_http_requests_total{route=%s,code=%q} %d\n", promQuote(k[0]), k[1], counts[i])
	}
	p("# HELP cmlab_sse_clients Connected event-stream clients.\n# TYPE cmlab_sse_clients gauge\ncmlab_sse_clients %d\n", m.sseClients.Load())
	p("# HELP cmlab_sse_dropped_total Event-stream clients dropped for being too slow.\n# TYPE cmlab_sse_dropped_total counter\ncmlab_sse_dropped_total %d\n", m.sseDropped.Load())
	p("# HELP cmlab_sse_events_total Events sent on event streams.\n# TYPE cmlab_sse_events_total counter\ncmlab_sse_events_total %d\n", m.sseSent.Load())
}

func promQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func writeHistogram(w io.Writer, name, help string, h wal.Histogram) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	cum := h.Cumulative()
	for i, b := range h.Bounds {
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum[i])
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, h.Count, name, strconv.FormatFloat(h.Sum, 'g', -1, 64), name, h.Count)
}
