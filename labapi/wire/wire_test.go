package wire

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestNewRequestHeaders(t *testing.T) {
	req, err := NewRequest(context.Background(), http.MethodPost, "http://127.0.0.1/api/feedback", "tok", "req-1", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Content-Type") != "application/json" || req.Header.Get(TokenHeader) != "tok" || req.Header.Get(RequestIDHeader) != "req-1" {
		t.Fatalf("headers %v", req.Header)
	}
	req, err = NewRequest(context.Background(), http.MethodGet, "http://127.0.0.1/api/runs", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Content-Type", TokenHeader, RequestIDHeader} {
		if _, ok := req.Header[http.CanonicalHeaderKey(h)]; ok {
			t.Errorf("a request without body, token or id sends %s", h)
		}
	}
}

// TestServeLocal: the handler gets a request as net/http's server hands
// one over: a body to read even for a GET, a loopback peer, the URI.
func TestServeLocal(t *testing.T) {
	var got struct {
		body, remote, uri string
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		got.body, got.remote, got.uri = string(b), r.RemoteAddr, r.RequestURI
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "answer")
	})
	req, err := NewRequest(context.Background(), http.MethodGet, "http://127.0.0.1/api/runs?limit=2", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body := ServeLocal(h, req)
	if status != http.StatusTeapot || string(body) != "answer" {
		t.Fatalf("ServeLocal = %d %q", status, body)
	}
	if got.body != "" || got.remote != "127.0.0.1:0" || got.uri != "/api/runs?limit=2" {
		t.Fatalf("handler saw %+v", got)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	for _, c := range []struct {
		body string
		want Envelope
		ok   bool
	}{
		{`{"error":{"code":"NOT_FOUND","message":"no run","context":{"fix":"list runs"}}}`, Envelope{"NOT_FOUND", "no run", map[string]any{"fix": "list runs"}}, true},
		{`{"error":{"code":"BUSY","message":"m"}}`, Envelope{"BUSY", "m", map[string]any{}}, true},
		{`{"error":{"message":"no code"}}`, Envelope{}, false},
		{`{"ok":false,"error":"busy"}`, Envelope{}, false},
		{`<html>bad gateway</html>`, Envelope{}, false},
	} {
		got, ok := DecodeEnvelope([]byte(c.body))
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeEnvelope(%s) = %+v, %v; want %+v, %v", c.body, got, ok, c.want, c.ok)
		}
	}
}

func TestDecodeRefusal(t *testing.T) {
	for _, c := range []struct {
		body string
		want Refusal
		ok   bool
	}{
		{`{"ok":false,"error":"busy","message":"busy: block blk_1 is running"}`, Refusal{"busy", "busy: block blk_1 is running"}, true},
		{`{"ok":false,"error":"interactive mode"}`, Refusal{"interactive mode", ""}, true},
		{`{"ok":true,"error":"busy"}`, Refusal{}, false},
		{`{"error":"busy"}`, Refusal{}, false},
		{`{"error":{"code":"BUSY","message":"m"}}`, Refusal{}, false},
	} {
		got, ok := DecodeRefusal([]byte(c.body))
		if ok != c.ok || got != c.want {
			t.Errorf("DecodeRefusal(%s) = %+v, %v; want %+v, %v", c.body, got, ok, c.want, c.ok)
		}
	}
}

func TestUnexpected(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{502, " <html>bad gateway</html>\n", "HTTP 502: <html>bad gateway</html>"},
		{500, long, "HTTP 500: " + long[:200]},
		{404, "", "HTTP 404: "},
	} {
		if got := Unexpected(c.status, []byte(c.body)); got != c.want {
			t.Errorf("Unexpected(%d, %.20q) = %q, want %q", c.status, c.body, got, c.want)
		}
	}
}
