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
// of BenchAPI (BenchOptions.ProfileDir): api.cpu, api.block, api.mutex.
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
	for _, name := range []string{"block", "mutex"} {
		f, ferr := os.Create(filepath.Join(p.dir, "api."+name))
		if ferr == nil {
			ferr = pprof.Lookup(name).WriteTo(f, 0)
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		if err == nil && ferr != nil {
			err = fmt.Errorf("%s profile: %w", name, ferr)
		}
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
	return err
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
