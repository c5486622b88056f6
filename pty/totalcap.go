package pty

import "github.com/cmlab/cmlab/events"

// DefaultTotalOutputCap is Options.TotalOutputCap when none is given: the
// spools of all conversations together (4 GiB of output is about 12 GiB
// on disk: spool, block files, log).
const DefaultTotalOutputCap int64 = 4 << 30

// otherSpools is the size of every spool but conv's; stateMu is held.
func (m *Manager) otherSpools(conv string) int64 {
	var n int64
	for id, c := range m.convs {
		if id != conv {
			n += c.size()
		}
	}
	return n
}

// capLimit is the cap in bytes of a truncation scope.
func (m *Manager) capLimit(scope string) int64 {
	switch scope {
	case events.TruncatedConversation:
		return m.opts.ConversationOutputCap
	case events.TruncatedTotal:
		return m.opts.TotalOutputCap
	}
	return m.opts.BlockOutputCap
}

// capHint is what the first marker of a scope adds after the cap: where
// the cap comes from, for the total one (a conversation cannot raise it).
func capHint(scope string) string {
	if scope == events.TruncatedTotal {
		return " across all conversations (cmlab serve --pty-total-cap)"
	}
	return ""
}
