//go:build race

package torture

// raceEnabled builds the daemon under test with -race too when the tests run with it.
const raceEnabled = true
