package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

// startProfile serves `cmlab-bench start --profile`: when CMLAB_START_PROFILE is
// set in the environment, serve writes a CPU profile of its start (from
// here to ready) to $CMLAB_START_PROFILE.cpu and a heap profile at ready to
// $CMLAB_START_PROFILE.heap. The returned function ends it (once; later
// calls do nothing).
func startProfile() func() {
	prefix := os.Getenv("CMLAB_START_PROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + ".cpu")
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			runtime.GC() // the heap profile shows what is live at ready
			if hf, err := os.Create(prefix + ".heap"); err == nil {
				pprof.Lookup("heap").WriteTo(hf, 0)
				hf.Close()
			}
		})
	}
}
