package pty

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cpty "github.com/creack/pty"

	"github.com/cmlab/cmlab/events"
)

// The rc file of our bash. Line editing is off (--noediting) so the tty's
// echo setting rules; echo is off so typed commands never reach the
// spool. The prompt hook is installed last; its first statement captures
// $?. The nonce lives in shell variables that are never exported, so child
// processes cannot print a valid mark; the file itself is deleted as soon as
// the shell has read it.
const rcTemplate = `# cmlab agent terminal rc (generated, deleted once read)
stty -echo -onlcr 2>/dev/null
PS1=''
PS2=''
unset HISTFILE PROMPT_COMMAND BASH_ENV ENV
__fws_nonce='%[1]s'
__fws_prompt() {
	local __fws_rc=$?
	local LC_ALL=C
	local __fws_ts=${EPOCHREALTIME//[.,]/}
	builtin printf '\033]6973;P;%%s;%%s;%%s;%%s;%%s\a' "$__fws_nonce" "$__fws_rc" "${__fws_ts:0:13}" "${#PWD}" "$PWD"
	return $__fws_rc
}
PS0=$'\033]6973;B;%[1]s\a'
PROMPT_COMMAND=__fws_prompt
`

// shell is one running bash under a pty for one conversation. Its reader
// goroutine reads the pty master into the parser; its appender goroutine
// turns parsed items into events and appends them, coalescing everything
// read while an append is in flight.
type shell struct {
	m      *Manager
	conv   string
	id     string
	nonce  string
	cmd    *exec.Cmd
	master *os.File
	pid    int
	rcDir  string

	ready     chan struct{} // closed once the first prompt is committed
	readyOnce sync.Once
	exited    chan struct{} // closed when cmd.Wait returned
	done      chan struct{} // closed when the appender finished (ends recorded)
	exitCode  *int

	qmu      sync.Mutex
	qcond    *sync.Cond
	queue    []Item
	queued   int
	eof      bool
	eofErr   error
	teardown string // reason set by whoever kills the shell on purpose

	interrupted bool // guarded by qmu: end_session sent Ctrl+C to the running block
	dead        bool // guarded by qmu: the reader saw EOF; no prompt will come

	// endMu makes "is the block still open? then append its END" atomic
	// between the appender's last batch and a block begun on a shell that
	// was dying (closeIfDead), so each block gets exactly one END.
	endMu sync.Mutex

	// Input is written by one writer goroutine, in order: a program that
	// does not read its terminal (a full canonical line buffer) blocks
	// that goroutine, never a request holding the per-PTY lock.
	inq chan []byte

	lastActive atomic.Int64 // unix ns of the last input typed or output read
}

func (sh *shell) touch() { sh.lastActive.Store(time.Now().UnixNano()) }

func (sh *shell) lastActiveTime() time.Time { return time.Unix(0, sh.lastActive.Load()) }

// type_ queues data to be written to the terminal, after everything queued
// before it. It returns at once unless 1024 writes are already pending.
func (sh *shell) type_(data []byte) {
	sh.touch()
	select {
	case sh.inq <- data:
	case <-sh.done:
	}
}

func (sh *shell) writeLoop() {
	defer sh.m.wg.Done()
	for {
		select {
		case data := <-sh.inq:
			if _, err := sh.master.Write(data); err != nil {
				sh.m.logf("pty: %s: type input: %v", sh.conv, err)
			}
		case <-sh.done:
			return
		}
	}
}

// Reader back-pressure: past maxQueued bytes queued the reader stops
// reading, so the program blocks, never a client. The appender takes at
// most maxAppendBytes of output per append (one group commit).
const (
	maxQueued      = 16 << 20
	maxAppendBytes = 4 << 20
)

