// Package projections builds the views clients read — JSONL stores, spool
// files, idempotency maps — as pure functions of log events (SPEC §4).
package projections
