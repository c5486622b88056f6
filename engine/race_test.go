//go:build race

package engine

// Under the race detector (about ten times slower)
// TestRebuildInPlaceEveryByteFlip samples positions; without it, it flips
// every byte (norace_test.go).
const (
	rebuildEvery = 17
	serveEvery   = 97
)
