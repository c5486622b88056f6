package wal

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
)

// Usage is how many bytes the log's segments hold and how many they take.
type Usage struct {
	// Written is the bytes of entries: every sealed segment whole, the
	// last up to the end of its last valid frame.
	Written int64 `json:"written"`
	// Allocated is the files' sizes: Written plus the preallocated zeros
	// ahead of the writer (prealloc.go) and any torn tail the next Open
	// repairs.
	Allocated int64 `json:"allocated"`
}

// SegmentsUsage reports the Usage of segs, the segments of the log in dir
// as Segments lists them. It reads the last segment (at most the segment
// size) without the log's lock: a writer appending meanwhile makes it a
// moment old, never wrong about what was written before the read.
func SegmentsUsage(dir string, segs []SegmentInfo) (Usage, error) {
	var u Usage
	for _, s := range segs {
		u.Allocated += s.Size
	}
	if len(segs) == 0 {
		return u, nil
	}
	last := segs[len(segs)-1]
	u.Written = u.Allocated - last.Size
	seg := segmentFile{Name: last.Name, First: last.First}
	size, end, err := mappedScan(filepath.Join(dir, last.Name), seg)
	if err != nil {
		data, err := os.ReadFile(filepath.Join(dir, last.Name))
		if err != nil {
			return u, fmt.Errorf("wal: %w", err)
		}
		size, end = int64(len(data)), scanSegment(seg, data, true, false).End
	}
	u.Written += end
	// The file may have grown since it was listed (a live writer).
	u.Allocated += size - last.Size
	return u, nil
}

// mappedScan scans the segment file at path through a read-only mapping
// of it (home.ReadMapped), returning its size and where its last good
// frame ends: reading a 4 MiB segment into a fresh buffer was a quarter
// of a 'cmlab status' on a 10M-event home. A file cut short while mapped
// (a repair beside) is an error here and the caller reads the file.
func mappedScan(path string, seg segmentFile) (size, end int64, err error) {
	err = home.ReadMapped(path, 0, func(b []byte) {
		size, end = int64(len(b)), scanSegment(seg, b, true, false).End
	})
	return size, end, err
}
