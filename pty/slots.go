package pty

import (
	"context"
	"sort"
	"time"
)

// Shell slots: at most Options.MaxShells conversations have a running
// shell. A slot is freed when the shell ends — end_session, the shell's own
// exit, or the idle reaper below — never by reset, which replaces the shell
// in the same slot.

// ShellSlot is one running shell, as 'cmlab pty status' lists it.
type ShellSlot struct {
	ConversationID string `json:"conversation_id"`
	ShellID        string `json:"shell_id"`
	Pid            int    `json:"pid"`
	Mode           string `json:"mode"`
	IdleMs         int64  `json:"idle_ms"` // since the last input or output
}

// SlotsResult is the response of the shell list.
type SlotsResult struct {
	OK            bool        `json:"ok"`
	MaxShells     int         `json:"max_shells"`
	IdleTimeoutMs int64       `json:"idle_timeout_ms"` // 0: never reaped
	Shells        []ShellSlot `json:"shells"`
}

// Slots lists the running shells, by conversation id.
func (m *Manager) Slots(ctx context.Context) SlotsResult {
	res := SlotsResult{OK: true, MaxShells: m.opts.MaxShells, Shells: []ShellSlot{}}
	if m.opts.IdleTimeout > 0 {
		res.IdleTimeoutMs = m.opts.IdleTimeout.Milliseconds()
	}
	m.mu.Lock()
	shells := make([]*shell, 0, len(m.shells))
	for _, sh := range m.shells {
		shells = append(shells, sh)
	}
	m.mu.Unlock()
	now := time.Now()
	for _, sh := range shells {
		if !sh.alive() {
			continue
		}
		slot := ShellSlot{ConversationID: sh.conv, ShellID: sh.id, Pid: sh.pid, IdleMs: now.Sub(sh.lastActiveTime()).Milliseconds()}
		m.snapshot(sh.conv, func(c *convState) { slot.Mode = c.mode() })
		res.Shells = append(res.Shells, slot)
	}
	sort.Slice(res.Shells, func(i, j int) bool { return res.Shells[i].ConversationID < res.Shells[j].ConversationID })
	return res
}

// reapLoop ends the shells of conversations idle for Options.IdleTimeout.
// It is owned by the manager (m.wg) and stops when the manager closes.
func (m *Manager) reapLoop() {
	defer m.wg.Done()
	every := min(max(m.opts.IdleTimeout/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.reapIdle()
		case <-m.closing:
			return
		}
	}
}

// reapIdle ends every shell that is idle and has seen no input or output
// for Options.IdleTimeout. A conversation whose lock is held (a request is
// acting on it) is skipped this round; a running block or interactive
// session is never reaped.
func (m *Manager) reapIdle() {
	m.mu.Lock()
	var idle []string
	for conv, sh := range m.shells {
		if time.Since(sh.lastActiveTime()) >= m.opts.IdleTimeout {
			idle = append(idle, conv)
		}
	}
	m.mu.Unlock()
	for _, conv := range idle {
		unlock, ok := m.tryLock(conv)
		if !ok {
			continue
		}
		m.mu.Lock()
		sh := m.shells[conv]
		m.mu.Unlock()
		var mode string
		m.snapshot(conv, func(c *convState) { mode = c.mode() })
		if sh != nil && mode == ModeIdle && time.Since(sh.lastActiveTime()) >= m.opts.IdleTimeout {
			if _, err := m.endShellLocked(m.ctx, conv, "idle"); err != nil {
				m.logf("pty: %s: end idle shell: %v", conv, err)
			}
		}
		unlock()
	}
}

// tryLock takes conv's per-PTY lock if it is free.
func (m *Manager) tryLock(conv string) (func(), bool) {
	l, err := m.lockChan(conv)
	if err != nil {
		return nil, false
	}
	select {
	case l <- struct{}{}:
		return func() { <-l }, true
	default:
		return nil, false
	}
}
