package pty

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
)

// The terminal read model's snapshot (issue 16 §1): state/snapshots/pty.msgpack,
// a model of the read-model kit (snapshot.Attach): written at checkpoints
// (engine.OnCheckpoint) once snapKind.Every events have passed since the
// last one, and at close, under the kit's code-version rule. It holds
// everything the model keeps except spool bytes: per conversation its
// blocks, prompts, output spans, active block, shell id, live flag, size,
// last byte and drop counts; and the blocks and shells the log holds open.
// The file is its own reference: it names the seq it covers and that
// event's id, checked against the log.
var snapKind = snapshot.Kind{
	Name: "pty",
	// Schema changes with the snapshot's fields or their meaning. 3: a
	// conversation's lists hold its recent past only (history.go). Its
	// records' seqs and the drops (history_drops.go) came later within 3:
	// a snapshot without them (histSnap.PerDrop) is refused.
	Schema: 3,
	Every:  10_000,
}

// SnapshotFile is the terminal read model's snapshot in h.
func SnapshotFile(h home.Home) string { return snapKind.File(h.StateDir()) }

// SnapshotCovers reads h's terminal snapshot (whole, CRC checked, of this
// code version) and returns the seq it covers: the log after it is what a
// start applies. A missing file wraps os.ErrNotExist, an untrusted one
// snapshot.ErrInvalid. Whether the log still holds that seq's event is
// checked at load, not here.
func SnapshotCovers(h home.Home) (uint64, error) { return snapKind.Covers(SnapshotFile(h)) }

type snapBody struct {
	Convs      []convSnap `json:"convs"`
	OpenBlocks []openRef  `json:"openBlocks"`
	OpenShells []openRef  `json:"openShells"`
}

type convSnap struct {
	ID      string         `json:"id"`
	Size    int64          `json:"size"`
	Last    byte           `json:"last"`
	Prompts []promptSnap   `json:"prompts"`
	Blocks  []events.Block `json:"blocks"`
	Outputs []blockSpans   `json:"outputs"` // sorted by block id
	Active  string         `json:"active"`
	ShellID string         `json:"shellId"`
	Live    bool           `json:"live"`
	Cols    int            `json:"cols"`
	Rows    int            `json:"rows"`
	Dropped int64          `json:"dropped"`
	BlkDrop []blockDrop    `json:"blkDrop"` // sorted by block id
	Inputs  []inputSnap    `json:"inputs"`
	Spans   []blockSeqs    `json:"spans"` // sorted by block id
	Hist    histSnap       `json:"hist"`
}

// blockSeqs is a block's seqSpan.
type blockSeqs struct {
	Block string `json:"b"`
	Begin uint64 `json:"s"`
	End   uint64 `json:"e"`
}

// histSnap is a conversation's history: what was dropped of its lists.
type histSnap struct {
	Blocks    int   `json:"blocks"`
	MaxSeq    int   `json:"maxSeq"`
	Prompts   int   `json:"prompts"`
	PromptEnd int64 `json:"promptEnd"`
	Inputs    int   `json:"inputs"`
	InputOff  int64 `json:"inputOff"`
	KeepAll   bool  `json:"keepAll"`
	Broken    bool  `json:"broken"`
	// Sums of what was dropped (history_verify.go); Summed is false in a
	// snapshot written before they existed, which is not loaded when
	// anything was dropped: the sums cannot be made up, so the model is
	// rebuilt from the log.
	Sums   pastSums `json:"sums"`
	Summed bool     `json:"summed"`
	// Drops (history_drops.go), and the seqs of the records held;
	// PerDrop is false in a snapshot written before they existed, which
	// is not loaded: the seqs cannot be made up.
	Drops   []dropSnap `json:"drops"`
	PerDrop bool       `json:"perDrop"`
}

// dropSnap is a pastDrop.
type dropSnap struct {
	Sums     pastSums `json:"s"`
	Blocks   int32    `json:"b"`
	Prompts  int32    `json:"p"`
	Inputs   int32    `json:"i"`
	BlockLo  uint64   `json:"bl"`
	PromptLo uint64   `json:"pl"`
	InputLo  uint64   `json:"il"`
	Hi       uint64   `json:"h"`
	Unseq    bool     `json:"u"`
	Spool0   int64    `json:"o"`
	MaxSeq   int      `json:"m"`
	IDMin    []byte   `json:"k"`
	IDMax    []byte   `json:"K"`
}

