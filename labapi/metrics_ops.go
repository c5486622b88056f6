package labapi

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
)

// The operator's metrics beyond the log (docs/metrics.md): the process
// and Go runtime (client_golang's own collectors), the terminal's output
// and blocks, steps by state, and how old the checkpoint and the read
// models' snapshots are — a checkpoint or snapshot that stops getting
// younger means the next start replays more of the log.

// registerRuntimeCollectors adds the process and Go collectors.
func registerRuntimeCollectors(reg *prometheus.Registry) {
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
}

// terminalCounter counts the terminal's events appended since the daemon
// started. It subscribes after the log's current end (Covered), so it
// replays nothing.
type terminalCounter struct {
	from   uint64
	bytes  atomic.Uint64
	blocks atomic.Uint64
}

func (c *terminalCounter) Covered() uint64 { return c.from }

func (c *terminalCounter) Observe(ev *events.Event) {
	switch ev.Type {
	case events.TypePtyOutput:
		if p, err := events.DecodeAs[*events.PtyOutput](ev); err == nil {
			c.bytes.Add(uint64(len(p.Data)))
		}
	case events.TypePtyBlockBegin:
		c.blocks.Add(1)
	}
}

// watchTerminal subscribes a terminalCounter to eng (live events only).
func watchTerminal(eng *engine.Engine) *terminalCounter {
	c := &terminalCounter{from: eng.Log().LastSeq()}
	if eng.Subscribe(c) != nil {
		return &terminalCounter{}
	}
	return c
}

var (
	descPtyBytes      = prometheus.NewDesc("cmlab_pty_output_bytes_total", "Terminal output bytes made durable since the daemon started.", nil, nil)
	descPtyBlocks     = prometheus.NewDesc("cmlab_pty_blocks_total", "Terminal blocks begun since the daemon started.", nil, nil)
	descPtyOpen       = prometheus.NewDesc("cmlab_pty_blocks_running", "Terminal blocks begun and not ended.", nil, nil)
	descSteps         = prometheus.NewDesc("cmlab_steps", "Durable steps by their last status.", []string{"state"}, nil)
	descCheckpointAge = prometheus.NewDesc("cmlab_checkpoint_age_seconds", "Seconds since the views' checkpoint was written.", nil, nil)
	descSnapshotAge   = prometheus.NewDesc("cmlab_snapshot_age_seconds", "Seconds since a read model's snapshot was written.", []string{"model"}, nil)
)

// opsCollector reports the figures above at each scrape.
type opsCollector struct{ s *Server }

func (c opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPtyBytes, descPtyBlocks, descPtyOpen, descSteps, descCheckpointAge, descSnapshotAge} {
		ch <- d
	}
}

func (c opsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if t := s.terminal; t != nil {
		ch <- prometheus.MustNewConstMetric(descPtyBytes, prometheus.CounterValue, float64(t.bytes.Load()))
		ch <- prometheus.MustNewConstMetric(descPtyBlocks, prometheus.CounterValue, float64(t.blocks.Load()))
	}
	if r := s.opts.Retention; r != nil {
		ch <- prometheus.MustNewConstMetric(descPtyOpen, prometheus.GaugeValue, float64(len(r.OpenBlocks())))
	}
	byState := map[string]int{}
	for _, st := range []string{events.StatusPending, events.StatusExecuting, events.StatusCompleted, events.StatusFailed, events.StatusNeedsReview} {
		byState[st] = 0
	}
	for _, m := range s.opts.Journal.State().Mandates() {
		for _, st := range m.Steps {
			byState[st.Status]++
		}
	}
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(descSteps, prometheus.GaugeValue, float64(n), st)
	}
	h := s.opts.Engine.Home()
	now := time.Now()
	if age, ok := fileAge(h.CheckpointFile(), now); ok {
		ch <- prometheus.MustNewConstMetric(descCheckpointAge, prometheus.GaugeValue, age)
	}
	for model, path := range snapshotFiles(h) {
		if age, ok := fileAge(path, now); ok {
			ch <- prometheus.MustNewConstMetric(descSnapshotAge, prometheus.GaugeValue, age, model)
		}
	}
}

// snapshotFiles are the read models' snapshot files by model name.
func snapshotFiles(h home.Home) map[string]string {
	return map[string]string{"steps": steps.SnapshotFile(h), "terminal": pty.SnapshotFile(h),
		"retention": retention.SnapshotFile(h), "lab": LabStoreFile(h)}
}

// fileAge is the seconds since path was modified; ok is false when it
// does not exist.
func fileAge(path string, now time.Time) (float64, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return now.Sub(fi.ModTime()).Seconds(), true
}
