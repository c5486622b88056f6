package pty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/snapshot"
)

// Errors of terminal operations. The HTTP bridge maps them to codes.
var (
	// ErrBusy: a block is running; a new exec is rejected (seed §3.6).
	ErrBusy = errors.New("busy")
	// ErrInteractive: an interactive session is running; exec_block is rejected.
	ErrInteractive = errors.New("interactive mode")
	// ErrInvalidCursor: a cursor outside [0, spool size].
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrInvalidArgument: a malformed request (bad id, empty match, bad regex).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: an unknown block.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the manager is closed.
	ErrClosed = errors.New("pty: manager closed")
	// ErrTooManyShells: Options.MaxShells shells already run.
	ErrTooManyShells = errors.New("too many shells")
)

// Options configure a Manager. Zero values take the documented defaults.
type Options struct {
	// Bash is the shell binary; default "/bin/bash".
	Bash string
	// Dir is the working directory new shells start in; default the
	// process's working directory.
	Dir string
	// Cols and Rows are the fixed window size; default 200×50.
	Cols, Rows int
	// Term is $TERM for the shell; default "dumb".
	Term string
	// ReadyTimeout bounds the wait for a new shell's first prompt; default 15 s.
	ReadyTimeout time.Duration
	// Logger receives failures of the background appender; default discard.
	Logger *slog.Logger
	// MaxShells bounds the shells running at once (one per conversation);
	// default 64. A conversation past it is refused until one ends.
	MaxShells int
	// IdleTimeout is how long an idle conversation (no block or session
	// running) keeps its shell after its last input or output; then the
	// shell is ended (pty.session.ended reason "idle") and its slot freed.
	// Default 30 minutes; negative never reaps.
	IdleTimeout time.Duration
	// BlockOutputCap bounds the output stored for one block; past it the
	// block keeps running, its further output is dropped and counted
	// (pty.truncated). Default DefaultBlockOutputCap; negative: no cap.
	BlockOutputCap int64
	// ConversationOutputCap bounds a conversation's whole spool (output
	// bytes; prompt and marker lines are always written). Default
	// DefaultConversationOutputCap; negative: no cap.
	ConversationOutputCap int64
	// TotalOutputCap bounds the spools of all conversations together
	// (each byte is stored three times: spool, block file, log), so that
	// many conversations cannot each fill ConversationOutputCap. Default
	// DefaultTotalOutputCap; negative: no cap (totalcap.go).
	TotalOutputCap int64
	// HistoryBlocks is how many recent blocks of a conversation the read
	// model keeps in memory and in its snapshot (it drops older closed
	// ones once it holds twice as many; history.go); older blocks, their
	// output spans and prompts are read back from the conversation's
	// events view when asked for. Default 100; negative keeps every block.
	HistoryBlocks int
}

// Default output caps (issue 16 §3).
const (
	DefaultBlockOutputCap        int64 = 64 << 20
	DefaultConversationOutputCap int64 = 1 << 30
)

// DefaultIdleTimeout is Options.IdleTimeout when none is given.
const DefaultIdleTimeout = 30 * time.Minute

// Request is the idempotency information of a client request: its id and
// body hash. The event that records the act carries them with the
// response snapshot, so a retry returns that snapshot and acts no more.
type Request struct {
	ID   string
	Hash string
}

// Manager owns every conversation's shell, and the terminal state rebuilt
// from the log.
type Manager struct {
	eng    *engine.Engine
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	root string // the home's real path: spool files are opened beneath it

	stateMu sync.Mutex // guards model; never held across an append
	model
	vouchMu   sync.Mutex       // guards vouches
	vouches   map[string]vouch // conversation → the bytes of its events view read back and checked (history_verify.go)
	staleOnce sync.Once        // the views were marked stale (viewsDamaged)
	hashed    [3]atomic.Int64  // blocks, prompts, inputs of the past checked against their sums (tests)
	snapW     *snapshot.Writer // the model's snapshot writer (nil when read-only)

	mu       sync.Mutex // guards shells, starting, locks, closed
	shells   map[string]*shell
	starting map[string]int // shells being started, by conversation (slotcap.go)
	locks    map[string]chan struct{}
	closed   bool
	closing  chan struct{} // closed when Close starts: waiters return
}

