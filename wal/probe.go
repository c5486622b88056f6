package wal

import (
	"os"
	"path/filepath"
	"time"
)

// ProbeSync measures, in dir, the two ways of making chunk-sized writes
// durable that preallocation chooses between (`cmlab bench wal` prints
// them): append each chunk to a growing file and fsync it, as tidwall/wal
// does, or overwrite zeros already written and fdatasync, as the log does.
// It returns n latencies of each, measured from just after the write.
func ProbeSync(dir string, n, chunk int) (appendFsync, zeroDatasync []time.Duration, err error) {
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	run := func(name string, prefill bool) ([]time.Duration, error) {
		path := filepath.Join(dir, name)
		defer os.Remove(path)
		if prefill {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				return nil, err
			}
			if err := zeroFill(path, 0, alignUp(int64(n*chunk), preallocUnit)); err != nil {
				return nil, err
			}
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			if _, err := f.WriteAt(buf, int64(i*chunk)); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if prefill {
				err = datasync(f)
			} else {
				err = f.Sync()
			}
			if err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t0))
		}
		return lat, nil
	}
	if appendFsync, err = run("probe-append", false); err != nil {
		return nil, nil, err
	}
	zeroDatasync, err = run("probe-zeros", true)
	return appendFsync, zeroDatasync, err
}
