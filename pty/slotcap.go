package pty

import "fmt"

// reserveSlot checks the shell cap and takes a slot for conv in one step
// under m.mu: the shells running for other conversations plus the starts
// other conversations have reserved and not yet registered must be fewer
// than Options.MaxShells. Counting without reserving let 64 concurrent
// first execs each see room and start 64 shells past a cap of 8. The
// returned release gives the reservation back; startShell calls it once
// the shell is registered in m.shells (or failed to start).
func (m *Manager) reserveSlot(conv string) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := 0
	for c, other := range m.shells {
		if c != conv && other.alive() {
			running++
		}
	}
	for c := range m.starting {
		if c != conv {
			running++
		}
	}
	if running >= m.opts.MaxShells {
		return nil, fmt.Errorf("%w: %d conversations have a running shell, the most allowed at once; end one you no longer use", ErrTooManyShells, running)
	}
	if m.starting == nil {
		m.starting = map[string]int{}
	}
	m.starting[conv]++
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.starting[conv]--; m.starting[conv] <= 0 {
			delete(m.starting, conv)
		}
	}, nil
}
