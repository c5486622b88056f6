package events

import (
	"errors"
	"fmt"
)

var errShortValue = errors.New("truncated value")

// ValueLen returns the length of the msgpack value at the start of b
// without decoding it: a skip without the decoder's allocations. It
// fails on a value that does not fit in b — a str, bin or ext longer
// than the bytes left, an array or map of more elements than bytes left
// — on the unused code 0xc1 and on nesting deeper than 512.
func ValueLen(b []byte) (int, error) { return valueLen(b, 0) }

func valueLen(b []byte, depth int) (int, error) {
	if depth > 512 {
		return 0, errors.New("nested too deeply")
	}
	if len(b) == 0 {
		return 0, errShortValue
	}
	c := b[0]
	be := func(off, size int) (int, error) { // big-endian length at b[off:off+size]
		if len(b) < off+size {
			return 0, errShortValue
		}
		var n uint64
		for _, x := range b[off : off+size] {
			n = n<<8 | uint64(x)
		}
		if n > uint64(len(b)) {
			return 0, errShortValue
		}
		return int(n), nil
	}
	fixed := func(n int) (int, error) {
		if len(b) < n {
			return 0, errShortValue
		}
		return n, nil
	}
	var head, count int
	var pairs bool
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 1, nil
	case c >= 0x80 && c <= 0x8f:
		head, count, pairs = 1, int(c&0x0f), true
	case c >= 0x90 && c <= 0x9f:
		head, count = 1, int(c&0x0f)
	case c >= 0xa0 && c <= 0xbf:
		return fixed(1 + int(c&0x1f))
	case c == 0xc4 || c == 0xd9:
		n, err := be(1, 1)
		if err != nil {
			return 0, err
		}
		return fixed(2 + n)
	case c == 0xc5 || c == 0xda:
		n, err := be(1, 2)
		if err != nil {
			return 0, err
		}
		return fixed(3 + n)
	case c == 0xc6 || c == 0xdb:
		n, err := be(1, 4)
		if err != nil {
			return 0, err
		}
		return fixed(5 + n)
	case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext 8/16/32
		size := 1 << (c - 0xc7) // 1, 2, 4
		n, err := be(1, size)
		if err != nil {
			return 0, err
		}
		return fixed(2 + size + n)
	case c == 0xca || c == 0xce || c == 0xd2:
		return fixed(5)
	case c == 0xcb || c == 0xcf || c == 0xd3:
		return fixed(9)
	case c == 0xcc || c == 0xd0:
		return fixed(2)
	case c == 0xcd || c == 0xd1:
		return fixed(3)
	case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16
		return fixed(2 + 1<<(c-0xd4))
	case c == 0xdc || c == 0xde:
		n, err := be(1, 2)
		if err != nil {
			return 0, err
		}
		head, count, pairs = 3, n, c == 0xde
	case c == 0xdd || c == 0xdf:
		n, err := be(1, 4)
		if err != nil {
			return 0, err
		}
		head, count, pairs = 5, n, c == 0xdf
	default: // 0xc1, never used
		return 0, fmt.Errorf("invalid code 0x%02x", c)
	}
	if pairs {
		count *= 2
	}
	off := head
	for i := 0; i < count; i++ {
		if off > len(b) {
			return 0, errShortValue
		}
		n, err := valueLen(b[off:], depth+1)
		if err != nil {
			return 0, err
		}
		off += n
	}
	if off > len(b) {
		return 0, errShortValue
	}
	return off, nil
}

// MapValue returns the bytes of the value of key in the msgpack map that
// is the whole of b (not copied): what decoding b into a struct would
// decode that field from. ok is false when b is not exactly one map, a
// key is not a str, or key is absent or appears more than once (a decoder
// would then decode the field twice).
func MapValue(b []byte, key string) (v []byte, ok bool) {
	if len(b) == 0 {
		return nil, false
	}
	var n, p int
	switch c := b[0]; {
	case c&0xf0 == 0x80:
		n, p = int(c&0x0f), 1
	case c == 0xde && len(b) >= 3:
		n, p = int(b[1])<<8|int(b[2]), 3
	case c == 0xdf && len(b) >= 5:
		n, p = int(b[1])<<24|int(b[2])<<16|int(b[3])<<8|int(b[4]), 5
	default:
		return nil, false
	}
	for ; n > 0; n-- {
		k, next, good := msgpackBytes(b, p, 0xd9)
		if !good {
			return nil, false
		}
		l, err := ValueLen(b[next:])
		if err != nil {
			return nil, false
		}
		if string(k) == key {
			if v != nil {
				return nil, false
			}
			v = b[next : next+l]
		}
		p = next + l
	}
	if v == nil || p != len(b) {
		return nil, false
	}
	return v, true
}
