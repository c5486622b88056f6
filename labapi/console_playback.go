package labapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/console"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/pty"
)

// Playback of a whole conversation or one block (issue 30 §5), rendered
// on the server (console.Recording):
//
//	GET /api/console/pty/{conversationId}/recording?block=&t=
//	    the recording's outline {start, duration, cols, rows, partial, frames:[{t, end}]}
//	    and the terminal at t ms (default: the end) rendered: {frame, at, html}.
//	GET /api/console/pty/{conversationId}/playback?block=&from=&speed=
//	    text/event-stream: "meta" (the outline without frames), then one "frame"
//	    {i, t, html} at each frame's time from t=from (gaps of more than
//	    playbackIdleMax shortened to it, as asciinema's idle limit does;
//	    speed 0.25–16), then "end". A client that falls behind gets the
//	    latest frame due, not every one.
//
// The recording is read from the log (console.LogReader: the
// conversation's terminal events between its first block's begin and its
// last block's end) for each request and dropped after it; at most
// playbackMax requests hold one at once.

const (
	playbackMax     = 4
	playbackIdleMax = 2 * time.Second
	// playbackReadBudget bounds the log read of one recording.
	playbackReadBudget = 3 * time.Second
	// playbackTail is how long after a finished conversation's last
	// block its terminal events are looked for (typing after it).
	playbackTail = 10 * time.Minute
)

func (s *Server) registerConsolePlaybackRoutes() {
	s.console.playing = make(chan struct{}, playbackMax)
	s.route("GET /api/console/pty/{conversationId}/recording", authAlways, ptyRoute(s, s.consoleRecording))
	s.route("GET /api/console/pty/{conversationId}/playback", authAlways, s.consolePlayback)
}

// holdPlayback takes one of the playbackMax places.
func (s *Server) holdPlayback() (func(), error) {
	select {
	case s.console.playing <- struct{}{}:
		return func() { <-s.console.playing }, nil
	default:
		return nil, NewError(CodeBusy, fmt.Sprintf("%d terminal playbacks are running; this one was not started", playbackMax),
			"Close another playback (a console tab on a terminal) and try again.")
	}
}

// recordingOutline is a recording without its output.
type recordingOutline struct {
	Conversation string `json:"conversation"`
	Block        string `json:"block,omitempty"`
	*console.Recording
	Events int `json:"events"` // terminal events read
}

// loadRecording reads the recording of conv (of block, when set) from the
// log.
func (s *Server) loadRecording(ctx context.Context, m *pty.Manager, conv, block string) (recordingOutline, error) {
	var (
		from, to int64
		running  bool
		cols     int
		rows     int
	)
	if block != "" {
		br, err := m.Block(ctx, conv, block)
		if err != nil {
			return recordingOutline{}, err
		}
		b := br.Block
		from, to, running = b.TsBegin, b.TsEnd, b.TsEnd == 0
		cols, rows, _ = s.shellSize(ctx, conv, b.ShellID, b.TsBegin)
	} else {
		// A conversation without a terminal is not found before any
		// of the log is read for it.
		if _, err := m.ReadSpoolView(ctx, conv, 0, 1, true); err != nil {
			return recordingOutline{}, err
		}
		st, err := m.Status(ctx, conv)
		if err != nil {
			return recordingOutline{}, err
		}
		running = st.ShellAlive || st.Mode != pty.ModeIdle
		if st.Blocks > 0 {
			firstB, err := m.BlocksSince(ctx, conv, 0, 1)
			if err != nil {
				return recordingOutline{}, err
			}
			lastB, err := m.BlocksSince(ctx, conv, st.Blocks-1, 1)
			if err != nil {
				return recordingOutline{}, err
			}
			if len(firstB.Blocks) == 1 && len(lastB.Blocks) == 1 {
				// The shell starts just before the first block.
				fb := firstB.Blocks[0]
				cols, rows, _ = s.shellSize(ctx, conv, fb.ShellID, fb.TsBegin)
				from = fb.TsBegin - time.Minute.Milliseconds()
				to = lastB.Blocks[0].TsEnd
				if to != 0 {
					to += playbackTail.Milliseconds()
				}
			}
		}
	}
	lg := s.opts.Engine.Log()
	first, last := lg.FirstSeq(), lg.LastSeq()
	q := console.LogQuery{Conv: conv, TypePrefix: "pty.", FromTS: max(from, 0), Budget: playbackReadBudget, Limit: console.MaxPageSize}
	if !running && to > 0 {
		if seq, err := s.opts.Retention.FirstTS(ctx, lg.Events, first, last, func(t int64) bool { return t > to }); err == nil && seq != 0 {
			q.Before = seq
		}
	}
	var (
		evs     []*events.Event
		size    int
		partial bool
	)
	next, cut, err := s.logReader().Events(ctx, first, last, q, func(ev *events.Event) bool {
		if ev.TS < q.FromTS {
			return false // past the conversation's start (the log is in time order)
		}
		if size += len(ev.Data); size > 2*console.MaxRecordingBytes {
			partial = true
			return false
		}
		evs = append(evs, ev)
		return true
	})
	if err != nil {
		return recordingOutline{}, err
	}
	if cut && next != 0 {
		partial = true
	}
	slices.Reverse(evs)
	rec, err := console.NewRecording(conv, block, evs, cols, rows)
	if err != nil {
		return recordingOutline{}, err
	}
	rec.Partial = partial
	return recordingOutline{Conversation: conv, Block: block, Recording: rec, Events: len(evs)}, nil
}

