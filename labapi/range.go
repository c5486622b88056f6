package labapi

import (
	"net/http"
	"strconv"
	"strings"
)

// Video Range requests are answered as content-machine answers them
// (parseByteRange in src/lab/server/range.ts and handleRunVideoRoute):
//
//   - only the first range of a list counts ("bytes=0-1,4-5" is 0-1);
//   - "-N" is the last N bytes (all of them when N ≥ size);
//   - "S-" runs to the end; an end past the file is cut to its last byte;
//   - a start at or past the end of the file is 416 with
//     Content-Range "bytes */size" and no body;
//   - anything else it cannot read (another unit, no dash, letters, an end
//     before the start, an empty file) is ignored: 200 with the whole file.
//
// Go's http.ServeContent differs (multipart answers, 416 for more cases),
// so normalizeVideoRange rewrites the request's Range header to the single
// range content-machine would serve, or removes it, before ServeContent
// serves the file; it answers the 416 itself.

// videoRange is what content-machine makes of a Range header for a file
// of size bytes: ok false means serve the whole file; unsatisfiable means 416.
func videoRange(header string, size int64) (start, end int64, ok, unsatisfiable bool) {
	h := strings.TrimSpace(header)
	if !strings.HasPrefix(h, "bytes=") {
		return 0, 0, false, false
	}
	spec := strings.TrimSpace(h[len("bytes="):])
	if spec == "" {
		return 0, 0, false, false
	}
	first, _, _ := strings.Cut(spec, ",")
	first = strings.TrimSpace(first)
	left, right, found := strings.Cut(first, "-")
	if !found {
		return 0, 0, false, false
	}
	left, right = strings.TrimSpace(left), strings.TrimSpace(right)
	if size <= 0 {
		return 0, 0, false, false
	}
	if left == "" && right != "" {
		n, ok := digits(right)
		if !ok {
			return 0, 0, false, false
		}
		// content-machine would answer "-0" with the impossible range
		// size-(size-1); it is answered as unsatisfiable here.
		if n == 0 {
			return 0, 0, false, true
		}
		return max(0, size-min(n, size)), size - 1, true, false
	}
	s, ok := digits(left)
	if !ok {
		return 0, 0, false, false
	}
	if s >= size {
		return 0, 0, false, true
	}
	if right == "" {
		return s, size - 1, true, false
	}
	e, ok := digits(right)
	if !ok || e < s {
		return 0, 0, false, false
	}
	return s, min(e, size-1), true, false
}

// digits parses a non-empty run of ASCII digits (JavaScript's /^\d+$/ then
// parseInt); values past int64 saturate, which only ever means "past the end".
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<62)/10 {
			n = 1 << 62
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// normalizeVideoRange applies videoRange to r before http.ServeContent
// serves a file of size bytes. It reports true when it answered the
// request itself (416).
func normalizeVideoRange(w http.ResponseWriter, r *http.Request, size int64) bool {
	header := r.Header.Get("Range")
	if header == "" {
		return false
	}
	// ServeContent must not second-guess the range by validators.
	r.Header.Del("If-Range")
	start, end, ok, unsatisfiable := videoRange(header, size)
	switch {
	case unsatisfiable:
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return true
	case ok:
		r.Header.Set("Range", "bytes="+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(end, 10))
	default:
		r.Header.Del("Range")
	}
	return false
}