// NewManager returns a manager over eng. It subscribes to the engine (the
// whole terminal history, then every commit), so block numbering and
// spool offsets continue after a restart, and closes blocks a crashed
// daemon left open (CloseCrashed). Shells start on first use.
func NewManager(eng *engine.Engine, opts Options) (*Manager, error) {
	if eng == nil {
		return nil, errors.New("pty: engine is required")
	}
	if opts.Bash == "" {
		opts.Bash = "/bin/bash"
	}
	if opts.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("pty: working directory: %w", err)
		}
		opts.Dir = wd
	}
	if opts.Cols <= 0 {
		opts.Cols = 200
	}
	if opts.Rows <= 0 {
		opts.Rows = 50
	}
	if opts.Term == "" {
		opts.Term = "dumb"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxShells <= 0 {
		opts.MaxShells = 64
	}
	if opts.HistoryBlocks == 0 {
		opts.HistoryBlocks = keepBlocks
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.BlockOutputCap == 0 {
		opts.BlockOutputCap = DefaultBlockOutputCap
	}
	if opts.ConversationOutputCap == 0 {
		opts.ConversationOutputCap = DefaultConversationOutputCap
	}
	if opts.TotalOutputCap == 0 {
		opts.TotalOutputCap = DefaultTotalOutputCap
	}
	root, err := filepath.EvalSymlinks(eng.Home().Dir)
	if err != nil {
		return nil, fmt.Errorf("pty: home: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{eng: eng, opts: opts, ctx: ctx, cancel: cancel, root: root,
		model: newModelKeeping(opts.HistoryBlocks), shells: map[string]*shell{}, locks: map[string]chan struct{}{},
		closing: make(chan struct{})}
	// The read model: its snapshot if it can be trusted, then the log
	// after it (snapshot.go).
	if err := m.openModel(); err != nil {
		cancel()
		return nil, err
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := m.closeCrashed(cctx); err != nil {
		cancel()
		return nil, err
	}
	if opts.IdleTimeout > 0 {
		m.wg.Add(1)
		go m.reapLoop()
	}
	return m, nil
}

func (m *Manager) logf(format string, args ...any) {
	m.opts.Logger.Error(fmt.Sprintf(format, args...))
}

func newID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return prefix + strings.ReplaceAll(id.String(), "-", "")
}

// lockChan is conv's per-PTY lock (a one-slot channel), made on first use;
// ErrClosed once the manager is closed.
func (m *Manager) lockChan(conv string) (chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	l := m.locks[conv]
	if l == nil {
		l = make(chan struct{}, 1)
		m.locks[conv] = l
	}
	return l, nil
}

// lock takes the per-PTY lock of conv (seed §6.1), honouring ctx.
func (m *Manager) lock(ctx context.Context, conv string) (func(), error) {
	if err := validConv(conv); err != nil {
		return nil, err
	}
	l, err := m.lockChan(conv)
	if err != nil {
		return nil, err
	}
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.closing:
		return nil, ErrClosed
	}
}

// awaitChange waits for a commit to a conversation (changed, its
// convState.changed: true) or for timeout (false), and fails when ctx ends
// or the manager closes: the one wait of the calls that are woken by each
// commit, never by a timer loop.
func (m *Manager) awaitChange(ctx context.Context, changed <-chan struct{}, timeout <-chan time.Time) (bool, error) {
	select {
	case <-changed:
		return true, nil
	case <-timeout:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-m.closing:
		return false, ErrClosed
	}
}

func validConv(conv string) error {
	if err := home.ValidateID(conv); err != nil {
		return fmt.Errorf("%w: conversation id: %v", ErrInvalidArgument, err)
	}
	return nil
}

// liveShell returns conv's running shell, starting one (and waiting for its
// first prompt) when there is none. Caller holds the per-PTY lock.
func (m *Manager) liveShell(ctx context.Context, conv string) (*shell, error) {
	m.mu.Lock()
	sh := m.shells[conv]
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	live := false
	m.snapshot(conv, func(c *convState) { live = c.live && sh != nil && c.shellID == sh.id })
	if live && sh.alive() {
		return sh, nil
	}
	if sh != nil {
		// Its end is recorded (or about to be): wait for its goroutines.
		select {
		case <-sh.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return m.spawn(ctx, conv, "")
}

func (m *Manager) spawn(ctx context.Context, conv, shellID string) (*shell, error) {
	sh, err := m.startShell(ctx, conv, shellID)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(m.opts.ReadyTimeout)
	defer t.Stop()
	select {
	case <-sh.ready:
		return sh, nil
	case <-sh.done:
		return nil, fmt.Errorf("pty: %s: shell exited before its first prompt", conv)
	case <-t.C:
		sh.stop(context.Background(), "start_timeout")
		return nil, fmt.Errorf("pty: %s: shell printed no prompt within %s", conv, m.opts.ReadyTimeout)
	case <-ctx.Done():
		sh.stop(context.Background(), "start_cancelled")
		return nil, ctx.Err()
	}
}

// snapshot runs f on conv's state under the state lock.
func (m *Manager) snapshot(conv string, f func(c *convState)) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	f(m.conv(conv))
}

// ExecResult is the response of exec_block (seed §5.1) plus
// resume_cursor: the spool size before the command was typed, so a wait
// from it sees all of the block's output and its prompt (issue 25).
type ExecResult struct {
	OK           bool   `json:"ok"`
	BlockID      string `json:"block_id"`
	Seq          int    `json:"seq"`
	TS           int64  `json:"ts"`
	ResumeCursor int64  `json:"resume_cursor"`
}

// InteractiveResult is the response of exec_interactive (seed §5.2).
type InteractiveResult struct {
	OK           bool   `json:"ok"`
	SessionID    string `json:"session_id"`
	BlockID      string `json:"block_id"`
	TsBegin      int64  `json:"ts_begin"`
	ResumeCursor int64  `json:"resume_cursor"`
}

// OKResult is {ok}.
type OKResult struct {
	OK bool `json:"ok"`
}

// ExecBlock runs cmd as a block (seed §5.1). The pty.block.begin event
// (carrying req) is durable before the command is typed, so a retry can
// never run it twice.
func (m *Manager) ExecBlock(ctx context.Context, conv, cmd, cwd string, req Request) (ExecResult, error) {
	var res ExecResult
	err := m.begin(ctx, conv, cmd, cwd, "block", req, func(b events.Block) any {
		res = ExecResult{OK: true, BlockID: b.BlockID, Seq: b.Seq, TS: b.TsBegin, ResumeCursor: b.SpoolBegin}
		return res
	})
	return res, err
}

// ExecInteractive starts cmd as an interactive session (seed §5.2);
// resume_cursor is the spool size when the session began.
func (m *Manager) ExecInteractive(ctx context.Context, conv, cmd, cwd string, req Request) (InteractiveResult, error) {
	var res InteractiveResult
	err := m.begin(ctx, conv, cmd, cwd, "interactive", req, func(b events.Block) any {
		res = InteractiveResult{OK: true, SessionID: b.SessionID, BlockID: b.BlockID, TsBegin: b.TsBegin, ResumeCursor: b.SpoolBegin}
		return res
	})
	return res, err
}

func (m *Manager) begin(ctx context.Context, conv, cmd, cwd, mode string, req Request, respond func(events.Block) any) error {
	if err := validConv(conv); err != nil {
		return err
	}
	if strings.ContainsRune(cmd, 0) || strings.ContainsRune(cwd, 0) {
		return fmt.Errorf("%w: cmd and cwd may not contain NUL bytes", ErrInvalidArgument)
	}
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return err
	}
	defer unlock()
	// Reject before starting a shell: a mode left by the log wins.
	if err := m.checkIdle(conv); err != nil {
		return err
	}
	sh, err := m.liveShell(ctx, conv)
	if err != nil {
		return err
	}
	if err := m.checkIdle(conv); err != nil {
		return err
	}
	b := events.Block{BlockID: newID("blk_"), Mode: mode, ShellID: sh.id, Cmd: cmd, Status: events.BlockRunning}
	if mode == "interactive" {
		b.SessionID = newID("ses_")
		b.Status = events.BlockInteractive
	}
	if err := m.read(conv, heldOnly, func(c *convState) {
		b.Seq = c.blockCount() + 1
		b.SpoolBegin = c.size()
		b.Cwd = cwd
		if b.Cwd == "" {
			b.Cwd = m.opts.Dir
			if n := len(c.prompts); n > 0 {
				b.Cwd = c.prompts[n-1].cwd
			}
		}
	}); err != nil {
		return err
	}
	b.TsBegin = time.Now().UnixMilli()
	b.OutputPath = "blocks/" + b.BlockID + ".out"
	line := commandLine(cmd, cwd)
	resp, err := json.Marshal(respond(b))
	if err != nil {
		return err
	}
	beginEv := events.MustNew(conv, &events.PtyBlockBegin{Block: b})
	beginEv.TS = b.TsBegin
	if req.ID != "" {
		beginEv.WithRequest(req.ID, req.Hash, resp)
	}
	inEv := events.MustNew(conv, &events.PtyInput{Data: []byte(line), BlockID: b.BlockID, Source: "exec"})
	inEv.TS = b.TsBegin
	if _, err := m.eng.Append(ctx, beginEv, inEv); err != nil {
		return fmt.Errorf("pty: record block begin: %w", err)
	}
	sh.type_([]byte(line))
	sh.closeIfDead(ctx, b.BlockID)
	return nil
}

func (m *Manager) checkIdle(conv string) error {
	var mode, active string
	m.snapshot(conv, func(c *convState) { mode, active = c.mode(), c.active })
	switch mode {
	case ModeInteractive:
		return fmt.Errorf("%w: interactive session %s is running; end it (end_session) or wait for its prompt before exec_block", ErrInteractive, active)
	case ModeBlockRunning:
		return fmt.Errorf("%w: block %s is running", ErrBusy, active)
	}
	return nil
}

// commandLine is the one line typed into the shell for cmd: always a
// single line (so one command line yields one prompt), quoted with $'…'
// so any byte survives.
func commandLine(cmd, cwd string) string {
	if cwd != "" {
		// The block runs in cwd; the shell's directory is given back
		// after it (also when the command cd'ed), so later blocks run
		// where the conversation was. $? is the command's (or cd's).
		return "__fws_d=$PWD; builtin cd -- " + ansiQuote(cwd) + " && eval " + ansiQuote(cmd) +
			"; __fws_r=$?; builtin cd -- \"$__fws_d\" 2>/dev/null; (exit $__fws_r)\n"
	}
	return "eval " + ansiQuote(cmd) + "\n"
}

func ansiQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}

