package labapi

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/cmlab/cmlab/console"
	"github.com/cmlab/cmlab/events"
)

// A full-screen block is rendered at the size of the pty its shell ran in,
// as the log recorded it: the cols and rows of the shell's
// pty.session.started. (The terminal manager never resizes a pty; the log
// has no resize event. A shell started by a daemon configured with another
// size has its own.)

// shellSizesMax bounds the sizes kept (a shell's size never changes, so a
// kept one is never stale; the map is emptied when full).
const shellSizesMax = 256

type shellSizes struct {
	mu sync.Mutex
	m  map[string][2]int // conversation + "/" + shell id → cols, rows
}

// shellSize returns the pty size of shell shellID of conv (any shell of
// conv when shellID is ""), from its pty.session.started: the
// conversation's session starts read backwards from the first event after
// ts (the timestamp index), within a budget. The terminal manager's
// default size when the log does not say (ok false).
func (s *Server) shellSize(ctx context.Context, conv, shellID string, ts int64) (cols, rows int, ok bool) {
	key := conv + "/" + shellID
	c := &s.console.sizes
	c.mu.Lock()
	v, hit := c.m[key]
	c.mu.Unlock()
	if hit && shellID != "" {
		return v[0], v[1], true
	}
	lg := s.opts.Engine.Log()
	first, last := lg.FirstSeq(), lg.LastSeq()
	q := console.LogQuery{Conv: conv, TypePrefix: events.TypePtySessionStarted, Budget: 50 * time.Millisecond}
	if ts > 0 {
		q.ToTS = ts
		if seq, err := s.opts.Retention.FirstTS(ctx, lg.Events, first, last, func(t int64) bool { return t > ts }); err == nil && seq != 0 {
			q.Before = seq
		}
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		p, err := s.logReader().Page(ctx, first, last, q)
		if err != nil {
			break
		}
		for _, e := range p.Events {
			var d events.PtySessionStarted
			if e.Checksum != "ok" || json.Unmarshal(e.Data, &d) != nil || d.Cols <= 0 || d.Rows <= 0 {
				continue
			}
			if shellID == "" || d.ShellID == shellID {
				c.mu.Lock()
				if c.m == nil || len(c.m) >= shellSizesMax {
					c.m = map[string][2]int{}
				}
				c.m[conv+"/"+d.ShellID] = [2]int{d.Cols, d.Rows}
				c.mu.Unlock()
				return d.Cols, d.Rows, true
			}
		}
		if p.Next == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		q.Before = p.Next
	}
	return console.DefaultCols, console.DefaultRows, false
}
