package wal

import (
	"fmt"
	"os"
	"path/filepath"
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
	data, err := os.ReadFile(filepath.Join(dir, last.Name))
	if err != nil {
		return u, fmt.Errorf("wal: %w", err)
	}
	sc := scanSegment(segmentFile{Name: last.Name, First: last.First}, data, true, false)
	u.Written += sc.End
	// The file may have grown since it was listed (a live writer).
	u.Allocated += int64(len(data)) - last.Size
	return u, nil
}