// SendResult is the response of send: seed §5.6's {ok} plus
// resume_cursor, the spool size before the data was typed, so a wait from
// it sees the program's whole reaction (issue 25).
type SendResult struct {
	OK           bool  `json:"ok"`
	ResumeCursor int64 `json:"resume_cursor"`
}

// Send types data into the terminal (seed §5.6). The pty.input event
// (carrying req) is durable before the bytes are written.
func (m *Manager) Send(ctx context.Context, conv string, data []byte, req Request) (SendResult, error) {
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return SendResult{}, err
	}
	defer unlock()
	res := SendResult{OK: true}
	err = m.typeInput(ctx, conv, data, "send", req, func(size int64) any {
		res.ResumeCursor = size
		return res
	})
	return res, err
}

// typeInput records and types data. respond gets the spool size before
// the input (the answer's resume_cursor) and returns the answer recorded
// with req.
func (m *Manager) typeInput(ctx context.Context, conv string, data []byte, source string, req Request, respond func(size int64) any) error {
	sh, err := m.liveShell(ctx, conv)
	if err != nil {
		return err
	}
	var active string
	var size int64
	m.snapshot(conv, func(c *convState) { active, size = c.active, c.size() })
	res := respond(size)
	ev := events.MustNew(conv, &events.PtyInput{Data: data, BlockID: active, Source: source})
	if req.ID != "" {
		resp, err := json.Marshal(res)
		if err != nil {
			return err
		}
		ev.WithRequest(req.ID, req.Hash, resp)
	}
	if _, err := m.eng.Append(ctx, ev); err != nil {
		return fmt.Errorf("pty: record input: %w", err)
	}
	sh.type_(data)
	return nil
}

