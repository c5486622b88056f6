package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// bigBody is larger than what loopback's socket buffers hold for a client
// that never reads (its receive buffer is set to 4 KiB).
const bigBody = 16 << 20

// capServer serves h through a cap of max connections whose writes count
// as stalled after stall; it returns the address.
func capServer(t *testing.T, max int, stall time.Duration, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped := newCapListener(ln, max)
	capped.stall = stall
	hs := &http.Server{Handler: h, ConnState: capped.ConnState}
	go hs.Serve(capped)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// nonReader sends GET path and never reads the answer; its receive buffer
// is small, so the server's writes stall.
func nonReader(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	return c
}

// TestStalledWriterEvictedWhenFull: a client that asks for a large answer
// and never reads holds its connection in a write that does not complete:
// not idle to net/http, and before, never closed, so as many such clients
// as the cap kept every other client out for as long as they liked (any
// local user reaches the TCP port). A write that has not completed for
// the stall time now counts as idle: when the cap is full it is closed
// first, and the waiting client is served. Both ways an answer is
// written: through Write (a handler's body) and through ReadFrom (a file
// served by http.ServeContent, the videos' sendfile path).
func TestStalledWriterEvictedWhenFull(t *testing.T) {
	big := filepath.Join(t.TempDir(), "video.mp4")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, bigBody); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		big  http.HandlerFunc
	}{
		{"write", func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range bigBody / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}},
		{"sendfile", func(w http.ResponseWriter, r *http.Request) {
			f, err := os.Open(big)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer f.Close()
			http.ServeContent(w, r, "video.mp4", time.Time{}, f)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bigStarted atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
				bigStarted.Add(1)
				tc.big(w, r)
			})
			mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "small") })
			addr := capServer(t, 2, 200*time.Millisecond, mux)
			nonReader(t, addr, "/big")
			nonReader(t, addr, "/big")
			deadline := time.Now().Add(10 * time.Second)
			for bigStarted.Load() < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of the 2 large answers started", bigStarted.Load())
				}
				time.Sleep(5 * time.Millisecond)
			}
			c := &http.Client{Timeout: 5 * time.Second}
			res, err := c.Get("http://" + addr + "/small")
			if err != nil {
				t.Fatalf("a client behind two stalled writers: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(b) != "small" {
				t.Fatalf("answer %q", b)
			}
		})
	}
}

// TestReadingClientNotEvicted: a client that reads a large answer as it
// comes keeps its connection while another waits for the cap's one slot:
// its writes complete, so it is never stalled, and it gets every byte;
// the waiting client is served after it.
func TestReadingClientNotEvicted(t *testing.T) {
	mux := http.NewServeMux()
	started := make(chan struct{})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range bigBody / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "small") })
	addr := capServer(t, 1, 2*time.Second, mux)
	c := nonReader(t, addr, "/big") // it reads below, through a 4 KiB buffer
	<-started                       // its request read: no longer idle
	small := make(chan string, 1)
	go func() {
		hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		res, err := hc.Get("http://" + addr + "/small")
		if err != nil {
			small <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		small <- string(b)
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	if err != nil || n != bigBody {
		t.Fatalf("the reading client got %d of %d bytes: %v", n, bigBody, err)
	}
	c.Close()
	if got := <-small; got != "small" {
		t.Fatalf("the waiting client: %q", got)
	}
}

// TestCappedSendfileWhole: a file sent through the cap's ReadFrom, a
// megabyte per sendfile call, arrives whole, as does a range of it (the
// *io.LimitedReader http.ServeContent passes).
func TestCappedSendfileWhole(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	path := filepath.Join(t.TempDir(), "video.mp4")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := capServer(t, 4, writeStall, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		http.ServeContent(w, r, "video.mp4", time.Time{}, f)
	}))
	for _, tc := range []struct {
		rng        string
		start, end int // end exclusive
	}{{"", 0, len(data)}, {"bytes=1000-2500000", 1000, 2500001}, {"bytes=1048570-", 1048570, len(data)}} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/video.mp4", nil)
		if tc.rng != "" {
			req.Header.Set("Range", tc.rng)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || !bytes.Equal(got, data[tc.start:tc.end]) {
			t.Fatalf("range %q: %d bytes (%v), want %d equal to the file's", tc.rng, len(got), err, tc.end-tc.start)
		}
	}
}
