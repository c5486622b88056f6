package daemon

import (
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Connection cap (issue 15 §3). Every open connection costs the daemon a
// file descriptor; ~20,000 idle connections once exhausted the limit and
// the next view file could not be opened. The daemon therefore holds at
// most maxConns connections, well below its descriptor limit, leaving the
// rest for the log, the views and the terminals. Connections beyond the
// cap wait in the kernel's accept queue (they cost the daemon nothing),
// except that an idle connection — accepted but no request yet, between
// keep-alive requests, or with a write that has not completed for
// writeStall (its client does not read) — is closed, oldest first, to
// make room: idle sockets cannot starve clients that have something to
// say.

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
	max   int
	stall time.Duration
	sem   chan struct{} // one token per open connection
	wake  chan struct{} // a connection went idle: Accept may evict it

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
}

func newCapListener(l net.Listener, max int) *capListener {
	return &capListener{Listener: l, done: make(chan struct{}),
		capState: &capState{max: max, stall: writeStall, sem: make(chan struct{}, max), wake: make(chan struct{}, 1), conns: map[*cappedConn]struct{}{}}}
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
	b := newCapListener(other, l.max)
	b.stall = l.stall
	return b
}

type cappedConn struct {
	net.Conn
	l       *capListener
	once    sync.Once
	idle    bool      // accepted and not (yet/any more) serving a request; l.mu
	idledAt time.Time // l.mu
	// writing is when the write in progress began (UnixNano), 0 when
	// none is: a write that has not completed for l.stall means a client
	// that does not read, and the connection counts as idle.
	writing atomic.Int64
}

// writeStall is how long a write may make no progress before its
// connection counts as idle (closed first when the cap is full). A client
// that reads, however slowly, completes a write each time it takes some
// bytes; a paused video holds its connection until the cap needs it.
const writeStall = 30 * time.Second

// sendChunk is how much of a file one sendfile call may send, so that a
// long video download completes a write every chunk.
const sendChunk = 1 << 20

func (c *cappedConn) Write(p []byte) (int, error) {
	c.writing.Store(time.Now().UnixNano())
	n, err := c.Conn.Write(p)
	c.writing.Store(0)
	return n, err
}

// ReadFrom keeps the TCP connection's sendfile path for videos served
// from an *os.File (net/http uses it when the connection has one), a
// chunk at a time: the file, or the *io.LimitedReader of a range that
// http.ServeContent passes, read sendChunk bytes per call.
func (c *cappedConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	src, left := r, int64(math.MaxInt64)
	lr, _ := r.(*io.LimitedReader)
	if lr != nil {
		src, left = lr.R, lr.N
	}
	var total int64
	for left > 0 {
		want := min(left, sendChunk)
		c.writing.Store(time.Now().UnixNano())
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: want})
		c.writing.Store(0)
		total, left = total+n, left-n
		if lr != nil {
			lr.N = left
		}
		if err != nil || n < want {
			return total, err // n < want: the source's end
		}
	}
	return total, nil
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

// Accept accepts, then takes a slot for the connection: a free one, else
// the slot of the connection idle the longest (closed), else it waits for
// one. It takes the slot after the kernel hands over a connection, so a
// slot is taken from an idle connection only for a client that is
// there (taking it before, the last connection accepted, still to send
// its request, was closed at once to make room for nobody).
func (l *capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err // EMFILE/ENFILE are temporary: http.Server retries
	}
	if err := l.acquire(); err != nil {
		c.Close()
		return nil, err
	}
	cc := &cappedConn{Conn: c, l: l, idle: true, idledAt: time.Now()}
	l.mu.Lock()
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc, nil
}

// acquire takes a slot: a free one, else an idle connection's, else it
// waits until one is freed, one goes idle or a write stalls.
func (l *capListener) acquire() error {
	for {
		select {
		case l.sem <- struct{}{}:
			return nil
		default:
		}
		if l.evictIdle() {
			continue
		}
		recheck := time.NewTimer(l.stall / 4) // a write may stall meanwhile
		select {
		case l.sem <- struct{}{}:
			recheck.Stop()
			return nil
		case <-l.wake:
		case <-recheck.C:
		case <-l.done:
			recheck.Stop()
			return net.ErrClosed
		}
		recheck.Stop()
	}
}

// evictIdle closes the connection idle the longest (a write stalled for
// l.stall counts as idle since it began); false if none is idle.
func (l *capListener) evictIdle() bool {
	stalled := time.Now().Add(-l.stall).UnixNano()
	l.mu.Lock()
	var oldest *cappedConn
	var oldestAt time.Time
	for c := range l.conns {
		at := c.idledAt
		if !c.idle {
			w := c.writing.Load()
			if w == 0 || w > stalled {
				continue
			}
			at = time.Unix(0, w)
		}
		if oldest == nil || at.Before(oldestAt) {
			oldest, oldestAt = c, at
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
