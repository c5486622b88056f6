package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/cmlab/cmlab/home"
	"golang.org/x/sys/unix"
)

// ErrPeer is wrapped when the other end of a daemon socket is not who it
// must be (SO_PEERCRED).
var ErrPeer = errors.New("daemon socket peer refused")

// Cred is what the kernel says of the other end of a Unix socket.
type Cred struct{ Pid, UID, GID int }

// PeerCred returns the credentials of c's peer (SO_PEERCRED): the process
// that connected, or for a client the one that listened.
func PeerCred(c net.Conn) (Cred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Cred{}, fmt.Errorf("%w: %T is not a socket", ErrPeer, c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var uc *unix.Ucred
	var oerr error
	if err := rc.Control(func(fd uintptr) { uc, oerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return Cred{}, err
	}
	if oerr != nil {
		return Cred{}, oerr
	}
	return Cred{Pid: int(uc.Pid), UID: int(uc.Uid), GID: int(uc.Gid)}, nil
}

// Listener is the daemon's socket: it accepts only peers of the daemon's
// own uid or root, and closes every other connection at once.
type Listener struct {
	*net.UnixListener
	path    string
	uid     int
	refused atomic.Int64
	// OnRefused, when set, is told of each refused peer (the daemon logs it).
	OnRefused func(Cred)
}

// Conn is an accepted connection with its peer's credentials.
type Conn struct {
	net.Conn
	Cred Cred
}

// Listen binds state/daemon.sock of h (mode 0600), replacing what a dead
// daemon left there. The caller must hold the home's Lock: only then is
// an existing socket file known to be stale.
func Listen(h home.Home) (*Listener, error) {
	path := h.DaemonSocket()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale %s: %w", h.Rel(path), err)
	}
	var ln *net.UnixListener
	err := withShortPath(path, func(addr string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", h.Rel(path), err)
	}
	ln.SetUnlinkOnClose(false) // its name may be a /proc/self/fd path: removed by Close
	if err := os.Chmod(path, home.FilePerm); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	return &Listener{UnixListener: ln, path: path, uid: os.Geteuid()}, nil
}

// Accept returns the next connection of an allowed peer.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := PeerCred(c)
		if err == nil && (cred.UID == l.uid || cred.UID == 0) {
			return &Conn{Conn: c, Cred: cred}, nil
		}
		l.refused.Add(1)
		if l.OnRefused != nil && err == nil {
			l.OnRefused(cred)
		}
		c.Close()
	}
}

// Refused counts the connections closed for their peer's uid.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Close stops listening and removes the socket file.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if rerr := os.Remove(l.path); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// Want is who a client accepts at the other end of the daemon socket.
type Want struct {
	Pid  int   // the pid state/daemon.json records
	UIDs []int // the client's own uid and the home owner's
}

// Dial connects to the daemon socket at path and checks, before anything
// is sent, that the listener is the process want names, of an allowed uid.
func Dial(ctx context.Context, path string, want Want) (net.Conn, error) {
	var c net.Conn
	err := withShortPath(path, func(addr string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	cred, err := PeerCred(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: reading its credentials: %v", ErrPeer, err)
	}
	if !slices.Contains(want.UIDs, cred.UID) {
		c.Close()
		return nil, fmt.Errorf("%w: the listener on %s runs as uid %d, not as the home's owner", ErrPeer, path, cred.UID)
	}
	if want.Pid > 0 && cred.Pid != want.Pid {
		c.Close()
		return nil, fmt.Errorf("%w: the listener on %s is pid %d, not the daemon's pid %d", ErrPeer, path, cred.Pid, want.Pid)
	}
	return c, nil
}

// maxSunPath is the longest socket path a sockaddr_un holds (108 bytes
// with its NUL).
const maxSunPath = 107

// withShortPath calls fn with an address naming path that fits a
// sockaddr_un: path itself, or for a longer one (a deep home)
// /proc/self/fd/N/<name> through a descriptor of its directory.
func withShortPath(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	d, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	addr := "/proc/self/fd/" + strconv.Itoa(d) + "/" + filepath.Base(path)
	if len(addr) > maxSunPath {
		return fmt.Errorf("socket name %q is too long", filepath.Base(path))
	}
	return fn(addr)
}
