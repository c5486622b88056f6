package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Client names the HTTP client the POSTs of a feedback bench are sent
// with (PeerOptions.Client, BenchOptions.Client).
const (
	// ClientNetHTTP is Go's net/http client: a transport with a reader and
	// a writer goroutine per connection (the default).
	ClientNetHTTP = "net/http"
	// ClientRaw writes each request's bytes on a keep-alive connection of
	// its own client goroutine and parses the answer in place: the load
	// the same, the client's own CPU (which shares the machine with the
	// server in `cmlab bench api`) several times smaller.
	ClientRaw = "raw"
)

// checkClient validates a Client option ("" is ClientNetHTTP).
func checkClient(c string) error {
	switch c {
	case "", ClientNetHTTP, ClientRaw:
		return nil
	}
	return fmt.Errorf("unknown client %q: use %s or %s", c, ClientNetHTTP, ClientRaw)
}

// rawPost is post over raw keep-alive connections, one per client
// goroutine: the same requests (headers, body, request ids) as do sends.
func (p *peerClient) rawPost(ctx context.Context, prefix string, n, clients int, onAck func()) ([]time.Duration, int64, time.Duration) {
	u, _ := url.Parse(p.base)
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	head := "POST /api/feedback HTTP/1.1\r\nHost: " + p.host + "\r\nOrigin: " + p.base + "\r\nReferer: " + p.base + "/\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(peerFeedbackBody)) + "\r\n"
	if p.token != "" {
		head += "X-CM-LAB-TOKEN: " + p.token + "\r\n"
	}
	return sendLoad(ctx, n, clients, onAck, func() (feedbackSender, func()) {
		var rc *rawConn
		buf := make([]byte, 0, 512)
		send := func(i int) (int, error) {
			buf = append(buf[:0], head...)
			buf = append(buf, "X-CM-LAB-REQUEST-ID: "...)
			buf = append(buf, prefix...)
			buf = append(buf, '-')
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, "\r\n\r\n"...)
			buf = append(buf, peerFeedbackBody...)
			return rc.roundTrip(addr, &rc, buf)
		}
		return send, func() {
			if rc != nil {
				rc.c.Close()
			}
		}
	})
}

// rawConn is one keep-alive connection of rawPost.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

var errRawResponse = errors.New("malformed HTTP response")

// roundTrip sends req on *rcp (dialling addr first if there is none) and
// reads the answer, returning its status. A connection that failed or
// that the server closes is dropped (*rcp = nil); the next request dials.
func (rc *rawConn) roundTrip(addr string, rcp **rawConn, req []byte) (int, error) {
	if rc == nil {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return 0, err
		}
		rc = &rawConn{c: c, br: bufio.NewReaderSize(c, 4096)}
		*rcp = rc
	}
	drop := func(err error) (int, error) {
		rc.c.Close()
		*rcp = nil
		return 0, err
	}
	rc.c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := rc.c.Write(req); err != nil {
		return drop(err)
	}
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		return drop(err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return drop(fmt.Errorf("%w: status line %q", errRawResponse, line))
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return drop(fmt.Errorf("%w: status line %q", errRawResponse, line))
	}
	length, chunked, closing := -1, false, false
	for {
		h, err := rc.br.ReadSlice('\n')
		if err != nil {
			return drop(err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return drop(fmt.Errorf("%w: header %q", errRawResponse, h))
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil || length < 0 {
				return drop(fmt.Errorf("%w: Content-Length %q", errRawResponse, v))
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			closing = bytes.EqualFold(v, []byte("close"))
		}
	}
	switch {
	case chunked:
		err = skipChunked(rc.br)
	case length >= 0:
		_, err = rc.br.Discard(length)
	default: // the body ends with the connection
		_, err = io.Copy(io.Discard, rc.br)
		closing = true
	}
	if err != nil {
		return drop(err)
	}
	if closing {
		drop(nil)
	}
	return status, nil
}

// skipChunked reads a chunked body and its trailer.
func skipChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		sz, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(sz)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: chunk size %q", errRawResponse, line)
		}
		if n == 0 {
			for { // trailer, up to the empty line
				t, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}
