// Package recovery decides, after a crash, what every durable step is:
// already done, safe to retry, or in need of a human (SPEC §8, seed 002).
package recovery
