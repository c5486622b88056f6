package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/cmlab/cmlab/labapi"
)

// exitTimeout is the exit code of 'cmlab pty exec/follow' when --timeout
// expires with the block still running (as timeout(1)).
const exitTimeout = 124

// followPoll is how long one long-polling read of a block's output may wait
// on the daemon before the CLI asks again.
const followPoll = 20 * time.Second

// ptyBlockRec is the part of a block record the CLI reads.
type ptyBlockRec struct {
	BlockID  string `json:"block_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Reason   string `json:"reason"`
	Cmd      string `json:"cmd"`
}

// ptyFollow streams block id's output from offset to stdout as the daemon
// commits it, until the block ends, and returns the block's exit code as a
// silentExit (0: nil). Ctrl+C (SIGINT) is forwarded to the block through
// the interrupt route; the third one detaches. timeout 0 waits for the END.
// followOpts: raw shows the output's bytes as they are; cursor is the
// block's resume_cursor (the spool before it), -1 when unknown.
type followOpts struct {
	raw    bool
	cursor int64
}

func ptyFollow(ctx context.Context, g *globalOpts, o *ptyOpts, c *labapi.Client, id string, offset int64, timeout time.Duration, fo followOpts) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		detached bool
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // forwards Ctrl+C; owned here, stopped and waited for below
		defer wg.Done()
		for n := 1; ; n++ {
			select {
			case <-sigs:
			case <-stop:
				return
			}
			if n >= 3 {
				mu.Lock()
				detached = true
				mu.Unlock()
				cancel()
				return
			}
			ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Do(ictx, http.MethodPost, ptyPath(o, "interrupt"), "", map[string]any{}, nil)
			icancel()
			if err != nil {
				fmt.Fprintf(g.stderr, "cmlab: could not forward Ctrl+C: %v\n", err)
				continue
			}
			fmt.Fprintf(g.stderr, "cmlab: sent Ctrl+C to block %s; waiting for it to end (press Ctrl+C %d more time(s) to detach)\n", id, 3-n)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var out []byte
	for {
		wait := followPoll
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		var r struct {
			Data         string `json:"data"`
			ResumeCursor int64  `json:"resume_cursor"`
			Size         int64  `json:"size"`
			Complete     bool   `json:"complete"`
		}
		path := ptyPath(o, "blocks/"+id+"/output?offset="+strconv.FormatInt(offset, 10)+"&max_bytes=1048576&wait_ms="+strconv.FormatInt(max(wait.Milliseconds(), 0), 10))
		if fo.raw {
			path += "&raw=true"
		}
		if err := c.Do(ctx, http.MethodGet, path, "", nil, &r); err != nil {
			mu.Lock()
			d := detached
			mu.Unlock()
			if d && errors.Is(err, context.Canceled) {
				fmt.Fprintln(g.stderr, ptyStillRunning(o, id, "detached", fo.cursor))
				return &silentExit{code: 130}
			}
			return labErr(err)
		}
		if r.Data != "" {
			if g.json {
				out = append(out, r.Data...)
			} else if _, err := fmt.Fprint(g.stdout, r.Data); err != nil {
				return err
			}
		}
		offset = r.ResumeCursor
		if r.Complete && offset >= r.Size {
			break
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) && r.Data == "" {
			return newCLIError(exitTimeout, "TIMEOUT", ptyStillRunning(o, id, "timed out after "+timeout.String(), fo.cursor), "")
		}
	}
	var blk struct {
		Block json.RawMessage `json:"block"`
	}
	if err := c.Do(ctx, http.MethodGet, ptyPath(o, "blocks/"+id), "", nil, &blk); err != nil {
		return labErr(err)
	}
	var b ptyBlockRec
	if err := json.Unmarshal(blk.Block, &b); err != nil {
		return fmt.Errorf("the daemon answered an unreadable block record: %w", err)
	}
	if g.json {
		res := map[string]any{"block": blk.Block, "output": string(out)}
		if fo.cursor >= 0 {
			res["resume_cursor"] = fo.cursor
		}
		if err := labPrintJSON(g, res); err != nil {
			return err
		}
	}
	code := blockExitCode(b)
	if !g.json {
		switch {
		case b.Status == "cancelled":
			fmt.Fprintf(g.stderr, "cmlab: block %s cancelled (%s)\n", id, b.Reason)
		case b.Reason == "shell_exited":
			fmt.Fprintf(g.stderr, "cmlab: the shell exited with block %s; the next exec starts a new one\n", id)
		case b.Status == "failed" && b.ExitCode == nil:
			fmt.Fprintf(g.stderr, "cmlab: block %s failed (%s)\n", id, b.Reason)
		}
	}
	if code == 0 {
		return nil
	}
	return &silentExit{code: code}
}

// blockExitCode is the exit code 'cmlab pty exec' passes through: the
// block's own (128+N for a signal), 1 for a failure without one.
func blockExitCode(b ptyBlockRec) int {
	if b.ExitCode != nil && *b.ExitCode > 0 && *b.ExitCode < 256 {
		return *b.ExitCode
	}
	if b.ExitCode != nil && *b.ExitCode == 0 && b.Status != "failed" {
		return 0
	}
	if b.Status == "completed" {
		return 0
	}
	return exitError
}

// ptyStillRunning says that block id is still running and what to type.
func ptyStillRunning(o *ptyOpts, id, why string, cursor int64) string {
	conv := ""
	if o.conv != "default" {
		conv = " -c " + o.conv
	}
	s := fmt.Sprintf("%s: block %s is still running in conversation %q\n"+
		"  follow it:    cmlab pty follow%s %s\n"+
		"  interrupt it: cmlab pty interrupt%s\n"+
		"  end it:       cmlab pty end%s", why, id, o.conv, conv, id, conv, conv)
	if cursor >= 0 {
		s += fmt.Sprintf("\n  wait for it:  cmlab pty prompt%s --from %d    (its resume_cursor)", conv, cursor)
	}
	return s
}
