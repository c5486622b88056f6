package pty

import (
	"context"
	"time"

	"github.com/cmlab/cmlab/events"
)

// RunResult is the answer of exec_wait (issue 25): one call that runs a
// command and says when, and how, it ended. done is true once the block
// has its END; then status and exit_code are final and resume_cursor is
// just after the prompt that ended it (the next wait starts there). When
// the wait timed out first, done is false, status "running", and
// resume_cursor the spool size now: a pty_wait_prompt from it returns
// when the block ends.
//
// output is the block's own output (clean: no sentinel, no echoed exec
// line), at most max_bytes from its start; output_truncated says there is
// more, to be read with blocks_read from output_next_offset (an offset
// into the block's output, not a spool cursor).
type RunResult struct {
	OK               bool   `json:"ok"`
	BlockID          string `json:"block_id"`
	Seq              int    `json:"seq"`
	Done             bool   `json:"done"`
	Status           string `json:"status"`
	ExitCode         *int   `json:"exit_code"`
	Reason           string `json:"reason,omitempty"`
	Output           string `json:"output"`
	OutputBytes      int64  `json:"output_bytes"`
	OutputTruncated  bool   `json:"output_truncated"`
	OutputNextOffset int64  `json:"output_next_offset"`
	ResumeCursor     int64  `json:"resume_cursor"`
}

// AwaitBlock waits up to timeoutMs (the wait_for default and cap) for
// block id to end and answers its outcome and output (RunResult). raw
// keeps an echoed exec line in the output.
func (m *Manager) AwaitBlock(ctx context.Context, conv, id string, timeoutMs, maxBytes int64, raw bool) (RunResult, error) {
	if err := validConv(conv); err != nil {
		return RunResult{}, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRead
	}
	maxBytes = min(maxBytes, MaxRead)
	timer := time.NewTimer(waitTimeout(timeoutMs))
	defer timer.Stop()
	for {
		var (
			b       events.Block
			found   bool
			changed chan struct{}
			size    int64
			after   int64 = -1
		)
		// The prompt that ends a block follows its begin: one in memory
		// has every prompt naming it in memory unless prompts ending
		// after its begin were dropped.
		need := func(c *convState) bool {
			b := c.byID[id]
			return notHeld(id)(c) || b != nil && c.hist.prompts > 0 && b.SpoolBegin < c.hist.promptEnd
		}
		err := m.readBlock(conv, id, need, func(c *convState) {
			changed, size = c.changed, c.size()
			if p := c.byID[id]; p != nil {
				b, found = *p, true
				for i := len(c.prompts) - 1; i >= 0; i-- {
					if c.prompts[i].blockID == id {
						after = c.prompts[i].lineEnd
						break
					}
				}
			}
		})
		if err != nil {
			return RunResult{}, err
		}
		if !found {
			return RunResult{}, m.blockNotFound(conv, id)
		}
		done := b.Status != events.BlockRunning && b.Status != events.BlockInteractive
		if !done {
			if more, err := m.awaitChange(ctx, changed, timer.C); err != nil {
				return RunResult{}, err
			} else if more {
				continue
			}
		}
		res := RunResult{OK: true, BlockID: id, Seq: b.Seq, Done: done, Status: b.Status, ExitCode: b.ExitCode, Reason: b.Reason, ResumeCursor: size}
		if done && after >= 0 {
			res.ResumeCursor = after
		} else if done && b.SpoolEnd > 0 {
			res.ResumeCursor = max(b.SpoolEnd, b.SpoolBegin)
		}
		out, err := m.BlockOutputView(ctx, conv, id, 0, maxBytes, raw)
		if err != nil {
			return RunResult{}, err
		}
		res.Output, res.OutputBytes = out.Data, out.Size
		res.OutputNextOffset = out.ResumeCursor
		res.OutputTruncated = out.ResumeCursor < out.Size
		return res, nil
	}
}

// blockNotFound is the NOT_FOUND of an unknown block.
func (m *Manager) blockNotFound(conv, id string) error {
	_, err := m.Block(context.Background(), conv, id)
	return err
}

// ExecWait runs cmd as a block and waits for it (AwaitBlock). A retry with
// the same request id does not run it again: the caller gets the recorded
// ExecResult from the bridge and calls AwaitBlock on its block.
func (m *Manager) ExecWait(ctx context.Context, conv, cmd, cwd string, req Request, timeoutMs, maxBytes int64, raw bool) (RunResult, error) {
	er, err := m.ExecBlock(ctx, conv, cmd, cwd, req)
	if err != nil {
		return RunResult{}, err
	}
	return m.AwaitBlock(ctx, conv, er.BlockID, timeoutMs, maxBytes, raw)
}

// BlockOutputView is FollowBlockOutput with the clean view unless raw (an
// echoed exec line hidden; offsets stay those of the block's output).
func (m *Manager) BlockOutputView(ctx context.Context, conv, id string, offset, maxBytes int64, raw bool) (BlockOutputResult, error) {
	return m.FollowBlockOutputView(ctx, conv, id, offset, maxBytes, 0, raw)
}

// FollowBlockOutputView is FollowBlockOutput with the clean view unless raw.
func (m *Manager) FollowBlockOutputView(ctx context.Context, conv, id string, offset, maxBytes int64, wait time.Duration, raw bool) (BlockOutputResult, error) {
	res, err := m.FollowBlockOutput(ctx, conv, id, offset, maxBytes, wait)
	if err != nil || raw {
		return res, err
	}
	res.Data, err = m.cleanBlockOutput(conv, id, res.Cursor, res.Data)
	return res, err
}
