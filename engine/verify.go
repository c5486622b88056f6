package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cmlab/cmlab/projections"
)

// StartVerification starts the verification after open
// (Options.VerifyAfterOpen) in a goroutine that Close ends and waits for:
// first the log's sealed segments (wal.Log.StartVerification), then the
// views Open trusted, regenerated if any differs; and the request-id
// index's pages and entries (now, or when RequestIndex opens it). The caller picks the moment (the daemon:
// once it serves). Later calls do nothing.
func (e *Engine) StartVerification() {
	e.reqMu.Lock()
	e.verifyStarted = true
	if e.reqIdx != nil {
		e.reqIdx.StartVerification()
	}
	e.reqMu.Unlock()
	e.verifyGo.Do(func() {
		if !e.opts.VerifyAfterOpen {
			close(e.verified)
			return
		}
		e.applyMu.Lock()
		checks := e.proj.Unverified()
		sealed, _ := e.proj.UnverifiedSealed()
		e.applyMu.Unlock()
		e.wg.Add(1)
		go e.verify(checks, sealed)
	})
}

// Verified returns a channel closed when the verification after open has
// ended (or, never started, at Close) and its report, valid once the
// channel is closed.
func (e *Engine) Verified() (<-chan struct{}, func() VerifyReport) {
	return e.verified, func() VerifyReport {
		<-e.verified
		return e.verifyRep
	}
}

// verify is the verification after open. A view whose bytes differ from
// its whole-view CRC, or a sealed view that differs from its record
// (sealed, projections.VerifySealed), makes every view regenerate from
// the log while appends wait (regenerateLive). It ends early at Close.
func (e *Engine) verify(checks []projections.ViewCheck, sealed projections.SealedCheck) {
	defer e.wg.Done()
	defer close(e.verified)
	t0 := time.Now()
	ctx, cancel := e.lifeContext()
	defer cancel()
	rep := VerifyReport{Views: len(checks)}
	for _, c := range checks {
		rep.Bytes += c.Size
	}
	defer func() {
		rep.Seconds = time.Since(t0).Seconds()
		e.verifyRep = rep
	}()
	// The log first: regenerating views from a damaged log would fail.
	e.log.StartVerification()
	logDone, logReport := e.log.Verified()
	select {
	case <-logDone:
	case <-ctx.Done():
		rep.Err = ctx.Err()
		return
	}
	rep.Log = logReport()
	if rep.Log.Err != nil {
		rep.Err = rep.Log.Err
		return
	}
	if e.opts.verifyHold != nil {
		select {
		case <-e.opts.verifyHold:
		case <-ctx.Done():
			rep.Err = ctx.Err()
			return
		}
	}
	damaged, err := projections.VerifyViews(ctx, e.opts.Home, checks)
	if err == nil && sealed.Size > 0 {
		var bad []projections.ViewCheck
		var views int
		var bytes int64
		bad, views, bytes, err = projections.VerifySealed(ctx, e.opts.Home, sealed, func(view string) bool {
			e.applyMu.Lock()
			defer e.applyMu.Unlock()
			return e.proj.Holds(view)
		})
		damaged = append(damaged, bad...)
		rep.Views += 1 + views
		rep.Bytes += sealed.Size + bytes
	}
	for _, d := range damaged {
		rep.Damaged = append(rep.Damaged, d.View)
	}
	if err != nil && len(damaged) == 0 {
		rep.Err = err // nothing found: the next open checks again
		return
	}
	if len(damaged) == 0 {
		return
	}
	rep.Regenerated, rep.Err = e.regenerateLive(ctx)
}

// regenerateLive replaces the views with a regeneration from the log
// while the engine runs: feedback appends and the committer's apply wait
// for it (fbMu, applyMu), then the projector is reopened on the new views
// and caught up. On failure the views are marked stale, so that the next
// open regenerates them, and a projector is reopened on what is there.
func (e *Engine) regenerateLive(ctx context.Context) (*projections.RegenerateReport, error) {
	if e.opts.ReadOnly {
		// A read-only engine writes nothing in the home: the damaged
		// views stay until a writable open finds them.
		return nil, errors.New("engine: read-only: damaged views not regenerated")
	}
	e.lockFeedback()
	defer e.fbMu.Unlock()
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if err := e.log.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("engine: the log failed, views not regenerated: %w", err), projections.MarkViewsStale(e.opts.Home))
	}
	e.proj.CloseNoCheckpoint()
	p, err := e.regenerate(ctx)
	if err == nil {
		e.proj = p
		// Events committed since regenerate read the log wait on applyMu:
		// LastSeq does not count them yet, apply projects them after this.
		if err = e.catchUpLocked(ctx, e.log.LastSeq()); err == nil {
			e.viewsErr = nil
			e.sinceCP = 0
			e.checkpointLocked()
			return e.regen, e.cpErr
		}
	}
	merr := projections.MarkViewsStale(e.opts.Home)
	if _, ferr := projections.FinishRegenerate(e.opts.Home); ferr != nil {
		merr = errors.Join(merr, ferr)
	}
	if p == nil || err != nil {
		if p != nil {
			p.CloseNoCheckpoint()
		}
		p, perr := projections.Open(e.projOptions(false))
		if perr != nil {
			// No projector: nothing more can be projected; the views lag
			// the log until the next open regenerates them.
			return nil, errors.Join(fmt.Errorf("engine: regenerate damaged views: %w", err), merr, perr)
		}
		e.proj = p
	}
	e.viewsErr = fmt.Errorf("regenerating damaged views: %w", err)
	return nil, errors.Join(fmt.Errorf("engine: regenerate damaged views: %w", err), merr)
}
