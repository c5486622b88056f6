package labapi

import "testing"

// TestBearerSchemeAnyCase (issue 27 item 11): the Authorization scheme is
// case-insensitive; "bearer", "BEARER" and "Bearer" carry the token alike,
// and a wrong token under any spelling is still refused.
func TestBearerSchemeAnyCase(t *testing.T) {
	tl := newTestLab(t)
	for i, scheme := range []string{"Bearer ", "bearer ", "BEARER ", "bEaReR  "} {
		if r := tl.do("POST", "/api/feedback", `{"notes":"ok"}`, "X-CM-LAB-TOKEN", "", "Authorization", scheme+tl.token); r.status != 200 {
			t.Fatalf("%q: %d %s", scheme, r.status, r.body)
		}
		if r := tl.do("GET", "/api/pty/c1/status", "", "X-CM-LAB-TOKEN", "", "Authorization", scheme+tl.token); r.status == 401 {
			t.Fatalf("%q on an operator route: %d %s", scheme, r.status, r.body)
		}
		if r := tl.do("POST", "/api/feedback", `{"notes":"no"}`, "X-CM-LAB-TOKEN", "", "Authorization", scheme+"x"+tl.token); r.status != 401 {
			t.Fatalf("%q with a wrong token: %d %s", scheme, r.status, r.body)
		}
		if got := tl.lastSeq(); got != uint64(i+1) {
			t.Fatalf("after %q: seq %d, want %d", scheme, got, i+1)
		}
	}
}
