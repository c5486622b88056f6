package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/ship"
)

// The daemon's log has two readers with different needs:
//
//   - state/daemon.log (rotated) keeps every record at INFO and above as a
//     JSON line: lifecycle, recovery, resumed steps, warnings, and the
//     request log (one line per request; --quiet drops those only).
//   - stderr gets what a person watching the terminal needs: the same
//     records without the request lines, as text. It is written through a
//     bounded queue by its own goroutine, so a terminal nobody reads (a pipe
//     never drained, a stopped pager) never stalls a request: past the
//     queue, lines are dropped from stderr — never from the file — and the
//     next line that gets through says how many.

// stderrQueueLines bounds the lines waiting for stderr.
const stderrQueueLines = 256

// daemonLogger is serve's logger and what closing it takes.
type daemonLogger struct {
	*slog.Logger
	file *daemon.DaemonLog
	err  *stderrQueue
}

// newDaemonLogger opens h's daemon log and builds the logger over it and
// stderr. quiet drops the request lines (from the file; stderr never has
// them).
func newDaemonLogger(h home.Home, stderr io.Writer, quiet bool) (*daemonLogger, error) {
	f, err := daemon.OpenDaemonLog(h, daemon.DaemonLogOptions{})
	if err != nil {
		return nil, err
	}
	q := newStderrQueue(stderr, stderrQueueLines)
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	toFile := slog.Handler(slog.NewJSONHandler(f, opts))
	if quiet {
		toFile = filterHandler{toFile, notRequest}
	}
	toStderr := filterHandler{slog.NewJSONHandler(textLines{q}, opts), notRequest}
	return &daemonLogger{Logger: slog.New(fanout{toFile, toStderr}), file: f, err: q}, nil
}

// Close flushes what stderr can take within a second (a stderr nobody
// reads gets no more) and closes the file.
func (l *daemonLogger) Close() error {
	l.err.close(time.Second)
	return l.file.Close()
}

// notRequest keeps every record but the request log's.
func notRequest(r slog.Record) bool { return r.Message != labapi.RequestLogMessage }

// filterHandler passes the records keep accepts to h.
type filterHandler struct {
	h    slog.Handler
	keep func(slog.Record) bool
}

func (f filterHandler) Enabled(ctx context.Context, l slog.Level) bool { return f.h.Enabled(ctx, l) }
func (f filterHandler) Handle(ctx context.Context, r slog.Record) error {
	if !f.keep(r) {
		return nil
	}
	return f.h.Handle(ctx, r)
}
func (f filterHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return filterHandler{f.h.WithAttrs(a), f.keep}
}
func (f filterHandler) WithGroup(name string) slog.Handler {
	return filterHandler{f.h.WithGroup(name), f.keep}
}

// fanout hands each record to every handler that wants it.
type fanout []slog.Handler