// ExpectSend waits for a match and then types send, atomically under the
// per-PTY lock (seed §4.6, §6.2). On timeout nothing is typed.
func (m *Manager) ExpectSend(ctx context.Context, conv string, w WaitParams, data []byte, req Request) (WaitResult, error) {
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return WaitResult{}, err
	}
	defer unlock()
	res, err := m.WaitFor(ctx, conv, w)
	if err != nil || !res.Matched {
		return res, err
	}
	// resume_cursor stays the match's end: before the input, and nothing
	// between the match and the input is skipped.
	return res, m.typeInput(ctx, conv, data, "expect_send", req, func(int64) any { return res })
}

// StatusResult is the response of status (seed §5.5) plus what an operator
// needs when the prompt does not come back: the foreground command.
type StatusResult struct {
	OK              bool   `json:"ok"`
	Mode            string `json:"mode"`
	ActiveSessionID string `json:"active_session_id,omitempty"`
	ActiveBlockID   string `json:"active_block_id,omitempty"`
	ShellID         string `json:"shell_id,omitempty"`
	ResumeCursor    int64  `json:"resume_cursor"`
	ShellAlive      bool   `json:"shell_alive"`
	ShellPid        int    `json:"shell_pid,omitempty"`
	Foreground      string `json:"foreground,omitempty"`
	ForegroundPgid  int    `json:"foreground_pgid,omitempty"`
	Blocks          int    `json:"blocks"`
	// The output caps (negative: none) and what was dropped past them:
	// over the conversation, and for the running block with its size.
	BlockOutputCap        int64 `json:"block_output_cap"`
	ConversationOutputCap int64 `json:"conversation_output_cap"`
	// TotalOutputCap bounds every conversation's spool together;
	// TotalStoredBytes is their size now.
	TotalOutputCap     int64 `json:"total_output_cap"`
	TotalStoredBytes   int64 `json:"total_stored_bytes"`
	Dropped            int64 `json:"dropped_bytes"`
	ActiveBlockBytes   int64 `json:"active_block_bytes,omitempty"`
	ActiveBlockDropped int64 `json:"active_block_dropped_bytes,omitempty"`
	// InputCursor is the spool size when the last input (exec, send,
	// expect_send, interrupt) was recorded: a wait from it sees the whole
	// reaction to it ('cmlab pty wait --from input').
	InputCursor int64 `json:"input_cursor"`
}

