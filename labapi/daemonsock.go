package labapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/discovery"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// How the CLI finds its daemon and proves it genuine before sending the
// operator token (issue 27 finding 1; package discovery explains the
// lock, the socket and the liveness check).

// StaleDaemonError is ErrNoDaemon for a state/daemon.json whose daemon is
// gone (it died without removing the file): Why says how that is known.
type StaleDaemonError struct {
	Pid int
	Why string
}

func (e *StaleDaemonError) Error() string {
	return fmt.Sprintf("no daemon runs: state/daemon.json (pid %d) is stale: %s", e.Pid, e.Why)
}

// Is makes a stale record an ErrNoDaemon.
func (e *StaleDaemonError) Is(target error) bool { return target == ErrNoDaemon }

// Fix is what the operator does about it.
func (e *StaleDaemonError) Fix() string {
	return "start the daemon with 'cmlab serve' (it replaces the stale file); commands that can work without one open the home themselves"
}

// checkLive returns nil when the daemon info names is running for h
// (discovery.Stale), else a *StaleDaemonError.
func checkLive(h home.Home, info *DaemonInfo) error {
	why, err := discovery.Stale(h, steps.Process{Pid: info.Pid, Start: info.PidStart, BootID: info.BootID})
	if err != nil {
		return err
	}
	if why == "" && info.Socket == "" {
		why = "it names no Unix socket (an older cmlab wrote it)"
	}
	if why != "" {
		return &StaleDaemonError{Pid: info.Pid, Why: why}
	}
	return nil
}

// socketTransport reaches the daemon of h over its Unix socket only: each
// connection re-reads state/daemon.json (a restarted daemon is found
// again), checks the daemon is live, and checks the listener's
// credentials (its uid is ours or the home owner's, its pid the recorded
// one) before a byte is sent. The TCP address of the request URL is never
// dialled.
func socketTransport(h home.Home) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			// Both failures below are "nothing listens for this URL" (as
			// ECONNREFUSED): a client that re-resolves (cmlab mcp) then
			// finds a restarted daemon, and nothing was sent.
			info, err := ReadDaemonInfo(h)
			if err != nil {
				return nil, fmt.Errorf("%w (%w)", err, syscall.ECONNREFUSED)
			}
			if addr != info.Listen {
				// The daemon restarted elsewhere: the request's Host would
				// be refused by the new one.
				return nil, fmt.Errorf("the daemon of the home now serves %s, not %s (%w)", info.Listen, addr, syscall.ECONNREFUSED)
			}
			return discovery.Dial(ctx, info.Socket, discovery.Want{Pid: info.Pid, UIDs: ownerUIDs(h)})
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
}

// SocketHTTPClient is an HTTP client that reaches the daemon of h over its
// socket (socketTransport), for `cmlab mcp`.
func SocketHTTPClient(h home.Home) *http.Client {
	return &http.Client{Transport: socketTransport(h)}
}

// ownerUIDs are the uids a client accepts as its daemon's: its own and the
// home owner's.
func ownerUIDs(h home.Home) []int {
	uids := []int{os.Geteuid()}
	if fi, err := os.Stat(h.Dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uids = append(uids, int(st.Uid))
		}
	}
	return uids
}

// Advertisement is a daemon made findable: its lock on the home, its
// socket served, its state/daemon.json written.
type Advertisement struct {
	h    home.Home
	lock *discovery.Lock
	ln   *discovery.Listener
	pid  int
	// Info is what state/daemon.json says.
	Info DaemonInfo
}

// Advertise makes the daemon described by info findable by the CLI of h:
// it takes the daemon lock (ErrLocked wrapped: another daemon serves h),
// listens on state/daemon.sock and hands that listener to serve (which
// must serve the daemon's handler on it and return), records this
// process's start time and boot id, and writes state/daemon.json.
// Withdraw undoes it in the reverse order.
func Advertise(h home.Home, info DaemonInfo, serve func(net.Listener), logRefused func(discovery.Cred)) (*Advertisement, error) {
	lock, err := discovery.Acquire(h)
	if err != nil {
		return nil, err
	}
	self, err := discovery.Self(info.Pid)
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("reading this process's start time: %w", err)
	}
	ln, err := discovery.Listen(h)
	if err != nil {
		lock.Release()
		return nil, err
	}
	ln.OnRefused = logRefused
	serve(ln)
	info.Socket, info.PidStart, info.BootID = h.DaemonSocket(), self.Start, self.BootID
	if err := WriteDaemonInfo(h, info); err != nil {
		ln.Close()
		lock.Release()
		return nil, fmt.Errorf("writing state/daemon.json: %w", err)
	}
	return &Advertisement{h: h, lock: lock, ln: ln, pid: info.Pid, Info: info}, nil
}

// Withdraw removes state/daemon.json, stops listening on the socket and
// releases the lock. The socket's connections are the HTTP server's to
// close (Shutdown).
func (a *Advertisement) Withdraw() error {
	err := RemoveDaemonInfo(a.h, a.pid)
	if cerr := a.ln.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	if rerr := a.lock.Release(); err == nil {
		err = rerr
	}
	return err
}