// recordingParams reads block and a number in ms (name) of a playback
// request; -1 when the number is absent.
func recordingParams(r *http.Request, name string) (string, int64, error) {
	q := r.URL.Query()
	block := strings.TrimSpace(q.Get("block"))
	if len(block) > 200 {
		return "", 0, NewError(CodeInvalidArgument, "block is not a block id", "Give a block id from the blocks list.").With("field", "block")
	}
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return block, -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return "", 0, NewError(CodeInvalidArgument, name+" must be a whole number of ms after the recording's start", "Give "+name+"=0 for the start.").With("field", name)
	}
	return block, n, nil
}

func (s *Server) consoleRecording(r *http.Request, m *pty.Manager, conv string) (any, error) {
	block, t, err := recordingParams(r, "t")
	if err != nil {
		return nil, err
	}
	release, err := s.holdPlayback()
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := s.loadRecording(r.Context(), m, conv, block)
	if err != nil {
		return nil, err
	}
	if t < 0 {
		t = rec.Duration
	}
	i := rec.At(t)
	return struct {
		recordingOutline
		Frame int    `json:"frame"`
		At    int64  `json:"at"`
		HTML  string `json:"html"`
	}{rec, i, t, rec.Render(i, console.FrameWindow*2)}, nil
}

// consolePlayback streams a recording's frames at their times.
func (s *Server) consolePlayback(w http.ResponseWriter, r *http.Request) error {
	m, err := s.ptyManager()
	if err != nil {
		return err
	}
	conv := r.PathValue("conversationId")
	block, from, err := recordingParams(r, "from")
	if err != nil {
		return err
	}
	from = max(from, 0)
	speed := 1.0
	if v := strings.TrimSpace(r.URL.Query().Get("speed")); v != "" {
		if speed, err = strconv.ParseFloat(v, 64); err != nil || !(speed >= 0.25 && speed <= 16) {
			return NewError(CodeInvalidArgument, "speed must be a number from 0.25 to 16", "Give speed=1 for real time.").With("field", "speed")
		}
	}
	release, err := s.holdPlayback()
	if err != nil {
		return err
	}
	defer release()
	rec, err := s.loadRecording(r.Context(), m, conv, block)
	if err != nil {
		return mapError(onTerminal, err)
	}
	es := startEventStream(w, 64<<10, s.opts.SSEWriteTimeout)
	outline := struct {
		recordingOutline
		Frames int   `json:"frames"`
		From   int64 `json:"from"`
	}{rec, len(rec.Frames), from}
	outline.Recording = &console.Recording{Start: rec.Start, Duration: rec.Duration, Cols: rec.Cols, Rows: rec.Rows, Partial: rec.Partial}
	if err := es.send("meta", outline); err != nil {
		return nil
	}
	type frame struct {
		I    int    `json:"i"`
		T    int64  `json:"t"`
		HTML string `json:"html"`
	}
	i := rec.At(from)
	if err := es.send("frame", frame{i, from, rec.Render(i, console.FrameWindow)}); err != nil {
		return nil
	}
	// Play: the recording's clock (its gaps capped at playbackIdleMax)
	// against the wall's since start, at speed.
	start := time.Now()
	var played time.Duration // recording time played, idle gaps capped
	prevT := from
	for j := i + 1; j < len(rec.Frames); j++ {
		gap := time.Duration(rec.Frames[j].T-prevT) * time.Millisecond
		played += min(gap, playbackIdleMax)
		prevT = rec.Frames[j].T
		// Behind: skip to the latest frame due.
		if j+1 < len(rec.Frames) {
			nextDue := played + min(time.Duration(rec.Frames[j+1].T-prevT)*time.Millisecond, playbackIdleMax)
			if time.Duration(float64(time.Since(start))*speed) >= nextDue {
				continue
			}
		}
		wait := time.Duration(float64(played)/speed) - time.Since(start)
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-r.Context().Done():
				return nil
			case <-s.closing.Done():
				return nil
			}
		}
		if err := es.send("frame", frame{j, rec.Frames[j].T, rec.Render(j, console.FrameWindow)}); err != nil {
			return nil
		}
	}
	es.send("end", map[string]int64{"t": rec.Duration})
	return nil
}
