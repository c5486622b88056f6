package wal

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	twal "github.com/tidwall/wal"
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

// ProbeWriteBatch times n/batch raw tidwall/wal WriteBatch calls of batch
// copies of entry, without fsync, into segments of segSize bytes in dir
// (`cmlab bench wal`'s stall probe): the pauses tidwall's growing tail
// buffer puts in front of a group. With presize the tail buffers are sized
// ahead as the log sizes them (tailBuf), and the time that takes after a
// cycle is counted in the call that cycled.
func ProbeWriteBatch(dir string, entry []byte, n, batch, segSize int, presize bool) ([]time.Duration, error) {
	tw, err := twal.Open(dir, &twal.Options{NoSync: true, SegmentSize: segSize})
	if err != nil {
		return nil, err
	}
	defer tw.Close()
	var tb *tailBuf
	if presize {
		if tb = newTailBuf(tw, segSize); tb == nil {
			return nil, errors.New("tidwall/wal's layout is not the one tailBuf sizes")
		}
		defer tb.close()
		tb.presize(0)
	}
	frame := uvarintLen(uint64(len(entry))) + len(entry)
	var b twal.Batch
	lat := make([]time.Duration, 0, n/batch+1)
	tail, inSeg := 0, 0
	for i := 1; i <= n; {
		b.Clear()
		k := 0
		for ; k < batch && i <= n; k++ {
			b.Write(uint64(i), entry)
			i++
		}
		t0 := time.Now()
		if err := tw.WriteBatch(&b); err != nil {
			return nil, err
		}
		if tb != nil {
			// tidwall cycles after the entry that brings a segment to segSize.
			prev := -1
			for j := 0; j < k; j++ {
				tail += frame
				inSeg++
				if tail >= segSize {
					prev, tail, inSeg = inSeg, 0, 0
				}
			}
			if prev >= 0 {
				tb.presize(prev)
			}
			if tail >= segSize/2 {
				tb.prepare()
			}
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}
