package reqindex

import (
	"context"
	"fmt"
	"time"
)

// StartVerification starts the verification after open
// (Options.VerifyAfterOpen) in a goroutine that Close ends and waits for.
// Later calls, and calls when there is nothing to verify, do nothing.
func (x *Index) StartVerification() { x.live.StartVerification(x.verify) }

// Verified returns a channel closed when the verification after open
// (Options.VerifyAfterOpen) has ended — at once when there was none, at
// Close when it never started — and its outcome: nil when the file passed, or was rebuilt from the log after
// failing (Rebuilt then says why); otherwise why the check or the rebuild
// did not finish (Close, a log whose start is compacted away).
func (x *Index) Verified() (<-chan struct{}, func() error) { return x.live.Verified() }

// verify is the verification after open: the page check and every
// entry's CRC (checkAll); on failure the file is rebuilt in place from the
// log (rebuildLive). ctx ends when the index closes.
func (x *Index) verify(ctx context.Context) error {
	// Only the verification replaces x.db, so reading it here needs no
	// lock; bbolt lets this read transaction run beside the flusher's
	// writes. The check reads every page: its resident share is dropped
	// as it goes (rss.go).
	cerr := WhileTrimming(x.db, 100*time.Millisecond, func() error { return checkAll(x.db) })
	if cerr == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return x.rebuildLive(cerr.Error())
}

// rebuildLive rebuilds the index from the log into a new file beside the
// old one while the index serves from the old one, then swaps it in
// (Live.Rebuild). Lookups of entries that fail their CRC in the old file
// meanwhile answer an error ("do not act"). A log whose start was
// compacted away cannot rebuild it: the old file, possibly the only copy
// of old answers, is kept and the error returned.
func (x *Index) rebuildLive(reason string) error {
	if x.opts.Log.FirstSeq() > 1 {
		return fmt.Errorf("reqindex: %s fails its check (%s) and the log is compacted: not rebuilt (fix: stop the daemon, `cmlab rebuild --archive DIR`)", x.opts.Path, reason)
	}
	_, err := x.live.Rebuild("verification after open: " + reason)
	return err
}
