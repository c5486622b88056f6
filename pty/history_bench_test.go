package pty_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
)

// BenchmarkHistoryReadBack: reads of the dropped past of a conversation
// of 5,000 blocks (4,900 dropped), each the first after a start or a drop
// (checked: the dropped records decoded and compared with their sums) or
// a later one (vouched: the bytes read checked by their CRC).
func BenchmarkHistoryReadBack(b *testing.B) {
	benchReadBack(b, historyHome(b, 5000), 4000, "needle 7\n")
}

// BenchmarkHistoryReadBackOutputs is BenchmarkHistoryReadBack on 2,000
// blocks (1,900 dropped) that each wrote their output in 50 pieces, as a
// busy terminal does: most lines of the view are outputs.
func BenchmarkHistoryReadBackOutputs(b *testing.B) {
	h := home.Home{Dir: b.TempDir()}
	eng, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		b.Fatal(err)
	}
	ctx, zero := context.Background(), 0
	var spool int64
	batch := []*events.Event{events.MustNew("conv1", &events.PtySessionStarted{ConversationID: "conv1", ShellID: "sh", Pid: 7, Cols: 80, Rows: 24, Cwd: "/w"})}
	for i := 1; i <= 2000; i++ {
		id := fmt.Sprintf("blk_conv1_%05d", i)
		blk := events.Block{BlockID: id, Seq: i, Mode: "block", ShellID: "sh", Cmd: fmt.Sprintf("make %d", i), Cwd: "/w",
			TsBegin: int64(i), Status: events.BlockRunning, OutputPath: "blocks/" + id + ".out", SpoolBegin: spool}
		batch = append(batch, events.MustNew("conv1", &events.PtyBlockBegin{Block: blk}))
		for k := range 50 {
			out := fmt.Sprintf("needle %d piece %d\n", i, k)
			batch = append(batch, events.MustNew("conv1", &events.PtyOutput{BlockID: id, SpoolOffset: spool, Data: []byte(out)}))
			spool += int64(len(out))
		}
		p := fmt.Sprintf("__FWS_PROMPT__ ts=%d cwd_b64=L3c= exit=0\n", i)
		blk.Status, blk.ExitCode, blk.TsEnd, blk.SpoolEnd = events.BlockCompleted, &zero, int64(i), spool
		batch = append(batch, events.MustNew("conv1", &events.PtyPrompt{PromptTS: int64(i), Cwd: "/w", ExitCode: &zero, SpoolOffset: spool, Line: p, BlockID: id}),
			events.MustNew("conv1", &events.PtyBlockEnd{Block: blk}))
		spool += int64(len(p))
		if len(batch) > 2000 || i == 2000 {
			if _, err := eng.Append(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	eng.Close()
	benchReadBack(b, h, 1500, "needle 7 piece 3\n")
}

// benchReadBack times reads of conv1's past in h: blocks 5 and late, the
// list from 0, a search for q.
func benchReadBack(b *testing.B, h home.Home, late int, q string) {
	ctx := context.Background()
	for _, r := range []struct {
		name string
		read func(*pty.Manager) error
	}{
		{"block-5", func(m *pty.Manager) error { _, err := m.Block(ctx, "conv1", "blk_conv1_00005"); return err }},
		{fmt.Sprintf("block-%d", late), func(m *pty.Manager) error {
			_, err := m.Block(ctx, "conv1", fmt.Sprintf("blk_conv1_%05d", late))
			return err
		}},
		{"since-0-limit-3", func(m *pty.Manager) error { _, err := m.BlocksSince(ctx, "conv1", 0, 3); return err }},
		{"since-0", func(m *pty.Manager) error { _, err := m.BlocksSince(ctx, "conv1", 0, 0); return err }},
		{"search", func(m *pty.Manager) error { _, err := m.Search(ctx, "conv1", q, ""); return err }},
	} {
		for _, checked := range []bool{true, false} {
			name := r.name + "/vouched"
			if checked {
				name = r.name + "/checked"
			}
			b.Run(name, func(b *testing.B) {
				mgr := openHistory(b, h)
				if err := r.read(mgr); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				cpu0 := cpuTime()
				for range b.N {
					if checked {
						mgr.ForgetVouches()
					}
					if err := r.read(mgr); err != nil {
						b.Fatal(err)
					}
				}
				// The machine is shared: CPU time is the figure to compare.
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkHistoryReadBackFirst: the first read of a conversation's
// dropped past after a start (what was vouched for forgotten before each
// read), at 1,000, 10,000 and 100,000 dropped blocks, each history built
// once: a block in the middle of the past, its output, a page of the
// block list there. A read that checks only what it touches costs the
// same at every size.
func BenchmarkHistoryReadBackFirst(b *testing.B) {
	ctx := context.Background()
	for _, dropped := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("dropped-%d", dropped), func(b *testing.B) {
			h := historyHome(b, dropped+100)
			mgr := openHistory(b, h)
			mid := fmt.Sprintf("blk_conv1_%05d", dropped/2)
			for _, r := range []struct {
				name string
				read func() error
			}{
				{"block", func() error { _, err := mgr.Block(ctx, "conv1", mid); return err }},
				{"output", func() error { _, err := mgr.BlockOutput(ctx, "conv1", mid, 0, 0); return err }},
				{"since-limit-50", func() error { _, err := mgr.BlocksSince(ctx, "conv1", dropped/2, 50); return err }},
			} {
				b.Run(r.name, func(b *testing.B) {
					if err := r.read(); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					cpu0 := cpuTime()
					for range b.N {
						mgr.ForgetVouches()
						if err := r.read(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}
