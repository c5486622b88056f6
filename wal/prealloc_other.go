//go:build !linux

package wal

import "os"

func flushPiece(f *os.File, off, n int64) error { return nil }

func datasync(f *os.File) error { return f.Sync() }
