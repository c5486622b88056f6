package labapi

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A run folder is read on every GET of the run, every feedback on it and
// every video asked for without a recorded path, and anyone who can write
// in it can fill it with entries. So it is read a buffer at a time, with
// one buffer, keeping only the names discover may take; its memory does
// not depend on how many entries the folder holds (os.ReadDir read them
// all at once: 11.7 MB for 50,000 names, and gigabytes for a few million
// read by concurrent requests: TestDiscoverHugeRunDir).

// mp4Keep is how many .mp4 names the scan keeps, the smallest by name:
// discover takes the first of them that is a regular file it may serve,
// so a folder whose first mp4Keep such names are all directories or
// refused links is taken as holding no video.
const mp4Keep = 64

// The reports discover takes the first present of, in order.
var (
	syncReportNames    = []string{fileSyncReport, "sync-report-attempt1.json"}
	captionReportNames = []string{fileCaptionReport, "caption-report-attempt1.json", "caption-quality.json"}
)

// runDirNames are the fixed names discover asks about.
var runDirNames = slices.Concat([]string{fileVideo, fileScript, fileTimestamps, fileVisuals, fileScore}, syncReportNames, captionReportNames)

// direntBufs are the scan's buffers, reused across scans.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// scanRunDir lists dir: which of runDirNames it holds, and its mp4Keep
// smallest names that end in .mp4 (any case), in order.
func scanRunDir(dir string) (present map[string]bool, mp4s []string, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	present = map[string]bool{}
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return present, mp4s, err
		}
		if n <= 0 {
			return present, mp4s, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name NUL-terminated.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if len(name) >= 4 && strings.EqualFold(string(name[len(name)-4:]), ".mp4") {
				mp4s = keepSmallest(mp4s, name)
			}
			for _, f := range runDirNames {
				if string(name) == f {
					present[f] = true
				}
			}
		}
	}
}

// keepSmallest inserts name into sorted, which holds at most mp4Keep
// names, if it is among the mp4Keep smallest.
func keepSmallest(sorted []string, name []byte) []string {
	if len(sorted) == mp4Keep && string(name) >= sorted[mp4Keep-1] {
		return sorted
	}
	i, _ := slices.BinarySearch(sorted, string(name))
	if len(sorted) == mp4Keep {
		sorted = sorted[:mp4Keep-1]
	}
	return slices.Insert(sorted, i, string(name))
}
