package reqindex

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
