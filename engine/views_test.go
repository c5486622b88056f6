package engine

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
)

// TestProjectionEMFILEDoesNotFailTheLog: a view file that cannot be opened
// (EMFILE, injected through Options.ViewOpenFile) after the events were
// fsynced leaves the log healthy and the append acknowledged; the views
// lag (ViewsErr), an append that needs them current (feedback) is refused
// with ErrViewsBehind and appends nothing, and once opens work again the
// views catch up on their own with exactly the log's bytes.
func TestProjectionEMFILEDoesNotFailTheLog(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	var failing atomic.Bool
	var refused atomic.Int64
	open := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if failing.Load() && strings.Contains(name, "conv_2") {
			refused.Add(1)
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
		}
		return os.OpenFile(name, flag, perm)
	}
	e, err := Open(context.Background(), Options{Home: h, Now: fixedClock(), ViewOpenFile: open, CheckpointInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	out := func(conv, data string) *events.Event {
		return events.MustNew(conv, &events.PtyOutput{Data: []byte(data)})
	}
	mustAppend(t, e, out("conv_1", "a"))
	failing.Store(true)
	seqs, err := e.Append(context.Background(), out("conv_2", "b"))
	if err != nil {
		t.Fatalf("append whose projection failed after the fsync: %v (it is durable: acknowledge it)", err)
	}
	if e.Err() != nil {
		t.Fatalf("log failed by a projection error: %v", e.Err())
	}
	if err := e.ViewsErr(); !errors.Is(err, ErrViewsBehind) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("ViewsErr = %v, want ErrViewsBehind wrapping EMFILE", err)
	}
	if refused.Load() == 0 {
		t.Fatal("the seam was never asked")
	}
	if ev, err := e.Log().Read(seqs[0]); err != nil || string(ev.Data) == "" {
		t.Fatalf("acknowledged event not in the log: %v", err)
	}
	// More appends while the views lag: acknowledged, in the log.
	mustAppend(t, e, out("conv_1", "c"))
	last := e.Log().LastSeq()
	fb := events.MustNew("lab_s", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_1", Notes: "n"}})
	if _, err := e.Append(context.Background(), fb); !errors.Is(err, ErrViewsBehind) {
		t.Fatalf("feedback append while the views lag: %v, want ErrViewsBehind", err)
	}
	if e.Log().LastSeq() != last {
		t.Fatal("a refused feedback append reached the log")
	}
	failing.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for e.ViewsErr() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.ViewsErr(); err != nil {
		t.Fatalf("views did not catch up: %v", err)
	}
	if got := string(readView(t, h, projections.PtySpoolView("conv_1"))); got != "ac" {
		t.Fatalf("conv_1 spool %q, want %q", got, "ac")
	}
	if got := string(readView(t, h, projections.PtySpoolView("conv_2"))); got != "b" {
		t.Fatalf("conv_2 spool %q, want %q", got, "b")
	}
	mustAppend(t, e, fb)
	if got := string(readView(t, h, projections.FeedbackView)); !strings.Contains(got, `"fb_1"`) {
		t.Fatalf("feedback after catch-up: %q", got)
	}
	if e.Err() != nil {
		t.Fatalf("log failed: %v", e.Err())
	}
}
