//go:build !linux

package wal

import "os"

func openPrealloc(path string) (*os.File, error) { return os.OpenFile(path, os.O_WRONLY, 0) }

func datasync(f *os.File) error { return f.Sync() }
