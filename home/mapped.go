package home

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"syscall"
)

// ErrMappedFault is returned by ReadMapped when the mapped file faulted
// while read was reading it (the file was cut short beside).
var ErrMappedFault = errors.New("fault reading a mapped file")

// ReadMapped calls read with the bytes of the regular file at path: a
// file of more than mapOver bytes through a read-only mapping of it, so
// the page cache is read in place (copying megabytes into a fresh buffer
// faults in and zeroes every page of it, which costs a short-lived
// command such as 'cmlab status' more than its own work), a smaller one
// read into memory. read must not keep the bytes. A file cut short while
// mapped makes read fault: that is ErrMappedFault, not a crash. Errors of
// opening the file are returned as os.Open returns them.
func ReadMapped(path string, mapOver int64, read func(b []byte)) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var b []byte
	if n := fi.Size(); fi.Mode().IsRegular() && n > mapOver && n > 0 && n == int64(int(n)) {
		m, merr := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
		if merr == nil {
			defer syscall.Munmap(m)
			b = m
		}
	}
	if b == nil {
		if b, err = io.ReadAll(f); err != nil {
			return err
		}
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w %s: %v", ErrMappedFault, path, r)
		}
	}()
	read(b)
	return nil
}