func (fo fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range fo {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (fo fanout) Handle(ctx context.Context, r slog.Record) error {
	var first error
	for _, h := range fo {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

func (fo fanout) WithAttrs(a []slog.Attr) slog.Handler {
	out := make(fanout, len(fo))
	for i, h := range fo {
		out[i] = h.WithAttrs(a)
	}
	return out
}

func (fo fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(fo))
	for i, h := range fo {
		out[i] = h.WithGroup(name)
	}
	return out
}

// textLines turns each JSON line written to it into its text form
// (logLineText) and queues it. slog's JSON handler writes a record in one
// Write, so a Write is whole lines.
type textLines struct{ q *stderrQueue }

func (t textLines) Write(p []byte) (int, error) {
	for _, line := range bytes.SplitAfter(p, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if s, _, ok := logLineText(line); ok {
			t.q.put(s)
		} else {
			t.q.put(string(line))
		}
	}
	return len(p), nil
}

// stderrQueue writes lines to w from its own goroutine; put never blocks.
type stderrQueue struct {
	w       io.Writer
	lines   chan string
	done    chan struct{}
	mu      sync.Mutex
	dropped int
	closed  bool
}

func newStderrQueue(w io.Writer, n int) *stderrQueue {
	q := &stderrQueue{w: w, lines: make(chan string, n), done: make(chan struct{})}
	go q.run()
	return q
}

// put queues line, or counts it dropped when the queue is full (stderr is
// not being read).
func (q *stderrQueue) put(line string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.dropped > 0 && len(q.lines) < cap(q.lines)-1 {
		q.lines <- fmt.Sprintf("(%d log lines were not shown here: stderr was not being read; all are in state/daemon.log)\n", q.dropped)
		q.dropped = 0
	}
	select {
	case q.lines <- line:
	default:
		q.dropped++
	}
}

func (q *stderrQueue) run() {
	defer close(q.done)
	for line := range q.lines {
		if _, err := io.WriteString(q.w, line); err != nil {
			// A closed stderr: drain and drop the rest.
			for range q.lines {
			}
			return
		}
	}
}

// close stops taking lines and waits up to d for the queued ones to be
// written (a writer blocked on a full pipe is left behind: the process is
// about to exit).
func (q *stderrQueue) close(d time.Duration) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	close(q.lines)
	q.mu.Unlock()
	select {
	case <-q.done:
	case <-time.After(d):
	}
}

// logLevels orders the level names slog writes.
var logLevels = map[string]int{"DEBUG": -4, "INFO": 0, "WARN": 4, "WARNING": 4, "ERROR": 8}

// parseLogLevel maps a --level value (debug, info, warn, error) to its rank.
func parseLogLevel(s string) (int, bool) {
	r, ok := logLevels[strings.ToUpper(s)]
	return r, ok
}

// levelRank ranks a level as slog writes it ("INFO", "WARN+2").
func levelRank(s string) int {
	base, off, _ := strings.Cut(s, "+")
	if r, ok := logLevels[base]; ok {
		n, _ := strconv.Atoi(off)
		return r + n
	}
	if base, off, ok := strings.Cut(s, "-"); ok {
		if r, ok := logLevels[base]; ok {
			n, _ := strconv.Atoi(off)
			return r - n
		}
	}
	return 0
}

// logLineText renders one JSON line of the daemon log as text:
//
//	2026-11-28 02:15:13.123 WARN  shipping: NATS unreachable; retrying err="…"
//
// (local time, the level padded to five, the message, then key=value in
// the record's order; a value is quoted when it has a space, a quote or an
// equals sign, and objects and arrays stay JSON). It also returns the
// line's level; ok is false for a line that is not a JSON object.
func logLineText(line []byte) (text, level string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", false
	}
	var ts, msg string
	var attrs []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", "", false
		}
		var s string
		isString := json.Unmarshal(raw, &s) == nil
		switch {
		case key == "time" && isString:
			ts = s
		case key == "level" && isString:
			level = s
		case key == "msg" && isString:
			msg = s
		case isString:
			attrs = append(attrs, key+"="+textValue(s))
		default:
			var c bytes.Buffer
			if json.Compact(&c, raw) != nil {
				c.Reset()
				c.Write(raw)
			}
			attrs = append(attrs, key+"="+c.String())
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		ts = t.Local().Format("2006-01-02 15:04:05.000")
	}
	var b strings.Builder
	b.WriteString(ts)
	fmt.Fprintf(&b, " %-5s %s", level, msg)
	for _, a := range attrs {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	b.WriteByte('\n')
	return b.String(), level, true
}

// textValue quotes s when it would not read as one value.
func textValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return strconv.Quote(s)
	}
	return s
}

// stopOnSignal returns a context cancelled by SIGINT or SIGTERM ('cmlab
// stop' sends SIGTERM), logging which one as the daemon's "stopping" line.
// Later signals are ignored while the daemon drains. stop releases the
// signals.
func stopOnSignal(parent context.Context, l *slog.Logger) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			how := "SIGTERM ('cmlab stop' or the service manager)"
			if s == os.Interrupt {
				how = "SIGINT (Ctrl+C)"
			}
			l.Info("stopping: drain requests, end terminals, checkpoint", "signal", how)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); <-done; signal.Stop(sigs) }
}

// logStopped is the daemon's last line.
func logStopped(l *slog.Logger, err error) {
	if err != nil {
		l.Error("stopped", "pid", os.Getpid(), "err", err)
		return
	}
	l.Info("stopped", "pid", os.Getpid())
}

// shipStateLogger wraps a shipper's Progress so that the daemon log says
// when shipping starts, fails (a NATS outage: WARN, once per outage), comes
// back, or stops for good. Progress runs on the shipper's goroutine.
func shipStateLogger(l *slog.Logger, next func(ship.State)) func(ship.State) {
	var started, retrying, stopped bool
	return func(st ship.State) {
		switch {
		case st.Stopped && !stopped:
			l.Error("shipping stopped: it will not retry; see 'cmlab status'", "url", st.URL, "stream", st.Stream, "err", st.LastError)
		case st.Retrying && !retrying:
			l.Warn("shipping: NATS unreachable or failing; retrying with backoff (the daemon serves on)", "url", st.URL, "shipped_seq", st.Shipped, "err", st.LastError)
		case !st.Retrying && !st.Stopped && retrying:
			l.Info("shipping recovered", "url", st.URL, "shipped_seq", st.Shipped, "last_seq", st.LastSeq)
		case !st.Retrying && !st.Stopped && !started:
			l.Info("shipping to NATS JetStream", "url", st.URL, "stream", st.Stream, "shipped_seq", st.Shipped, "last_seq", st.LastSeq)
		}
		if !st.Retrying && !st.Stopped {
			started = true
		}
		retrying, stopped = st.Retrying, st.Stopped
		if next != nil {
			next(st)
		}
	}
}
