package pty

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

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
	err := m.readBlocks(conv, since, limit, func(c *convState) bool { return since < c.hist.maxSeq }, func(c *convState) {
		for _, b := range c.blocks {
			if b.Seq > since && len(res.Blocks) < limit {
				res.Blocks = append(res.Blocks, *b)
			}
		}
	})
	if err != nil {
		return BlocksResult{}, err
	}
	return res, nil
}

// notHeld says whether block id may be a block dropped from memory.
func notHeld(id string) func(c *convState) bool {
	return func(c *convState) bool { return c.byID[id] == nil && c.hist.blocks > 0 }
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
	err := m.readBlock(conv, id, notHeld(id), func(c *convState) {
		if b := c.byID[id]; b != nil {
			res, ok = BlockResult{OK: true, Block: *b}, true
		}
	})
	if err != nil {
		return BlockResult{}, err
	}
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
		if more, err := m.awaitChange(ctx, changed, timer); err != nil {
			return BlockOutputResult{}, err
		} else if !more {
			return res, nil
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
	var (
		v        spoolView
		segs     []span
		changed  chan struct{}
		found    bool
		complete bool
	)
	err := m.readBlock(conv, id, notHeld(id), func(c *convState) {
		changed = c.changed
		b := c.byID[id]
		if b == nil {
			return
		}
		found = true
		v, segs = c.view(), c.outputs[id]
		complete = b.Status != events.BlockRunning && b.Status != events.BlockInteractive
	})
	if err != nil {
		return BlockOutputResult{}, changed, err
	}
	if !found {
		return BlockOutputResult{}, changed, fmt.Errorf("%w: block %q in conversation %q", ErrNotFound, id, conv)
	}
	var size int64
	for _, s := range segs {
		size += s.end - s.start
	}
	if offset < 0 || offset > size {
		return BlockOutputResult{}, changed, fmt.Errorf("%w: offset %d is outside the block output [0, %d]", ErrInvalidCursor, offset, size)
	}
	// Read offset..offset+maxBytes (and the UTF-8 look-ahead) of the
	// concatenation of the block's spans, from the file and the tail.
	rd := m.reader(v)
	defer rd.close()
	want := min(size, offset+maxBytes+utf8.UTFMax) - offset
	out := make([]byte, 0, want)
	pos := int64(0) // offset of s.start in the block output
	for _, s := range segs {
		n := s.end - s.start
		if int64(len(out)) >= want {
			break
		}
		if lo := offset + int64(len(out)); lo < pos+n {
			from := s.start + (lo - pos)
			to := min(s.end, from+want-int64(len(out)))
			b, err := rd.bytes(from, to)
			if err != nil {
				return BlockOutputResult{}, changed, err
			}
			out = append(out, b...)
		}
		pos += n
	}
	res := BlockOutputResult{OK: true, BlockID: id, Cursor: offset, Size: size, Complete: complete}
	var n int64
	res.Data, n = sliceUTF8(out, 0, maxBytes)
	res.ResumeCursor = offset + n
	return res, changed, nil
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
	var (
		v      spoolView
		ranges []span
		found  = true
	)
	need := func(c *convState) bool { return blockID != "" && notHeld(blockID)(c) }
	if err := m.readBlock(conv, blockID, need, func(c *convState) {
		v = c.view()
		ranges = []span{{0, c.size()}}
		if blockID != "" {
			if c.byID[blockID] == nil {
				found = false
				return
			}
			ranges = c.outputs[blockID]
		}
	}); err != nil {
		return SearchResult{}, err
	}
	if !found {
		return SearchResult{}, fmt.Errorf("%w: block %q in conversation %q", ErrNotFound, blockID, conv)
	}
	rd := m.reader(v)
	defer rd.close()
	pat := []byte(q)
	var hits []int64
scan:
	for _, r := range ranges {
		for pos := r.start; pos < r.end; {
			at, ok, err := rd.index(pat, pos, r.end)
			if err != nil {
				return SearchResult{}, err
			}
			if !ok {
				break
			}
			ls, le, err := rd.lineAround(at, r.start, r.end)
			if err != nil {
				return SearchResult{}, err
			}
			if len(res.Matches) == maxSearchHits {
				res.Truncated = true
				break scan
			}
			line, err := rd.bytes(ls, le)
			if err != nil {
				return SearchResult{}, err
			}
			res.Matches = append(res.Matches, SearchHit{MatchCursor: at, Line: string(line), LineCursor: ls})
			hits = append(hits, at)
			pos = max(le, at+1)
		}
	}
	if len(hits) > 0 {
		// A hit before every block in memory may be in a dropped one.
		need := func(c *convState) bool {
			return c.hist.blocks > 0 && slices.ContainsFunc(hits, func(at int64) bool { return !atHeld(c, at) })
		}
		if err := m.readUpTo(conv, slices.Max(hits), need, func(c *convState) {
			for i, at := range hits {
				res.Matches[i].BlockID = blockAt(c, at)
			}
		}); err != nil {
			return SearchResult{}, err
		}
	}
	return res, nil
}

// maxSearchLine bounds how far a search hit's line reaches on either side
// of the match: a line of a flood without newlines is not returned whole.
const maxSearchLine = 16 << 10

// lineAround returns the line holding offset at within [lo, hi): from after
// the '\n' before it to the next '\n' (excluded), each side at most
// maxSearchLine bytes from at.
func (r *spoolReader) lineAround(at, lo, hi int64) (int64, int64, error) {
	from := max(lo, at-maxSearchLine)
	b, err := r.bytes(from, at)
	if err != nil {
		return 0, 0, err
	}
	ls := from + int64(bytes.LastIndexByte(b, '\n')) + 1
	to := min(hi, at+maxSearchLine)
	b, err = r.bytes(at, to)
	if err != nil {
		return 0, 0, err
	}
	le := to
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		le = at + int64(j)
	}
	return ls, le, nil
}

// atHeld says whether blockAt(c, off) is decided by a block in memory:
// one that begins at or before off.
func atHeld(c *convState, off int64) bool {
	return slices.ContainsFunc(c.blocks, func(b *events.Block) bool { return b.SpoolBegin <= off })
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