func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startShell starts bash for conv and its goroutines, and appends
// pty.session.started. The caller waits on sh.ready.
func (m *Manager) startShell(ctx context.Context, conv, shellID string) (*shell, error) {
	if shellID == "" {
		shellID = newID("sh_")
	}
	release, err := m.reserveSlot(conv)
	if err != nil {
		return nil, err
	}
	defer release() // after the shell is in m.shells, or failed
	sh := &shell{m: m, conv: conv, id: shellID, nonce: newNonce(),
		ready: make(chan struct{}), exited: make(chan struct{}), done: make(chan struct{}), inq: make(chan []byte, 1024)}
	sh.qcond = sync.NewCond(&sh.qmu)
	sh.touch()
	dir, err := os.MkdirTemp("", "cmlab-pty-")
	if err != nil {
		return nil, fmt.Errorf("pty: rc dir: %w", err)
	}
	sh.rcDir = dir
	rc := filepath.Join(dir, "rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf(rcTemplate, sh.nonce)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pty: rc file: %w", err)
	}
	cmd := exec.Command(m.opts.Bash, "--noediting", "--noprofile", "--rcfile", rc, "-i")
	cmd.Dir = m.opts.Dir
	cmd.Env = shellEnv(m.opts.Term)
	f, err := cpty.StartWithSize(cmd, &cpty.Winsize{Cols: uint16(m.opts.Cols), Rows: uint16(m.opts.Rows)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pty: start %s: %w", m.opts.Bash, err)
	}
	sh.cmd, sh.master, sh.pid = cmd, f, cmd.Process.Pid
	ev := events.MustNew(conv, &events.PtySessionStarted{ConversationID: conv, ShellID: shellID, Pid: sh.pid,
		Cols: m.opts.Cols, Rows: m.opts.Rows, Cwd: m.opts.Dir})
	if _, err := m.eng.Append(ctx, ev); err != nil {
		sh.kill()
		cmd.Wait()
		f.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pty: record shell start: %w", err)
	}
	// Register under the same lock Close takes, so a shell started while
	// the manager closes is either stopped by Close or never runs.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		sh.kill()
		cmd.Wait()
		f.Close()
		os.RemoveAll(dir)
		m.eng.Append(context.Background(), events.MustNew(conv, &events.PtySessionEnded{ShellID: shellID, Reason: "shutdown"}))
		return nil, ErrClosed
	}
	m.shells[conv] = sh
	m.wg.Add(4)
	m.mu.Unlock()
	go sh.writeLoop()
	go sh.readLoop()
	go sh.waitLoop()
	go sh.appendLoop()
	return sh, nil
}

func shellEnv(term string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PROMPT_COMMAND", "PS0", "PS1", "PS2", "BASH_ENV", "ENV", "HISTFILE", "TERM", "COLUMNS", "LINES":
			continue
		}
		if strings.HasPrefix(k, "BASH_FUNC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TERM="+term)
}

// readLoop reads the master until EOF/EIO and queues parsed items. It
// never waits for the log, only for the queue cap.
func (sh *shell) readLoop() {
	defer sh.m.wg.Done()
	p := NewMarkerParser(sh.nonce)
	buf := make([]byte, 64<<10)
	for {
		n, err := sh.master.Read(buf)
		if n > 0 {
			sh.push(p.Feed(buf[:n]), nil, false)
		}
		if err != nil {
			sh.push(p.Flush(), err, true)
			return
		}
	}
}

func (sh *shell) push(items []Item, err error, eof bool) {
	sh.qmu.Lock()
	defer sh.qmu.Unlock()
	for !eof && sh.queued > maxQueued && !sh.eof {
		sh.qcond.Wait()
	}
	for _, it := range items {
		sh.queue = append(sh.queue, it)
		sh.queued += len(it.Data)
	}
	if eof {
		sh.eof, sh.eofErr = true, err
	}
	sh.qcond.Broadcast()
}

// waitLoop reaps bash. A shell that exited while a background child still
// holds the pty open would leave the reader waiting: after a grace period
// the session's leftovers are killed so the pty reports EOF.
func (sh *shell) waitLoop() {
	defer sh.m.wg.Done()
	err := sh.cmd.Wait()
	code := exitCodeOf(sh.cmd.ProcessState, err)
	sh.qmu.Lock()
	sh.exitCode = &code
	sh.qmu.Unlock()
	close(sh.exited)
	select {
	case <-sh.done:
		return
	case <-time.After(500 * time.Millisecond):
	}
	killSession(sh.pid)
	select {
	case <-sh.done:
	case <-time.After(3 * time.Second):
		sh.master.Close() // unblocks the reader
	}
}

