package pty

import (
	"context"

	"github.com/cmlab/cmlab/engine"
)

// Options configure a Manager.
type Options struct{}

// Manager owns every conversation's shell. STUB: the terminal issue fills it in.
type Manager struct{ eng *engine.Engine }

// NewManager returns a manager over eng.
func NewManager(eng *engine.Engine, opts Options) (*Manager, error) { return &Manager{eng: eng}, nil }

// Close tears down every shell and waits for them.
func (m *Manager) Close(ctx context.Context) error { return nil }