type promptSnap struct {
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	TS      int64  `json:"ts"`
	Cwd     string `json:"cwd"`
	Exit    *int   `json:"exit"`
	BlockID string `json:"blockId"`
	Seq     uint64 `json:"seq"`
}

// blockSpans and blockDrop are the model's maps as sorted lists, so that
// the same model always encodes to the same bytes.
type blockSpans struct {
	Block string     `json:"b"`
	Spans []spanSnap `json:"s"`
}

type blockDrop struct {
	Block   string `json:"b"`
	Dropped int64  `json:"d"`
}

type spanSnap struct {
	Start int64 `json:"s"`
	End   int64 `json:"e"`
}

// encode returns the snapshot body of m. Caller holds the model's lock.
func (m *model) encode() ([]byte, error) {
	var sn snapBody
	for _, id := range sortedKeys(m.convs) {
		c := m.convs[id]
		cs := convSnap{ID: id, Size: c.spoolSz, Last: c.last, Active: c.active, ShellID: c.shellID, Live: c.live,
			Cols: c.cols, Rows: c.rows, Dropped: c.dropped}
		h := c.hist
		cs.Hist = histSnap{Blocks: h.blocks, MaxSeq: h.maxSeq, Prompts: h.prompts, PromptEnd: h.promptEnd, Inputs: h.inputs,
			InputOff: h.inputOff, KeepAll: h.keepAll, Broken: h.broken, Sums: h.sums, Summed: true, PerDrop: true}
		for _, d := range c.drops {
			cs.Hist.Drops = append(cs.Hist.Drops, dropSnap{d.sums, d.blocks, d.prompts, d.inputs, d.blockLo, d.promptLo, d.inputLo,
				d.hi, d.unseq, d.spool0, d.maxSeq, bytes.TrimRight(d.idMin[:], "\x00"), bytes.TrimRight(d.idMax[:], "\x00")})
		}
		for _, id := range sortedKeys(c.spans) {
			cs.Spans = append(cs.Spans, blockSeqs{id, c.spans[id].begin, c.spans[id].end})
		}
		for _, p := range c.prompts {
			cs.Prompts = append(cs.Prompts, promptSnap{p.lineStart, p.lineEnd, p.ts, p.cwd, p.exit, p.blockID, p.seq})
		}
		for _, b := range c.blocks {
			cs.Blocks = append(cs.Blocks, *b)
		}
		for _, b := range sortedKeys(c.outputs) {
			bs := blockSpans{Block: b}
			for _, s := range c.outputs[b] {
				bs.Spans = append(bs.Spans, spanSnap{s.start, s.end})
			}
			cs.Outputs = append(cs.Outputs, bs)
		}
		for _, b := range sortedKeys(c.blkDrop) {
			cs.BlkDrop = append(cs.BlkDrop, blockDrop{b, c.blkDrop[b]})
		}
		for _, in := range c.inputs {
			cs.Inputs = append(cs.Inputs, inputSnap{in.off, in.source, in.blockID, in.data, in.seq})
		}
		sn.Convs = append(sn.Convs, cs)
	}
	sn.OpenBlocks, sn.OpenShells = m.openBlocks, m.openShells
	return events.Marshal(&sn)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// decode fills an empty model from a snapshot body.
func (m *model) decode(body []byte) error {
	var sn snapBody
	if err := events.Unmarshal(body, &sn); err != nil {
		return err
	}
	for _, cs := range sn.Convs {
		if _, dup := m.convs[cs.ID]; dup || cs.Size < 0 {
			return fmt.Errorf("conversation %q twice or with a negative size", cs.ID)
		}
		c := newConvState(cs.ID, m.keep)
		c.spoolSz, c.last, c.active, c.shellID, c.live = cs.Size, cs.Last, cs.Active, cs.ShellID, cs.Live
		c.cols, c.rows, c.dropped = cs.Cols, cs.Rows, cs.Dropped
		h := cs.Hist
		if h.Blocks < 0 || h.Prompts < 0 || h.Inputs < 0 {
			return fmt.Errorf("conversation %q: a negative count of dropped records", cs.ID)
		}
		if !h.Summed && (h.Blocks > 0 || h.Prompts > 0 || h.Inputs > 0) {
			return fmt.Errorf("conversation %q: dropped records without their sums", cs.ID)
		}
		if !h.PerDrop {
			return fmt.Errorf("conversation %q: no seqs of its records (written before drops kept their own sums)", cs.ID)
		}
		c.hist = history{h.Blocks, h.MaxSeq, h.Prompts, h.PromptEnd, h.Inputs, h.InputOff, h.KeepAll || c.hist.keepAll, h.Broken, h.Sums}
		for _, d := range h.Drops {
			if d.Blocks < 0 || d.Prompts < 0 || d.Inputs < 0 || len(d.IDMin) > len(idKey{}) || len(d.IDMax) > len(idKey{}) {
				return fmt.Errorf("conversation %q: a drop of negative counts or long keys", cs.ID)
			}
			c.drops = append(c.drops, pastDrop{sums: d.Sums, blocks: d.Blocks, prompts: d.Prompts, inputs: d.Inputs, blockLo: d.BlockLo,
				promptLo: d.PromptLo, inputLo: d.InputLo, hi: d.Hi, unseq: d.Unseq, spool0: d.Spool0, maxSeq: d.MaxSeq,
				idMin: keyOf(string(d.IDMin)), idMax: keyOf(string(d.IDMax))})
		}
		for _, sp := range cs.Spans {
			c.spans[sp.Block] = seqSpan{sp.Begin, sp.End}
		}
		for _, d := range cs.BlkDrop {
			c.blkDrop[d.Block] = d.Dropped
		}
		for _, p := range cs.Prompts {
			c.prompts = append(c.prompts, promptRec{p.Start, p.End, p.TS, p.Cwd, p.Exit, p.BlockID, p.Seq})
		}
		for i := range cs.Blocks {
			b := cs.Blocks[i]
			c.blocks = append(c.blocks, &b)
			c.byID[b.BlockID] = &b
		}
		for _, bs := range cs.Outputs {
			for _, s := range bs.Spans {
				if s.Start < 0 || s.End < s.Start || s.End > cs.Size {
					return fmt.Errorf("block %q: span [%d, %d) outside the spool [0, %d]", bs.Block, s.Start, s.End, cs.Size)
				}
				c.outputs[bs.Block] = append(c.outputs[bs.Block], span{s.Start, s.End})
			}
		}
		for _, in := range cs.Inputs {
			if in.Off < 0 || in.Off > cs.Size {
				return fmt.Errorf("input at %d outside the spool [0, %d]", in.Off, cs.Size)
			}
			c.inputs = append(c.inputs, inputRec{in.Off, in.Source, in.Block, in.Data, in.Seq})
		}
		if c.active != "" && c.byID[c.active] == nil {
			return fmt.Errorf("conversation %q: active block %q unknown", cs.ID, c.active)
		}
		m.convs[cs.ID] = c
	}
	m.openBlocks, m.openShells = sn.OpenBlocks, sn.OpenShells
	return nil
}

// The model as a snapshot.Model, for CloseCrashed's model of its own
// (no lock: nobody else sees it).

func (m *model) Observe(ev *events.Event) { m.observe(ev) }
func (m *model) Covered() uint64          { return m.seq }

func (m *model) Encode() ([]byte, uint64, string, error) {
	body, err := m.encode()
	return body, m.seq, m.eventID, err
}

// Decode fills the empty model from a trusted snapshot's body.
func (m *model) Decode(h snapshot.Header, body []byte) error {
	fresh := newModelKeeping(m.keep)
	if err := fresh.decode(body); err != nil {
		return fmt.Errorf("%w: body: %v", snapshot.ErrInvalid, err)
	}
	fresh.seq, fresh.eventID = h.Seq, h.EventID
	*m = fresh
	return nil
}

// managerObserver is the Manager's model under its lock: the
// snapshot.Model the kit attaches (engine.ResumableObserver).
type managerObserver struct{ m *Manager }

func (o managerObserver) Observe(ev *events.Event) {
	o.m.stateMu.Lock()
	o.m.observe(ev)
	o.m.stateMu.Unlock()
}

// ObserveGroup implements engine.GroupObserver: a committed group is
// applied under one hold of the lock, so a waiter woken by a block's
// prompt reads the model with the block's END applied too (they are
// appended together).
func (o managerObserver) ObserveGroup(evs []*events.Event) {
	o.m.stateMu.Lock()
	for _, ev := range evs {
		o.m.observe(ev)
	}
	o.m.stateMu.Unlock()
}

// Covered implements engine.ResumableObserver: the log after it is fed.
func (o managerObserver) Covered() uint64 {
	o.m.stateMu.Lock()
	defer o.m.stateMu.Unlock()
	return o.m.seq
}

func (o managerObserver) Encode() ([]byte, uint64, string, error) {
	o.m.stateMu.Lock()
	defer o.m.stateMu.Unlock()
	return o.m.model.Encode()
}

func (o managerObserver) Decode(h snapshot.Header, body []byte) error {
	o.m.stateMu.Lock()
	defer o.m.stateMu.Unlock()
	return o.m.model.Decode(h, body)
}

// openModel attaches the Manager's model through the read-model kit
// (snapshot.Attach): its snapshot if trusted (a rejected one is logged),
// then the log after it; unless read-only, its snapshot is written at the
// engine's checkpoints.
func (m *Manager) openModel() error {
	eng := m.eng
	path := SnapshotFile(eng.Home())
	fresh := func() managerObserver {
		m.stateMu.Lock()
		m.model = newModelKeeping(m.opts.HistoryBlocks)
		m.stateMu.Unlock()
		return managerObserver{m}
	}
	_, w, refused, err := snapshot.Attach(eng, snapKind, path, fresh, func(o managerObserver) error { return eng.Subscribe(o) },
		func(_ bool, err error) {
			if err != nil {
				// Only the next start's catch-up grows; retried at the next checkpoint.
				m.opts.Logger.Warn("terminal snapshot not written", "error", err.Error())
			}
		})
	if refused != "" {
		m.opts.Logger.Warn("terminal snapshot ignored, rebuilding from the log", "file", eng.Home().Rel(path), "reason", refused)
	}
	if err != nil {
		return fmt.Errorf("pty: subscribe: %w", err)
	}
	m.snapW = w
	return nil
}

// crashedEvents closes what the model holds open (SPEC §8 step 4): one
// pty.block.end (failed, daemon_crashed) per open block, in begin order,
// and a pty.session.ended per open shell. Caller holds the model's lock.
func (m *model) crashedEvents(now int64) ([]*events.Event, []string) {
	var evs []*events.Event
	var closed []string
	for _, r := range m.openBlocks {
		c := m.convs[r.Conv]
		if c == nil || c.byID[r.ID] == nil {
			continue
		}
		b := *c.byID[r.ID]
		b.Status, b.Reason, b.TsEnd, b.ExitCode = events.BlockFailed, ReasonDaemonCrashed, now, nil
		b.SpoolEnd = c.size()
		b.Dropped = c.blkDrop[r.ID]
		evs = append(evs, events.MustNew(r.Conv, &events.PtyBlockEnd{Block: b}))
		closed = append(closed, b.BlockID)
	}
	for _, r := range m.openShells {
		evs = append(evs, events.MustNew(r.Conv, &events.PtySessionEnded{ShellID: r.ID, Reason: ReasonDaemonCrashed}))
	}
	return evs, closed
}

// closeCrashed is CloseCrashed on the manager's own model (no log scan).
func (m *Manager) closeCrashed(ctx context.Context) ([]string, error) {
	m.stateMu.Lock()
	evs, closed := m.model.crashedEvents(time.Now().UnixMilli())
	m.stateMu.Unlock()
	if len(evs) == 0 {
		return nil, nil
	}
	if _, err := m.eng.Append(ctx, evs...); err != nil {
		return nil, fmt.Errorf("pty: close crashed blocks: %w", err)
	}
	return closed, nil
}