// Status reports the terminal's mode and cursor.
func (m *Manager) Status(ctx context.Context, conv string) (StatusResult, error) {
	if err := validConv(conv); err != nil {
		return StatusResult{}, err
	}
	res := StatusResult{OK: true}
	var live bool
	if err := m.read(conv, heldOnly, func(c *convState) {
		live = c.live
		res.Mode = c.mode()
		res.ActiveBlockID = c.active
		if b := c.activeBlock(); b != nil {
			res.ActiveSessionID = b.SessionID
		}
		res.ShellID = c.shellID
		res.ResumeCursor = c.size()
		res.InputCursor = c.lastInputCursor()
		res.Blocks = c.blockCount()
		res.Dropped = c.dropped
		if c.active != "" {
			res.ActiveBlockBytes = c.blockBytes(c.active)
			res.ActiveBlockDropped = c.blkDrop[c.active]
		}
	}); err != nil {
		return StatusResult{}, err
	}
	res.BlockOutputCap, res.ConversationOutputCap = m.opts.BlockOutputCap, m.opts.ConversationOutputCap
	res.TotalOutputCap = m.opts.TotalOutputCap
	m.stateMu.Lock()
	res.TotalStoredBytes = m.otherSpools("")
	m.stateMu.Unlock()
	m.mu.Lock()
	sh := m.shells[conv]
	m.mu.Unlock()
	// The log says first (pty.session.ended commits before the shell's
	// goroutines finish).
	if sh != nil && sh.alive() && live {
		res.ShellAlive, res.ShellPid = true, sh.pid
		res.ShellID = sh.id
		res.ForegroundPgid, res.Foreground = sh.foreground()
	}
	return res, nil
}

