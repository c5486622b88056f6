package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file in the log directory. tidwall/wal ignores it
// (its name is not 20 digits).
const lockName = "LOCK"

// dirLock is an exclusive flock on dir/LOCK, holding the owner's pid.
type dirLock struct{ f *os.File }

// lockDir takes the exclusive lock of the log in dir. If another process
// (or another open Log of this process) holds it, the error wraps
// ErrLocked and names the holder's pid as written in the file.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockName)
	// Never through a symlink: the pid written below would go over
	// whatever it names (a segment, found by the damage matrix).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wal: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown pid"
			if b, rerr := os.ReadFile(path); rerr == nil && strings.TrimSpace(string(b)) != "" {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("%w: %s is held by %s", ErrLocked, path, holder)
		}
		return nil, fmt.Errorf("wal: lock %s: %w", path, err)
	}
	// The pid is informative only; the flock is the lock.
	// Written in place, then cut to length: truncating to zero first would
	// make ext4 flush the file (auto_da_alloc) on every open.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err == nil {
		_ = f.Truncate(int64(len(pid)))
	}
	return &dirLock{f: f}, nil
}

// LockHolder returns the pid written in dir/LOCK, 0 if none can be read.
// The pid may be stale when nobody holds the lock.
func LockHolder(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}
