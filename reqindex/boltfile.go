package reqindex

import (
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// The checks this package makes before bbolt maps a file, for the other
// bbolt files of a home (the Lab store, package labapi): a derived file
// that is refused here is rebuilt from the log instead of mapped.

// CheckShape refuses a file bbolt must not map: unreadable meta pages, or
// a file shorter than the pages its newest valid meta claims (bbolt
// would fault on its map, which ends the process).
func CheckShape(path string) error { return checkShape(path) }

// FaultsPanic makes a fault on a mapped page in this goroutine a panic
// (which the caller recovers into an error) until the returned function
// restores the previous setting.
func FaultsPanic() (restore func()) { return faultsPanic() }

// OpenFile opens the derived file at path (what names it in errors:
// "index", "store") if its shape lets bbolt map it, then runs check on it
// (the file's own reading of its format and covered seq). Any doubt is an
// error, and the file is then closed: the caller rebuilds it. A fault on
// a mapped page or a panic of bbolt reading a damaged file is an error.
func OpenFile(path, what string, o *bolt.Options, check func(db *bolt.DB) error) (db *bolt.DB, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("no %s file: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		// A link to a file elsewhere is never opened: bbolt would write
		// through it. The rebuild replaces the link (never its target).
		return nil, fmt.Errorf("the %s file is a %s, not a regular file", what, fi.Mode().Type())
	}
	if err := checkShape(path); err != nil {
		return nil, err
	}
	defer faultsPanic()()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bbolt panicked reading the file: %v", p)
		}
		if err != nil && db != nil {
			db.Close()
			db = nil
		}
	}()
	if db, err = bolt.Open(path, 0o600, o); err != nil {
		return nil, err
	}
	return db, check(db)
}

// CheckFile runs bbolt's page check over db, then values (the file's own
// checks of what its pages hold), in one read transaction. A fault on a
// mapped page or a panic of bbolt reading a damaged page is an error. Every
// error the page check sends is read: its goroutine reads the transaction
// until it closes the channel, so returning at the first would leave it
// blocked for good, reading a closed transaction.
func CheckFile(db *bolt.DB, values func(tx *bolt.Tx) error) (err error) {
	defer faultsPanic()()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bbolt panicked reading the file: %v", p)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for cerr := range tx.Check() {
			if first == nil {
				first = cerr
			}
		}
		if first != nil {
			return fmt.Errorf("consistency check: %w", first)
		}
		return values(tx)
	})
}
