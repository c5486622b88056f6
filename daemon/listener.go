package daemon

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Connection cap (issue 15 §3). Every open connection costs the daemon a
// file descriptor; ~20,000 idle connections once exhausted the limit and
// the next view file could not be opened. The daemon therefore holds at
// most maxConns connections, well below its descriptor limit, leaving the
// rest for the log, the views and the terminals. Connections beyond the
// cap wait in the kernel's accept queue (they cost the daemon nothing),
// except that an idle connection — accepted but no request yet, or
// between keep-alive requests — is closed, oldest first, to make room:
// idle sockets cannot starve clients that have something to say.

// Bounds of the derived connection cap.
const (
	minConns = 16
	maxConns = 4096
)

// raiseFDLimit raises the soft RLIMIT_NOFILE to the hard one and returns
// the soft limit now in force.
func raiseFDLimit() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err == nil {
			rl = want
		}
	}
	return rl.Cur, nil
}

// connCap derives the connection cap from the descriptor limit: a quarter
// of it, within [minConns, maxConns].
func connCap(fdLimit uint64) int {
	return int(min(max(fdLimit/4, minConns), maxConns))
}

// capListener is a net.Listener that holds at most max connections open
// (see above). Its ConnState must be installed as the http.Server's.
type capListener struct {
	net.Listener
	*capState
	done chan struct{}
	once sync.Once
}

// capState is one budget of connections: the daemon's TCP listener has
// one, its Unix socket another (Beside).
type capState struct {
	max  int
	sem  chan struct{} // one token per open connection
	wake chan struct{} // a connection went idle: Accept may evict it

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
}

func newCapListener(l net.Listener, max int) *capListener {
	return &capListener{Listener: l, done: make(chan struct{}),
		capState: &capState{max: max, sem: make(chan struct{}, max), wake: make(chan struct{}, 1), conns: map[*cappedConn]struct{}{}}}
}

// Beside wraps another listener of the same server in a cap of its own,
// of the same size. The Unix socket's connections once were not counted,
// and 400 idle ones there exhausted the descriptors the TCP API needed
// (TestIdleSocketFlood); then they shared the TCP budget, and any local
// user, who can reach the TCP port, could hold it with stalled requests:
// the owner's CLI then waited behind them, or had its new connection
// evicted as idle to make room for theirs (TestStalledTCPLeavesTheSocket).
// Only the owner reaches the socket, so its budget is the owner's.
func (l *capListener) Beside(other net.Listener) *capListener {
	return newCapListener(other, l.max)
}

type cappedConn struct {
	net.Conn
	l       *capListener
	once    sync.Once
	idle    bool      // accepted and not (yet/any more) serving a request; l.mu
	idledAt time.Time // l.mu
}

// ReadFrom keeps the TCP connection's sendfile path for videos served
// from an *os.File (net/http uses it when the connection has one).
func (c *cappedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.sem
	})
	return err
}

// Accept takes a slot (closing the oldest idle connection when none is
// free, else waiting for one) and then accepts.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.sem <- struct{}{}:
		default:
			if l.evictIdle() {
				continue
			}
			select {
			case l.sem <- struct{}{}:
			case <-l.wake:
				continue
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		break
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err // EMFILE/ENFILE are temporary: http.Server retries
	}
	cc := &cappedConn{Conn: c, l: l, idle: true, idledAt: time.Now()}
	l.mu.Lock()
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc, nil
}

// evictIdle closes the connection idle the longest; false if none is idle.
func (l *capListener) evictIdle() bool {
	l.mu.Lock()
	var oldest *cappedConn
	for c := range l.conns {
		if c.idle && (oldest == nil || c.idledAt.Before(oldest.idledAt)) {
			oldest = c
		}
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// ConnState tracks which connections are idle (http.Server.ConnState).
// One server serves both listeners, so the budget is the connection's
// own listener's, whichever listener the hook was taken from.
func (*capListener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*cappedConn)
	if !ok {
		return
	}
	l := c.l
	l.mu.Lock()
	switch st {
	case http.StateNew, http.StateIdle:
		c.idle, c.idledAt = true, time.Now()
	default:
		c.idle = false
	}
	l.mu.Unlock()
	if st == http.StateIdle {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *capListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}
