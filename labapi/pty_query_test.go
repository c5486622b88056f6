package labapi

import (
	"strings"
	"testing"
)

// TestPtyQueryParams pins the answers of the terminal's query parameters:
// each bad one is INVALID_ARGUMENT naming it, the first bad one in the
// route's order wins, and good ones reach the terminal (which then does
// not know the block).
func TestPtyQueryParams(t *testing.T) {
	tl := newPtyLab(t)
	const p = "/api/pty/c1/"
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{p + "blocks?since=x", 400, "since must be a non-negative integer"},
		{p + "blocks?since=1&limit=-1", 400, "limit must be a non-negative integer"},
		{p + "blocks?since=-1&limit=x", 400, "since must be a non-negative integer"},
		{p + "blocks/blk_nope/output?offset=a&raw=x", 400, "offset must be a non-negative integer"},
		{p + "blocks/blk_nope/output?max_bytes=1.5", 400, "max_bytes must be a non-negative integer"},
		{p + "blocks/blk_nope/output?wait_ms=-5&raw=true", 400, "wait_ms must be a non-negative integer"},
		{p + "blocks/blk_nope/output?offset=0&raw=maybe", 400, "raw must be true or false"},
		{p + "blocks/blk_nope/output?offset=0&max_bytes=10&wait_ms=0&raw=true", 404, ""},
	} {
		r := tl.do("GET", tc.path, "")
		if r.status != tc.status || (tc.status == 400 && r.code() != CodeInvalidArgument) || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.path, r.status, r.body, tc.status, tc.want)
		}
	}
}
