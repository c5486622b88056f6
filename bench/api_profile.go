package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

// postProfile records the CPU, block and mutex profiles of the timed POSTs
// of BenchAPI (BenchOptions.ProfileDir): api.cpu, api.block, api.mutex; and
// the allocation profile (cumulative since the process started) before and
// after them, api.allocs-before and api.allocs, whose difference is theirs
// (go tool pprof -sample_index=alloc_objects -diff_base api.allocs-before
// api.allocs).
type postProfile struct {
	dir string
	cpu *os.File
}

// start begins the profiles; the block and mutex profiles sample every
// event while they run (profiling costs throughput: the figures of a
// profiled run are not the bench's).
func (p *postProfile) start() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if err := writeProfile(p.dir, "allocs", "api.allocs-before"); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(p.dir, "api.cpu"))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.cpu = f
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	return nil
}

// stop ends the profiles and writes them.
func (p *postProfile) stop() error {
	if p.cpu == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.cpu.Close()
	p.cpu = nil
	for _, name := range []string{"block", "mutex", "allocs"} {
		if ferr := writeProfile(p.dir, name, "api."+name); err == nil && ferr != nil {
			err = ferr
		}
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
	return err
}

// writeProfile writes the runtime profile name into dir/file.
func writeProfile(dir, name, file string) error {
	f, err := os.Create(filepath.Join(dir, file))
	if err == nil {
		err = pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return nil
}

// ProcessCPU is the CPU time (user and system) this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
