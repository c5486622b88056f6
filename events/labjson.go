package events

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Helpers for the MarshalJSON methods of the Lab records: they produce the
// bytes encoding/json would for the same keys, without HTML escaping (the
// projector's encoders and the API's encoder both compact what they get,
// escaping there when they escape).

// jsonObj writes one JSON object key by key.
type jsonObj struct {
	b   []byte
	err error
}

func (w *jsonObj) key(name string) {
	if len(w.b) == 0 {
		w.b = append(w.b, '{')
	} else {
		w.b = append(w.b, ',')
	}
	w.b = strconv.AppendQuote(w.b, name)
	w.b = append(w.b, ':')
}

// num writes raw (a JSON number) or null when raw is nil; nothing when
// !present and raw is nil.
func (w *jsonObj) num(name string, raw []byte, present bool) {
	if raw == nil && !present {
		return
	}
	w.key(name)
	if raw == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, raw...)
}

func (w *jsonObj) str(name, v string) {
	w.key(name)
	b, err := marshalNoEscape(v)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.b = append(w.b, b...)
}

func (w *jsonObj) end() ([]byte, error) {
	if len(w.b) == 0 {
		return []byte("{}"), w.err
	}
	return append(w.b, '}'), w.err
}

func intNum(v *int) []byte {
	if v == nil {
		return nil
	}
	return strconv.AppendInt(nil, int64(*v), 10)
}

// floatNum formats v as encoding/json does; NaN and ±Inf (which JSON
// cannot hold, and the producers never record) are written as null.
func floatNum(v *float64) []byte {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	b, _ := json.Marshal(*v)
	return b
}

// marshalNoEscape is json.Marshal without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
