package replay

import (
	"context"
)

// DecodeFailure is a stored event the current code cannot decode.
type DecodeFailure struct {
	Seq   uint64 `json:"seq"`
	Type  string `json:"type"`
	V     int    `json:"v"`
	Error string `json:"error"`
}

// DecodeReport is the outcome of Decode.
type DecodeReport struct {
	Events   int             `json:"events"`
	Failures []DecodeFailure `json:"failures"`
}

// Decode runs the current registry and upcasters over every stored event
// and lists those that no longer decode (unknown type, unknown version, a
// failing upcaster, a payload that does not fit the current struct).
func Decode(ctx context.Context, log *Log) (*DecodeReport, error) {
	rep := &DecodeReport{Failures: []DecodeFailure{}}
	for ev, err := range log.Events(ctx, 1, 0) {
		if err != nil {
			return rep, err
		}
		rep.Events++
		if _, err := ev.Decode(); err != nil {
			rep.Failures = append(rep.Failures, DecodeFailure{Seq: ev.Seq, Type: ev.Type, V: ev.V, Error: err.Error()})
		}
	}
	return rep, nil
}
