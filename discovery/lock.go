package discovery

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cmlab/cmlab/home"
	"golang.org/x/sys/unix"
)

// ErrLocked is returned by Acquire when another daemon holds the home.
var ErrLocked = errors.New("another daemon holds the home's daemon lock")

// Lock is a daemon's hold on its home (state/daemon.lock).
type Lock struct{ f *os.File }

// Acquire takes the daemon lock of h, creating state/daemon.lock (0600).
// It does not wait: a held lock is ErrLocked.
func Acquire(h home.Home) (*Lock, error) {
	f, err := os.OpenFile(h.DaemonLockFile(), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, home.FilePerm)
	if err != nil {
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%s: %w", h.Rel(h.DaemonLockFile()), ErrLocked)
		}
		return nil, fmt.Errorf("daemon lock %s: %w", h.Rel(h.DaemonLockFile()), err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock (closing its only descriptor).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Held reports whether a daemon holds the lock of h now. A missing lock
// file is "not held"; a file the caller cannot open is an error (it is not
// the home's owner).
func Held(h home.Home) (bool, error) {
	f, err := os.OpenFile(h.DaemonLockFile(), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, fmt.Errorf("daemon lock %s: %w", h.Rel(h.DaemonLockFile()), err)
	}
	return lk.Type != unix.F_UNLCK, nil
}
