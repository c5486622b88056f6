// Package snapshot writes and reads the snapshot file of one in-memory read
// model (issue 16): the model's state encoded with msgpack, the seq of the
// log it covers and that event's id, the model's name and code version,
// and a CRC-32C over all of it. Write is crash-safe (temporary file →
// fsync → rename → fsync of the directory), so a reader sees the old file
// or the new one, never a mix. Read refuses a file that fails its CRC,
// names another model or another code version (ErrInvalid); the caller
// then rebuilds the model from the log. Start = load the snapshot + apply
// the log after its seq (engine.ResumableObserver).
package snapshot
