package labapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// A mutating route's body is read once into a jsonBody: its top-level
// members when the body is a JSON object of plain keys (printable ASCII
// without quote, backslash or the characters json.Marshal escapes for
// HTML), none repeated. For such a body the request id, the body hash and
// a route's struct come from the members without decoding the body again;
// any other body (not an object, an escaped or non-ASCII key, a repeated
// key) takes the general path through encoding/json, which defines the
// results: the fast path must give exactly what it gives
// (TestBodyHashMatchesTheMapHash, TestFeedbackDecodeMatchesUnmarshal).

// maxPlainMembers bounds the members read in place; a larger object takes
// the general path (no route's body has that many fields).
const maxPlainMembers = 32

// jsonBody is a request body and, when plain, its members in order.
type jsonBody struct {
	raw     []byte
	plain   bool
	members []jsonMember
	buf     [12]jsonMember
}

// jsonMember is one member of a plain object: the key's bytes between its
// quotes (no escapes, so they are the key) and the value's bytes without
// the white space around it.
type jsonMember struct {
	key, value []byte
}

// parseBody splits body into its members when it is a plain object.
func parseBody(body []byte) *jsonBody {
	b := &jsonBody{raw: body}
	if !json.Valid(body) {
		return b
	}
	b.members, b.plain = splitObject(body, b.buf[:0])
	return b
}

// member is the value of the member named key, nil when there is none.
func (b *jsonBody) member(key string) []byte {
	for _, m := range b.members {
		if string(m.key) == key {
			return m.value
		}
	}
	return nil
}

// splitObject appends the members of the valid JSON text v to dst; ok is
// false when v is not an object of at most maxPlainMembers plain,
// distinct keys.
func splitObject(v []byte, dst []jsonMember) (members []jsonMember, ok bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return nil, false
	}
	i = skipSpace(v, i+1)
	if v[i] == '}' {
		return dst, true
	}
	for {
		// v is valid: a key string starts here.
		end := i + 1
		for ; v[end] != '"'; end++ {
			if !plainKeyByte(v[end]) {
				return nil, false
			}
		}
		key := v[i+1 : end]
		for _, m := range dst {
			if string(m.key) == string(key) {
				return nil, false
			}
		}
		if len(dst) == maxPlainMembers {
			return nil, false
		}
		i = skipSpace(v, end+1) + 1 // past ':'
		i = skipSpace(v, i)
		end = skipValue(v, i)
		dst = append(dst, jsonMember{key: key, value: v[i:end]})
		i = skipSpace(v, end)
		if v[i] == '}' {
			return dst, true
		}
		i = skipSpace(v, i+1) // past ','
	}
}

// plainKeyByte reports whether c may appear in a plain key: a byte
// json.Unmarshal takes as it is and json.Marshal writes back as it is.
func plainKeyByte(c byte) bool {
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipValue is the end of the value of valid JSON that starts at v[i].
func skipValue(v []byte, i int) int {
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				i = skipString(v, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(v) && !strings.ContainsRune(",}] \t\n\r", rune(v[i])) {
		i++
	}
	return i
}

// skipString is the end of the string that starts at v[i] (its quote).
func skipString(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// stringValue is the Go string of the JSON value v when it is a string
// json.Unmarshal would return as its bytes (no escapes, valid UTF-8);
// ok is false otherwise.
func stringValue(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// canonical appends what json.Marshal makes of the body's members parsed
// into a map[string]json.RawMessage without the requestId and request_id
// keys: the keys sorted, each value compacted with <, >, &, U+2028 and
// U+2029 escaped.
func (b *jsonBody) canonical(dst []byte) []byte {
	var sorted [maxPlainMembers]jsonMember
	ms := append(sorted[:0], b.members...)
	slices.SortFunc(ms, func(x, y jsonMember) int { return bytes.Compare(x.key, y.key) }) // as strings sort
	dst = append(dst, '{')
	first := true
	for _, m := range ms {
		if k := string(m.key); k == "requestId" || k == "request_id" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, m.key...)
		dst = append(dst, '"', ':')
		dst = appendCompactHTML(dst, m.value)
	}
	return append(dst, '}')
}

// appendCompactHTML appends the valid JSON value v without white space
// outside strings and with <, >, &, U+2028 and U+2029 written as \u
// escapes: what json.Marshal writes for a json.RawMessage.
func appendCompactHTML(dst, v []byte) []byte {
	const hex = "0123456789abcdef"
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
			dst = append(dst, c)
			continue
		}
		switch {
		case c == '\\':
			dst = append(dst, c, v[i+1])
			i++
			continue
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			continue
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[v[i+2]&0xF])
			i += 2
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
