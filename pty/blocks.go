package pty

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cmlab/cmlab/events"
)

// BlocksResult is the response of blocks since.
type BlocksResult struct {
	OK     bool           `json:"ok"`
	Blocks []events.Block `json:"blocks"`
}

// BlocksSince returns the blocks numbered after since (block seq), oldest
// first, at most limit (default and cap 500).
func (m *Manager) BlocksSince(ctx context.Context, conv string, since, limit int) (BlocksResult, error) {
	if err := validConv(conv); err != nil {
		return BlocksResult{}, err
	}
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	res := BlocksResult{OK: true, Blocks: []events.Block{}}
	m.snapshot(conv, func(c *convState) {
		for _, b := range c.blocks {
			if b.Seq > since && len(res.Blocks) < limit {
				res.Blocks = append(res.Blocks, *b)
			}
		}
	})
	return res, nil
}

// BlockResult is the response of blocks get.
type BlockResult struct {
	OK    bool         `json:"ok"`
	Block events.Block `json:"block"`
}

// Block returns one block's record.
func (m *Manager) Block(ctx context.Context, conv, id string) (BlockResult, error) {
	if err := validConv(conv); err != nil {
		return BlockResult{}, err
	}
	var res BlockResult
	var ok bool
	m.snapshot(conv, func(c *convState) {
		if b := c.byID[id]; b != nil {
			res, ok = BlockResult{OK: true, Block: *b}, true
		}
	})
	if !ok {
		return res, fmt.Errorf("%w: block %q in conversation %q", ErrNotFound, id, conv)
	}
	return res, nil
}

// BlockOutputResult is the response of blocks read: a slice of the block's
// output (blocks/<id>.out). cursor and resume_cursor are offsets into that
// output.
type BlockOutputResult struct {
	OK           bool   `json:"ok"`
	BlockID      string `json:"block_id"`
	Data         string `json:"data"`
	Cursor       int64  `json:"cursor"`
	ResumeCursor int64  `json:"resume_cursor"`
	Size         int64  `json:"size"`
	Complete     bool   `json:"complete"`
}

// BlockOutput reads a block's output from offset, at most maxBytes.
func (m *Manager) BlockOutput(ctx context.Context, conv, id string, offset, maxBytes int64) (BlockOutputResult, error) {
	return m.FollowBlockOutput(ctx, conv, id, offset, maxBytes, 0)
}

// FollowBlockOutput is BlockOutput that, when the block has no output past
// offset yet and is still open, waits up to wait for more output or for
// its END — whichever commits first — so a client can stream a block's
// output as it arrives (cmlab pty exec) without polling. Like WaitFor it is
// woken by each commit, never by a timer loop; wait is capped at the
// longest wait_for timeout.
func (m *Manager) FollowBlockOutput(ctx context.Context, conv, id string, offset, maxBytes int64, wait time.Duration) (BlockOutputResult, error) {
	wait = min(wait, maxWaitTimeout)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		res, changed, err := m.blockOutput(conv, id, offset, maxBytes)
		if err != nil || wait <= 0 || res.Complete || res.Size > offset {
			return res, err
		}
		select {
		case <-changed:
		case <-timer:
			return res, nil
		case <-ctx.Done():
			return BlockOutputResult{}, ctx.Err()
		case <-m.closing:
			return BlockOutputResult{}, ErrClosed
		}
	}
}

// blockOutput reads a slice of block id's output and returns the channel
// closed at the conversation's next change.
func (m *Manager) blockOutput(conv, id string, offset, maxBytes int64) (BlockOutputResult, chan struct{}, error) {
	if err := validConv(conv); err != nil {
		return BlockOutputResult{}, nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRead
	}
	maxBytes = min(maxBytes, MaxRead)
	var res BlockOutputResult
	var err error
	var changed chan struct{}
	m.snapshot(conv, func(c *convState) {
		changed = c.changed
		b := c.byID[id]
		if b == nil {
			err = fmt.Errorf("%w: block %q in conversation %q", ErrNotFound, id, conv)
			return
		}
		out := c.blockOutput(id)
		if offset < 0 || offset > int64(len(out)) {
			err = fmt.Errorf("%w: offset %d is outside the block output [0, %d]", ErrInvalidCursor, offset, len(out))
			return
		}
		res = BlockOutputResult{OK: true, BlockID: id, Cursor: offset, Size: int64(len(out)),
			Complete: b.Status != events.BlockRunning && b.Status != events.BlockInteractive}
		res.Data, res.ResumeCursor = sliceUTF8(out, offset, maxBytes)
	})
	return res, changed, err
}

// SearchHit is one line of the spool containing the query.
type SearchHit struct {
	BlockID     string `json:"block_id,omitempty"`
	MatchCursor int64  `json:"match_cursor"`
	Line        string `json:"line"`
	LineCursor  int64  `json:"line_cursor"`
}

// SearchResult is the response of search.
type SearchResult struct {
	OK        bool        `json:"ok"`
	Matches   []SearchHit `json:"matches"`
	Truncated bool        `json:"truncated"`
}

// maxSearchHits caps one search.
const maxSearchHits = 200

// Search finds the lines of the spool (or of one block's output) that
// contain q, oldest first.
func (m *Manager) Search(ctx context.Context, conv, q, blockID string) (SearchResult, error) {
	if err := validConv(conv); err != nil {
		return SearchResult{}, err
	}
	if q == "" {
		return SearchResult{}, fmt.Errorf("%w: q is empty", ErrInvalidArgument)
	}
	res := SearchResult{OK: true, Matches: []SearchHit{}}
	var err error
	m.snapshot(conv, func(c *convState) {
		ranges := []span{{0, c.size()}}
		if blockID != "" {
			if c.byID[blockID] == nil {
				err = fmt.Errorf("%w: block %q in conversation %q", ErrNotFound, blockID, conv)
				return
			}
			ranges = c.outputs[blockID]
		}
		pat := []byte(q)
	scan:
		for _, r := range ranges {
			lo, hi := r.start, r.end
			for pos := lo; pos < hi; {
				i := bytes.Index(c.spool[pos:hi], pat)
				if i < 0 {
					break
				}
				at := pos + int64(i)
				ls := int64(bytes.LastIndexByte(c.spool[lo:at], '\n')) + 1 + lo
				le := hi
				if j := bytes.IndexByte(c.spool[at:hi], '\n'); j >= 0 {
					le = at + int64(j)
				}
				if len(res.Matches) == maxSearchHits {
					res.Truncated = true
					break scan
				}
				res.Matches = append(res.Matches, SearchHit{BlockID: blockAt(c, at), MatchCursor: at, Line: string(c.spool[ls:le]), LineCursor: ls})
				pos = max(le, at+1)
			}
		}
	})
	return res, err
}

// blockAt names the block whose output holds spool offset off.
func blockAt(c *convState, off int64) string {
	for i := len(c.blocks) - 1; i >= 0; i-- {
		b := c.blocks[i]
		if b.SpoolBegin > off {
			continue
		}
		for _, s := range c.outputs[b.BlockID] {
			if off >= s.start && off < s.end {
				return b.BlockID
			}
		}
		return ""
	}
	return ""
}