func exitCodeOf(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// appendLoop turns queued items into events. Everything queued while the
// previous append was in flight goes into the next one (one fsync for
// many reads).
func (sh *shell) appendLoop() {
	defer sh.m.wg.Done()
	defer close(sh.done)
	m := sh.m
	beginSeen := map[string]bool{}
	var drop dropState // output dropped past a cap, for the block (or no-block stretch) dropping it
	var outBuf []byte  // the output of one append, reused
	for {
		sh.qmu.Lock()
		for len(sh.queue) == 0 && !sh.eof {
			sh.qcond.Wait()
		}
		// One append carries at most maxAppendBytes of output (whole
		// items): a flood is group-committed in chunks of that size, its
		// buffers reused, instead of one append of all that was queued.
		n, taken := 0, 0
		for n < len(sh.queue) && (n == 0 || taken+len(sh.queue[n].Data) <= maxAppendBytes) {
			taken += len(sh.queue[n].Data)
			n++
		}
		items := sh.queue[:n:n]
		eof, eofErr := sh.eof && n == len(sh.queue), sh.eofErr
		sh.touch()
		if n == len(sh.queue) {
			sh.queue = nil
		} else {
			sh.queue = sh.queue[n:]
		}
		sh.queued -= taken
		interrupted := sh.interrupted
		if eof {
			sh.dead = true
		}
		sh.qcond.Broadcast()
		sh.qmu.Unlock()
		if eof {
			sh.endMu.Lock()
		}

		m.stateMu.Lock()
		c := m.conv(sh.conv)
		off := c.size()
		others := m.otherSpools(sh.conv)
		last := c.lastByte()
		var cur events.Block
		if b := c.activeBlock(); b != nil {
			cur = *b
		}
		blkBytes := c.blockBytes(cur.BlockID)
		m.stateMu.Unlock()

		var evs []*events.Event
		// marker appends a pty.truncated whose line is text, on a line of
		// its own.
		marker := func(text string, dropped int64, scope string) {
			line := text
			if last != '\n' {
				line = "\n" + line
			}
			evs = append(evs, events.MustNew(sh.conv, &events.PtyTruncated{BlockID: cur.BlockID, SpoolOffset: off,
				Line: line, Dropped: dropped, Limit: m.capLimit(scope), Scope: scope}))
			off += int64(len(line))
			if cur.BlockID != "" {
				blkBytes += int64(len(line))
			}
			last = '\n'
		}
		// closeDrops writes the count of the bytes dropped after the first
		// marker (before a block's END, or when the stretch of output it
		// dropped from ends) and returns the stretch's total.
		closeDrops := func() int64 {
			total := drop.total
			// Once a marker is out, the count always follows, even when
			// the whole overflow came in the first marker's batch.
			if drop.marked {
				marker(fmt.Sprintf("[cmlab: %d bytes of output dropped in all past the %s cap]\n", drop.total, drop.scope),
					drop.pending, drop.scope)
			}
			drop = dropState{block: cur.BlockID}
			return total
		}
		if drop.block != cur.BlockID {
			// The stretch that dropped output ended without an END of ours
			// (no-block output, or a block closed elsewhere).
			if drop.marked {
				saved := cur
				cur = events.Block{} // never into a block already ended
				closeDrops()
				cur = saved
			}
			drop = dropState{block: cur.BlockID}
		}
		// out gathers the output between prompts, sized once for the
		// batch: growing it by appends copied a flood's bytes twice more.
		var out []byte
		outCap := 0
		for _, it := range items {
			if it.Kind == ItemOutput {
				outCap += len(it.Data)
			}
		}
		if cap(outBuf) < outCap {
			outBuf = make([]byte, 0, max(outCap, 64<<10))
		}
		flush := func() {
			if len(out) > 0 {
				// The caps: what the block and the conversation may still
				// store; the rest is dropped and counted.
				keep, scope := int64(len(out)), ""
				if bc := m.opts.BlockOutputCap; bc >= 0 && cur.BlockID != "" && bc-blkBytes < keep {
					keep, scope = max(0, bc-blkBytes), events.TruncatedBlock
				}
				if cc := m.opts.ConversationOutputCap; cc >= 0 && cc-off < keep {
					keep, scope = max(0, cc-off), events.TruncatedConversation
				}
				if tc := m.opts.TotalOutputCap; tc >= 0 && tc-others-off < keep {
					keep, scope = max(0, tc-others-off), events.TruncatedTotal
				}
				dropped := int64(len(out)) - keep
				out = out[:keep]
				if cur.BlockID != "" {
					blkBytes += keep
				}
				for len(out) > 0 {
					n := min(len(out), maxOutputEvent)
					evs = append(evs, events.MustNew(sh.conv, &events.PtyOutput{BlockID: cur.BlockID, SpoolOffset: off, Data: out[:n]}))
					off += int64(n)
					last = out[n-1]
					out = out[n:]
				}
				if dropped > 0 {
					drop.total += dropped
					if !drop.marked {
						drop.marked, drop.scope = true, scope
						marker(fmt.Sprintf("[cmlab: output truncated at the %s cap of %d bytes%s; further output is dropped and counted]\n", scope, m.capLimit(scope), capHint(scope)),
							dropped, scope)
					} else {
						drop.pending += dropped
					}
				}
			}
			out = nil
		}
		sawPrompt := false
		for _, it := range items {
			switch it.Kind {
			case ItemOutput:
				if out == nil {
					out = outBuf[:0] // the events copy it: reused after the append
				}
				out = append(out, it.Data...)
			case ItemBegin:
				if cur.BlockID != "" {
					beginSeen[cur.BlockID] = true
				}
			case ItemPrompt:
				flush()
				sawPrompt = true
				exit := it.Exit
				// A prompt ends the active block once the shell has begun it
				// (PS0 mark). An interrupt that reaches the shell before it
				// runs the line flushes the typed line: the prompt that
				// follows ends the block too.
				ending := cur.BlockID != "" && (beginSeen[cur.BlockID] || interrupted)
				var dropped int64
				if ending {
					dropped = closeDrops() // its last marker goes before the prompt
				}
				line := fmt.Sprintf("__FWS_PROMPT__ ts=%d cwd_b64=%s exit=%d\n", it.TS, base64.StdEncoding.EncodeToString([]byte(it.Cwd)), exit)
				if last != '\n' {
					line = "\n" + line // the sentinel always starts a line of its own
				}
				pr := &events.PtyPrompt{PromptTS: it.TS, Cwd: it.Cwd, ExitCode: &exit, SpoolOffset: off, Line: line}
				if ending {
					pr.BlockID = cur.BlockID
				}
				evs = append(evs, events.MustNew(sh.conv, pr))
				start := off
				off += int64(len(line))
				last = '\n'
				if ending {
					b := cur
					b.Dropped = dropped
					b.TsEnd = it.TS
					b.ExitCode = &exit
					b.SpoolEnd = start
					switch {
					case interrupted && exit != 0:
						b.Status, b.Reason = events.BlockCancelled, "interrupted"
					case exit == 0 || b.Mode == "interactive":
						// An interactive session that came back to the prompt
						// completed; its exit code tells how (seed §8.3).
						b.Status = events.BlockCompleted
					default:
						b.Status = events.BlockFailed
					}
					evs = append(evs, events.MustNew(sh.conv, &events.PtyBlockEnd{Block: b}))
					delete(beginSeen, cur.BlockID)
					cur = events.Block{}
					drop = dropState{}
					sh.qmu.Lock()
					sh.interrupted = false
					sh.qmu.Unlock()
					interrupted = false
				}
			}
		}
		flush()
		if eof {
			dropped := closeDrops()
			evs = append(evs, sh.endEvents(cur, off, dropped, eofErr)...)
		}
		if len(evs) > 0 {
			if _, err := m.eng.Append(m.ctx, evs...); err != nil {
				m.logf("pty: %s: append terminal output: %v", sh.conv, err)
			}
		}
		if sawPrompt {
			sh.readyOnce.Do(func() {
				os.RemoveAll(sh.rcDir)
				close(sh.ready)
			})
		}
		if eof {
			sh.endMu.Unlock()
			os.RemoveAll(sh.rcDir)
			sh.master.Close()
			return
		}
	}
}

// closeIfDead ends block id when the shell died before the block could
// run: its BEGIN committed after the appender's last look at the state.
func (sh *shell) closeIfDead(ctx context.Context, id string) {
	sh.qmu.Lock()
	dead := sh.dead
	sh.qmu.Unlock()
	if !dead {
		return
	}
	sh.endMu.Lock()
	defer sh.endMu.Unlock()
	var b events.Block
	var open bool
	var off int64
	sh.m.snapshot(sh.conv, func(c *convState) {
		if c.active == id {
			b, open, off = *c.byID[id], true, c.size()
		}
	})
	if !open {
		return
	}
	sh.qmu.Lock()
	code, reason := sh.exitCode, sh.teardown
	sh.qmu.Unlock()
	b.Status, b.Reason, b.ExitCode, b.TsEnd, b.SpoolEnd = events.BlockFailed, "shell_exited", code, time.Now().UnixMilli(), off
	if reason != "" {
		b.Status, b.Reason = events.BlockCancelled, reason
	}
	if _, err := sh.m.eng.Append(ctx, events.MustNew(sh.conv, &events.PtyBlockEnd{Block: b})); err != nil {
		sh.m.logf("pty: %s: close block of a dead shell: %v", sh.conv, err)
	}
}

// dropState is what the appender has dropped past a cap for one block
// (block "" for output outside blocks): the first marker is written when
// the cap is crossed, the bytes dropped after it are counted (pending) and
// written in a last marker before the block's END.
type dropState struct {
	block   string
	marked  bool
	scope   string
	pending int64
	total   int64
}

// maxOutputEvent caps the data of one pty.output event.
const maxOutputEvent = 256 << 10

// endEvents closes what a dead shell leaves open: its block (one END) and
// the shell itself (pty.session.ended).
func (sh *shell) endEvents(cur events.Block, off, dropped int64, eofErr error) []*events.Event {
	select {
	case <-sh.exited:
	case <-time.After(5 * time.Second):
		sh.kill()
		<-sh.exited
	}
	sh.qmu.Lock()
	code, reason := sh.exitCode, sh.teardown
	sh.qmu.Unlock()
	status := events.BlockCancelled
	if reason == "" {
		reason = "shell_exited"
		if code == nil || *code < 0 {
			reason = "eio"
		}
		status = events.BlockFailed
	}
	var evs []*events.Event
	if cur.BlockID != "" {
		b := cur
		b.TsEnd = time.Now().UnixMilli()
		b.ExitCode = code
		b.Status, b.Reason = status, reason
		b.SpoolEnd, b.Dropped = off, dropped
		evs = append(evs, events.MustNew(sh.conv, &events.PtyBlockEnd{Block: b}))
	}
	sessReason := reason
	if reason == "shell_exited" {
		sessReason = "exited"
	}
	evs = append(evs, events.MustNew(sh.conv, &events.PtySessionEnded{ShellID: sh.id, Reason: sessReason, Exit: code}))
	return evs
}

// kill sends SIGKILL to every process of the shell's session.
func (sh *shell) kill() {
	killSession(sh.pid)
	if sh.cmd != nil && sh.cmd.Process != nil {
		sh.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// stop tears the shell down on purpose (reason goes into the records) and
// waits until its end is recorded and every goroutine has returned.
func (sh *shell) stop(ctx context.Context, reason string) error {
	sh.qmu.Lock()
	if sh.teardown == "" {
		sh.teardown = reason
	}
	sh.qmu.Unlock()
	sh.kill()
	select {
	case <-sh.done:
		return nil
	case <-time.After(3 * time.Second):
		sh.master.Close()
	case <-ctx.Done():
		sh.master.Close()
	}
	select {
	case <-sh.done:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("pty: shell did not stop")
	}
}

// alive reports whether the shell still runs.
func (sh *shell) alive() bool {
	select {
	case <-sh.done:
		return false
	default:
		return true
	}
}

// foreground returns the foreground process group of the pty and its
// command line (empty when the shell itself is in the foreground).
func (sh *shell) foreground() (pgid int, cmdline string) {
	var pg int32
	var errno syscall.Errno
	// SyscallConn, not Fd: Fd would switch the file to blocking mode.
	rc, err := sh.master.SyscallConn()
	if err != nil {
		return 0, ""
	}
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptrOf(&pg))
	}); err != nil {
		return 0, ""
	}
	if errno != 0 || int(pg) == sh.pid || pg <= 0 {
		return 0, ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pg)) + "/cmdline")
	if err != nil {
		return int(pg), ""
	}
	return int(pg), strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// sessionPids lists the live (non-zombie) processes of session sid, read
// from /proc.
func sessionPids(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, state, ok := procSession(pid)
		if ok && s == sid && state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procSession reads the session id and state of pid from /proc/pid/stat.
func procSession(pid int) (sid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// The command name is in parentheses and may hold spaces: parse after ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	// state ppid pgrp session ...
	if len(f) < 4 {
		return 0, "", false
	}
	sid, err = strconv.Atoi(f[3])
	return sid, f[0], err == nil
}

// killSession SIGKILLs every process whose session is sid (the shell is
// the session leader, so sid is its pid), repeating until none is left.
func killSession(sid int) {
	if sid <= 0 {
		return
	}
	for i := 0; i < 20; i++ {
		pids := sessionPids(sid)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
