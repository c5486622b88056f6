package home

import (
	"io"
	"os"
)

// ReadTail returns the last n bytes of the file at path (all of it when
// it is shorter) and the file's size: the end of a log or an output file
// that may be large, read without reading the rest.
func ReadTail(path string, n int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	off := max(0, fi.Size()-n)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	return b, fi.Size(), err
}
