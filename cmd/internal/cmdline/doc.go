// Package cmdline holds what the two binaries, cmlab and cmlab-bench, answer
// alike: which of cobra's errors are usage errors (exit code 2) and how a
// result is printed with --json. Each binary keeps its own commands, its
// usage error type and its exit codes.
package cmdline