// EndResult is the response of end_session. shell_ended says the
// conversation's shell was stopped and its slot freed.
type EndResult struct {
	OK         bool   `json:"ok"`
	Mode       string `json:"mode"`
	BlockID    string `json:"block_id,omitempty"`
	Ended      bool   `json:"ended"`
	Forced     bool   `json:"forced"`
	Reset      bool   `json:"reset"`
	ShellEnded bool   `json:"shell_ended"`
}

// EndSession ends the conversation (seed §7.1): the running session or
// block first — Ctrl+C to the foreground process group; if the prompt does
// not come back within grace, SIGKILL the foreground group; if still not,
// the shell is torn down with it — and then the shell itself, which frees
// its slot among Options.MaxShells. The next exec starts a new shell.
func (m *Manager) EndSession(ctx context.Context, conv string, grace time.Duration) (EndResult, error) {
	if err := validConv(conv); err != nil {
		return EndResult{}, err
	}
	if grace <= 0 {
		grace = 2 * time.Second
	}
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return EndResult{}, err
	}
	defer unlock()
	res, err := m.endActive(ctx, conv, grace)
	if err != nil {
		return EndResult{}, err
	}
	if res.ShellEnded, err = m.endShellLocked(ctx, conv, "end_session"); err != nil {
		return EndResult{}, err
	}
	return res, nil
}

// endActive ends conv's running block or session, if any (the first half of
// EndSession). Caller holds the per-PTY lock.
func (m *Manager) endActive(ctx context.Context, conv string, grace time.Duration) (EndResult, error) {
	var active string
	m.snapshot(conv, func(c *convState) { active = c.active })
	if active == "" {
		return EndResult{OK: true, Mode: ModeIdle}, nil
	}
	res := EndResult{OK: true, BlockID: active, Ended: true, Mode: ModeIdle}
	m.mu.Lock()
	sh := m.shells[conv]
	m.mu.Unlock()
	if sh == nil || !sh.alive() {
		// Left open by the log without a shell: close it as crashed.
		return res, m.closeOrphan(ctx, conv)
	}
	if err := m.interrupt(ctx, conv, sh, active, Request{}, 0); err != nil {
		return EndResult{}, err
	}
	if m.awaitEnd(ctx, conv, active, grace) {
		return res, nil
	}
	res.Forced = true
	if pg, _ := sh.foreground(); pg > 0 {
		syscall.Kill(-pg, syscall.SIGKILL)
		if m.awaitEnd(ctx, conv, active, grace) {
			return res, nil
		}
	}
	// The shell goes with the block: its END is recorded as cancelled.
	res.Reset = true
	_, err := m.endShellLocked(ctx, conv, "end_session")
	return res, err
}

// endShellLocked stops conv's shell, if one runs, and frees its slot; its
// end (and that of a block still open) is recorded with reason. Caller
// holds the per-PTY lock.
func (m *Manager) endShellLocked(ctx context.Context, conv, reason string) (bool, error) {
	m.mu.Lock()
	sh := m.shells[conv]
	delete(m.shells, conv)
	m.mu.Unlock()
	if sh == nil {
		return false, nil
	}
	wasAlive := sh.alive()
	if err := sh.stop(ctx, reason); err != nil {
		return wasAlive, err
	}
	return wasAlive, nil
}

// Interrupt types Ctrl+C into conv's terminal for its running block or
// session and returns at once; the block's END follows when the program
// gives the prompt back (status cancelled, reason interrupted). This is
// what 'cmlab pty exec' forwards when the user presses Ctrl+C. With
// nothing running it does nothing and says so (interrupted false).
func (m *Manager) Interrupt(ctx context.Context, conv string, req Request) (InterruptResult, error) {
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return InterruptResult{}, err
	}
	defer unlock()
	var active string
	var size int64
	m.snapshot(conv, func(c *convState) { active, size = c.active, c.size() })
	res := InterruptResult{OK: true, BlockID: active, ResumeCursor: size}
	m.mu.Lock()
	sh := m.shells[conv]
	m.mu.Unlock()
	if active == "" || sh == nil || !sh.alive() {
		return res, nil
	}
	res.Interrupted = true
	return res, m.interrupt(ctx, conv, sh, active, req, size)
}

