package main

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
)

// fsErrorFix explains the filesystem errors a damaged or full home gives
// (the damage matrix of issue 27 found them ending commands with no fix):
// a full disk, and a file or directory the command may not read or write.
// ok is false for any other error.
func fsErrorFix(homeFlag string, err error) (cliError, bool) {
	msg := strings.TrimPrefix(err.Error(), "engine: ")
	where := "the home"
	if homeFlag != "" {
		where = homeFlag
	}
	var pe *fs.PathError
	path := where
	if errors.As(err, &pe) {
		path = pe.Path
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return cliError{Code: "DISK_FULL", Message: msg,
			Fix: "free space on the filesystem of " + where + " (df -h " + where + "), then run the command again: nothing acknowledged is lost, a write that failed was not acknowledged"}, true
	case errors.Is(err, syscall.ELOOP):
		return cliError{Code: "SYMLINK", Message: msg,
			Fix: "a symlink stands where cmlab keeps a file of its own: look at it (ls -l " + path + "), remove the link (the file it names is left alone) and run the command again"}, true
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return cliError{Code: "PERMISSION", Message: msg,
			Fix: "every file of the home must be readable and writable by its owner, who runs cmlab: check 'ls -l " + path + "', restore its mode (chmod 600 for a file, 700 for a directory) or run as the home's owner"}, true
	}
	return cliError{}, false
}
