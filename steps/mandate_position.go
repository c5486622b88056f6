package steps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// jsonPosition describes where in b a JSON decoding error happened, as
// "line L, column C" (1-based), for a mandate file a person edits: the
// decoder's own message ("unexpected EOF") names no place.
func jsonPosition(b []byte, err error, dec *json.Decoder) string {
	off := dec.InputOffset()
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(b))
	}
	off = min(max(off, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte{'\n'})
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	where := fmt.Sprintf("line %d, column %d", line, col)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		where += " (the file ends inside the JSON: a missing ] or }?)"
	}
	return where
}

// checkStepDir says plainly that a step's working directory is missing or
// not a directory (the process would fail to start with an error about
// its shell).
func checkStepDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("the step's working directory %s: %w (its \"cwd\" in the mandate, relative to the mandate file)", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("the step's working directory %s is not a directory (its \"cwd\" in the mandate)", dir)
	}
	return nil
}
