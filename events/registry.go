package events

import (
	"fmt"
	"sort"
)

// Upcaster rewrites a payload, decoded as a generic map, from version N to
// N+1. It must be deterministic.
type Upcaster func(old map[string]any) (map[string]any, error)

// TypeInfo describes one registered event type.
type TypeInfo struct {
	Type    string
	Version int
	New     func() Payload
	// Upcasters[n] turns a version n payload into version n+1.
	Upcasters map[int]Upcaster
}

// The registry is filled once, from init functions of this package, and
// read-only afterwards.
var registry = map[string]*TypeInfo{}

func register(p func() Payload, version int, ups map[int]Upcaster) {
	t := p().EventType()
	if _, dup := registry[t]; dup {
		panic("events: duplicate registration of " + t)
	}
	registry[t] = &TypeInfo{Type: t, Version: version, New: p, Upcasters: ups}
}

func lookup(t string) (*TypeInfo, bool) {
	info, ok := registry[t]
	return info, ok
}

// Lookup returns the registration of type t.
func Lookup(t string) (TypeInfo, bool) {
	info, ok := registry[t]
	if !ok {
		return TypeInfo{}, false
	}
	return *info, true
}

// Types lists every registered type, sorted.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func upcast(info *TypeInfo, from int, raw []byte) ([]byte, error) {
	var m map[string]any
	if err := Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for v := from; v < info.Version; v++ {
		up, ok := info.Upcasters[v]
		if !ok {
			return nil, fmt.Errorf("no upcaster from v%d", v)
		}
		var err error
		if m, err = up(m); err != nil {
			return nil, fmt.Errorf("v%d→v%d: %w", v, v+1, err)
		}
	}
	return Marshal(m)
}