// InterruptResult is the response of interrupt; resume_cursor is the spool
// size before Ctrl+C was typed.
type InterruptResult struct {
	OK           bool   `json:"ok"`
	BlockID      string `json:"block_id,omitempty"`
	Interrupted  bool   `json:"interrupted"`
	ResumeCursor int64  `json:"resume_cursor"`
}

// interrupt records and types Ctrl+C for block active. Caller holds the
// per-PTY lock.
func (m *Manager) interrupt(ctx context.Context, conv string, sh *shell, active string, req Request, size int64) error {
	sh.qmu.Lock()
	sh.interrupted = true
	sh.qmu.Unlock()
	ev := events.MustNew(conv, &events.PtyInput{Data: []byte{3}, BlockID: active, Source: "interrupt"})
	if req.ID != "" {
		resp, err := json.Marshal(InterruptResult{OK: true, BlockID: active, Interrupted: true, ResumeCursor: size})
		if err != nil {
			return err
		}
		ev.WithRequest(req.ID, req.Hash, resp)
	}
	if _, err := m.eng.Append(ctx, ev); err != nil {
		return fmt.Errorf("pty: record interrupt: %w", err)
	}
	sh.type_([]byte{3}) // the line discipline signals the foreground group
	return nil
}

// awaitEnd waits until block id has ended.
func (m *Manager) awaitEnd(ctx context.Context, conv, id string, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		var ch chan struct{}
		var open bool
		m.snapshot(conv, func(c *convState) { ch, open = c.changed, c.active == id })
		if !open {
			return true
		}
		if more, _ := m.awaitChange(ctx, ch, t.C); !more {
			return false
		}
	}
}

// ResetResult is the response of reset.
type ResetResult struct {
	OK           bool   `json:"ok"`
	ShellID      string `json:"shell_id"`
	OldShellID   string `json:"old_shell_id,omitempty"`
	ResumeCursor int64  `json:"resume_cursor"`
}

// Reset kills the shell and every process of its session, records
// pty.session.reset and starts a new shell (seed §7.2). The spool and the
// blocks stay.
func (m *Manager) Reset(ctx context.Context, conv, reason string) (ResetResult, error) {
	unlock, err := m.lock(ctx, conv)
	if err != nil {
		return ResetResult{}, err
	}
	defer unlock()
	if reason == "" {
		reason = "reset"
	}
	return m.resetLocked(ctx, conv, reason)
}

func (m *Manager) resetLocked(ctx context.Context, conv, reason string) (ResetResult, error) {
	m.mu.Lock()
	old := m.shells[conv]
	delete(m.shells, conv)
	m.mu.Unlock()
	res := ResetResult{OK: true}
	if old != nil {
		res.OldShellID = old.id
		if err := old.stop(ctx, "reset"); err != nil {
			return ResetResult{}, err
		}
	} else {
		m.snapshot(conv, func(c *convState) { res.OldShellID = c.shellID })
	}
	// A block the log still holds open (no shell of ours ran it) is closed now.
	if err := m.closeOrphan(ctx, conv); err != nil {
		return ResetResult{}, err
	}
	newID := newID("sh_")
	ev := events.MustNew(conv, &events.PtySessionReset{OldShellID: res.OldShellID, NewShellID: newID, Reason: reason})
	if _, err := m.eng.Append(ctx, ev); err != nil {
		return ResetResult{}, fmt.Errorf("pty: record reset: %w", err)
	}
	sh, err := m.spawn(ctx, conv, newID)
	if err != nil {
		return ResetResult{}, err
	}
	res.ShellID = sh.id
	m.snapshot(conv, func(c *convState) { res.ResumeCursor = c.size() })
	return res, nil
}

// Close tears down every shell (recording the end of what was open, reason
// "shutdown"), reaps them and stops the background goroutines.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.closing)
	shells := m.shells
	m.shells = map[string]*shell{}
	m.mu.Unlock()
	var errs []error
	for _, sh := range shells {
		if err := sh.stop(ctx, "shutdown"); err != nil {
			errs = append(errs, err)
		}
	}
	m.cancel()
	m.wg.Wait()
	return errors.Join(errs...)
}
