package labapi

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/wal"
)

// BenchmarkLabStoreBuild times the build of the Lab store from a log of
// the mixed Lab workload (CMLAB_BENCH_LABSTORE_EVENTS events, default
// 100,000), as at a first start or a rebuild: the file removed, then
// opened, caught up from seq 1 and closed. The log is generated once.
// It reports wall time and the process's CPU time per build.
func BenchmarkLabStoreBuild(b *testing.B) {
	n := 100_000
	if s := os.Getenv("CMLAB_BENCH_LABSTORE_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("CMLAB_BENCH_LABSTORE_EVENTS=%q", s)
		}
		n = v
	}
	h := home.Home{Dir: filepath.Join(b.TempDir(), "home")}
	writeLog(b, h, projections.Workload(projections.WorkloadMixedLab, 1, n))
	l, err := wal.Open(wal.Options{Dir: h.WALDir(), QuarantineDir: h.QuarantineDir(), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range b.N {
		if err := os.Remove(LabStoreFile(h)); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		st, err := openLabStore(ctx, labStoreOptions{path: LabStoreFile(h), log: l})
		if err != nil {
			b.Fatal(err)
		}
		if c := st.Covered(); c != l.LastSeq() {
			b.Fatalf("store covers %d, the log ends at %d", c, l.LastSeq())
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if fi, err := os.Stat(LabStoreFile(h)); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(n), "file-bytes/event")
	}
	// CPU time is the steadier figure on a loaded machine (wall time is
	// an upper bound there).
	b.ReportMetric((processCPU(b)-cpu0).Seconds()*1000/float64(b.N), "cpu-ms/op")
}

// processCPU is the user and system time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
