package engine

// Shared is the value an upper layer keeps for the engine's life under
// key: made by open at the first call, the same value at every later
// one (open is not called again; a failed open is retried at the next
// call). A read model with a file of its own that every server on the
// engine reads (the Lab store, package labapi) is opened once this way,
// not once per server: two handles on one file would lock each other out.
// The value closes itself (at the engine's final checkpoint, OnCheckpoint).
func (e *Engine) Shared(key string, open func() (any, error)) (any, error) {
	e.sharedMu.Lock()
	defer e.sharedMu.Unlock()
	if v, ok := e.shared[key]; ok {
		return v, nil
	}
	v, err := open()
	if err != nil {
		return nil, err
	}
	if e.shared == nil {
		e.shared = map[string]any{}
	}
	e.shared[key] = v
	return v, nil
}
