package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cmlab/cmlab/home"
)

// The daemon's own log (what 'cmlab serve' prints on stderr) is also kept
// in state/daemon.log, so an operator who started it in the background can
// read it with 'cmlab logs'. When the file would pass MaxBytes it is
// rotated: daemon.log → daemon.log.1 → … → daemon.log.<Keep>, the oldest
// dropped. A line is never split across two files.

// DaemonLogFile is the path of h's daemon log.
func DaemonLogFile(h home.Home) string { return filepath.Join(h.StateDir(), "daemon.log") }

// DaemonLogOptions configure OpenDaemonLog. Zero values take the defaults.
type DaemonLogOptions struct {
	MaxBytes int64 // rotate past this size; default 10 MiB
	Keep     int   // rotated files kept; default 3
}

// DaemonLog is an io.Writer appending to state/daemon.log with rotation.
// Safe for concurrent use.
type DaemonLog struct {
	mu   sync.Mutex
	path string
	opts DaemonLogOptions
	f    *os.File
	size int64
}

// OpenDaemonLog opens (creating) h's daemon log for appending.
func OpenDaemonLog(h home.Home, opts DaemonLogOptions) (*DaemonLog, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 10 << 20
	}
	if opts.Keep <= 0 {
		opts.Keep = 3
	}
	// The log is opened before the home's other files (Ensure, which
	// checks all its directories): it must not be written through a
	// linked state/ either.
	if err := h.CheckPath("state"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
		return nil, err
	}
	l := &DaemonLog{path: DaemonLogFile(h), opts: opts}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *DaemonLog) open() error {
	// Never appended through a link (home.OpenOwn): the log is the
	// daemon's own file.
	f, err := home.OpenOwn(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("daemon log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p (one or more whole lines: slog writes a record at once),
// rotating first when p would take the file past MaxBytes.
func (l *DaemonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	if l.size > 0 && l.size+int64(len(p)) > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts daemon.log.N to .N+1 (dropping the last) and starts a new
// daemon.log. Caller holds mu.
func (l *DaemonLog) rotate() error {
	l.f.Close()
	l.f = nil
	os.Remove(l.path + "." + strconv.Itoa(l.opts.Keep))
	for i := l.opts.Keep - 1; i >= 1; i-- {
		os.Rename(l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("daemon log: rotate: %w", err)
	}
	return l.open()
}

// Close closes the file.
func (l *DaemonLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
