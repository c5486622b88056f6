package labapi

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/console"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/pty"
)

// The console's terminal routes (issue 30 §5), beside the terminal API
// (labapi/pty.go), whose routes the console also calls for the blocks
// list, typing (send) and Ctrl+C (interrupt):
//
//	GET /api/console/pty                                                   conversations of the home: {conversations:[{id, running}]}
//	GET /api/console/pty/{conversationId}/blocks/{blockId}/screen?upto=&after=&wait_ms=
//	    the block's output rendered to HTML (console.RenderOutput; an interactive block's
//	    screen through a VT emulator, console.RenderScreen): {html, size, complete, truncated, status, mode}.
//	    upto cuts the output at that many bytes (playback); after with wait_ms waits up to
//	    wait_ms for output past after (a running block, live).
//	GET /api/console/pty/{conversationId}/blocks/{blockId}/frames
//	    when the block's output grew: {frames:[{t, end}]}, t in ms after the block began,
//	    end the block's output size then, from its pty.output events in the log.

// consoleRenderMax is the most output one screen renders: the tail of a
// longer block (truncated: true says so).
const consoleRenderMax = 512 << 10

// consoleFramesMax bounds the frames of one block's playback.
const consoleFramesMax = 2000

func (s *Server) registerConsolePtyRoutes() {
	s.route("GET /api/console/pty", authAlways, s.consolePtyList)
	s.route("GET /api/console/pty/{conversationId}/blocks/{blockId}/screen", authAlways, ptyRoute(s, s.consoleScreen))
	s.route("GET /api/console/pty/{conversationId}/blocks/{blockId}/frames", authAlways, ptyRoute(s, s.consoleFrames))
	s.registerConsolePlaybackRoutes()
}

type consoleConv struct {
	ID      string `json:"id"`
	Running bool   `json:"running"`
}

func (s *Server) consolePtyList(w http.ResponseWriter, r *http.Request) error {
	h := s.opts.Engine.Home()
	out := []consoleConv{}
	running := map[string]bool{}
	if s.opts.Pty != nil {
		for _, sh := range s.opts.Pty.Slots(r.Context()).Shells {
			running[sh.ConversationID] = true
		}
	}
	des, _ := os.ReadDir(filepath.Join(h.Dir, "pty"))
	for _, de := range des {
		if de.IsDir() && home.ValidateID(de.Name()) == nil && len(out) < 1000 {
			out = append(out, consoleConv{ID: de.Name(), Running: running[de.Name()]})
		}
	}
	for id := range running {
		if !slices.ContainsFunc(out, func(c consoleConv) bool { return c.ID == id }) {
			out = append(out, consoleConv{ID: id, Running: true})
		}
	}
	slices.SortFunc(out, func(a, b consoleConv) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"conversations": out})
	return nil
}

type consoleScreenResult struct {
	HTML      string `json:"html"`
	Size      int64  `json:"size"` // the block's output so far, in bytes
	Upto      int64  `json:"upto"` // the bytes rendered end here
	Complete  bool   `json:"complete"`
	Truncated bool   `json:"truncated"` // only the tail was rendered
	Status    string `json:"status"`
	Mode      string `json:"mode"`
	ExitCode  *int   `json:"exit_code"`
	// Cols and Rows: the size of the screen a full-screen (interactive)
	// block is rendered at, its shell's pty (pty.session.started).
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

func (s *Server) consoleScreen(r *http.Request, m *pty.Manager, conv string) (any, error) {
	id := r.PathValue("blockId")
	q := r.URL.Query()
	num := func(name string) (int64, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return -1, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, NewError(CodeInvalidArgument, name+" must be a whole number of bytes or ms", "").With("field", name)
		}
		return n, nil
	}
	upto, err := num("upto")
	if err != nil {
		return nil, err
	}
	after, err := num("after")
	if err != nil {
		return nil, err
	}
	waitMs, err := num("wait_ms")
	if err != nil {
		return nil, err
	}
	if after >= 0 && waitMs > 0 {
		// Live: wait for output past after (or the block's end).
		if _, err := m.FollowBlockOutput(r.Context(), conv, id, after, 1, time.Duration(min(waitMs, 25000))*time.Millisecond); err != nil {
			return nil, err
		}
	}
	br, err := m.Block(r.Context(), conv, id)
	if err != nil {
		return nil, err
	}
	head, err := m.BlockOutput(r.Context(), conv, id, 0, 1)
	if err != nil {
		return nil, err
	}
	size := head.Size
	end := size
	if upto >= 0 && upto < end {
		end = upto
	}
	start := max(0, end-consoleRenderMax)
	out, err := readBlockOutput(r.Context(), m, conv, id, start, end)
	if err != nil {
		return nil, err
	}
	b := br.Block
	res := consoleScreenResult{Size: size, Upto: end, Truncated: start > 0, Status: b.Status, Mode: b.Mode, ExitCode: b.ExitCode,
		Complete: b.Status != events.BlockRunning && b.Status != events.BlockInteractive}
	if b.Mode == "interactive" {
		res.Cols, res.Rows, _ = s.shellSize(r.Context(), conv, b.ShellID, b.TsBegin)
		res.HTML = console.RenderScreen(out, res.Cols, res.Rows)
	} else {
		res.HTML = console.RenderOutput(out)
	}
	return res, nil
}

