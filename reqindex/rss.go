package reqindex

import (
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// TrimMapped drops a bbolt file's mapped pages from the process's resident
// set (madvise MADV_DONTNEED on bbolt's read-only shared map of the
// file): the pages stay in the page cache and the file, and the next read
// of one faults it back in. A whole-file check or a long list reads every
// page through the map, which would otherwise count the whole store in
// the daemon's RSS for as long as it runs (issue 26: settled RSS that
// does not grow with the history): the request-id index after its check
// after open, the Lab store (package labapi) after its own and after long
// lists. It runs inside a read transaction, which keeps bbolt from
// remapping the file meanwhile.
func TrimMapped(db *bolt.DB) {
	db.View(func(tx *bolt.Tx) error {
		info := db.Info()
		size := int(tx.Size())
		if info == nil || info.Data == 0 || size <= 0 {
			return nil
		}
		unix.Syscall(unix.SYS_MADVISE, info.Data, uintptr(size), unix.MADV_DONTNEED)
		return nil
	})
}

// WhileTrimming runs fn (a whole-file read of db: a check) while a
// goroutine drops db's mapped pages from RSS every interval, so the
// read's resident pages stay bounded by what it reads in one interval
// instead of growing to the file's size; then trims once more.
func WhileTrimming(db *bolt.DB, interval time.Duration, fn func() error) error {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				TrimMapped(db)
			}
		}
	}()
	err := fn()
	close(stop)
	<-done
	TrimMapped(db)
	return err
}
