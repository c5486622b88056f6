//go:build !race

package engine

// TestRebuildInPlaceEveryByteFlip runs an in-place rebuild for every
// rebuildEvery-th flipped byte (every one) and a plain open for every
// serveEvery-th (race_test.go samples under the race detector).
const (
	rebuildEvery = 1
	serveEvery   = 13
)