// readBlockOutput reads block id's output from start to end, in the
// pieces BlockOutput gives.
func readBlockOutput(ctx context.Context, m *pty.Manager, conv, id string, start, end int64) ([]byte, error) {
	out := make([]byte, 0, end-start)
	for off := start; off < end; {
		res, err := m.BlockOutput(ctx, conv, id, off, min(end-off, pty.MaxRead))
		if err != nil {
			return nil, err
		}
		if len(res.Data) == 0 {
			break
		}
		d := res.Data
		if int64(len(d)) > end-off {
			d = d[:end-off]
		}
		out = append(out, d...)
		off += int64(len(d))
	}
	return out, nil
}

type consoleFrame struct {
	T   int64 `json:"t"`   // ms after the block began
	End int64 `json:"end"` // the block's output size then
}

// consoleFrames lists when the block's output grew, from its pty.output
// events: pages of the log (console.LogReader) filtered to the
// conversation's output between the block's begin and end times, starting
// below the first event after its end (the timestamp index), so the read
// is the block's stretch of the log, not the log.
func (s *Server) consoleFrames(r *http.Request, m *pty.Manager, conv string) (any, error) {
	id := r.PathValue("blockId")
	br, err := m.Block(r.Context(), conv, id)
	if err != nil {
		return nil, err
	}
	b := br.Block
	lg := s.opts.Engine.Log()
	first, last := lg.FirstSeq(), lg.LastSeq()
	q := console.LogQuery{Conv: conv, TypePrefix: events.TypePtyOutput, FromTS: b.TsBegin, Limit: console.MaxPageSize, Budget: 200 * time.Millisecond}
	if b.TsEnd != 0 {
		q.ToTS = b.TsEnd
		if seq, err := s.opts.Retention.FirstTS(r.Context(), lg.Events, first, last, func(ts int64) bool { return ts > b.TsEnd }); err == nil && seq != 0 {
			q.Before = seq
		}
	}
	var frames []consoleFrame
	partial := false
	deadline := time.Now().Add(2 * time.Second)
	for pages := 0; ; pages++ {
		p, err := s.logReader().Page(r.Context(), first, last, q)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Events {
			if e.Checksum != "ok" {
				continue
			}
			var o struct {
				BlockID     string `json:"block_id"`
				SpoolOffset int64  `json:"spool_offset"`
				Data        []byte `json:"data"`
			}
			if err := json.Unmarshal(e.Data, &o); err != nil || o.BlockID != id {
				continue
			}
			frames = append(frames, consoleFrame{T: e.TS - b.TsBegin, End: o.SpoolOffset + int64(len(o.Data)) - b.SpoolBegin})
		}
		// Older events lie before the block's begin once a page reached it.
		reachedBegin := len(p.Events) > 0 && p.Events[len(p.Events)-1].TS < b.TsBegin
		if p.Next == 0 || reachedBegin {
			break
		}
		if len(frames) >= consoleFramesMax*4 || time.Now().After(deadline) {
			partial = true
			break
		}
		q.Before = p.Next
	}
	slices.Reverse(frames)
	if len(frames) > consoleFramesMax {
		// Keep every nth frame and the last: the scrubber's resolution.
		step := (len(frames) + consoleFramesMax - 1) / consoleFramesMax
		var kept []consoleFrame
		for i := 0; i < len(frames); i += step {
			kept = append(kept, frames[i])
		}
		if kept[len(kept)-1] != frames[len(frames)-1] {
			kept = append(kept, frames[len(frames)-1])
		}
		frames = kept
	}
	if frames == nil {
		frames = []consoleFrame{}
	}
	return map[string]any{"frames": frames, "partial": partial, "block": b}, nil
}
