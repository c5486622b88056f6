package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/ship"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/pflag"
)

// Authenticated restores (ship/auth.go): every message of a home's stream
// carries a MAC under the home's ship key; 'cmlab restore' and 'replay
// --from-nats' check it with --key FILE (the home's state/ship-key, or
// ship-key in its compaction archive: --key-from-archive DIR), and refuse a
// forged, foreign, duplicated or damaged message with exit 3 naming its seq
// and the fix.

// restoreKeyOpts are the key flags of restore and replay --from-nats.
type restoreKeyOpts struct {
	keyFile, keyArchive string
	unauthenticated     bool
}

func (o *restoreKeyOpts) flags(f *pflag.FlagSet, prefix string) {
	f.StringVar(&o.keyFile, "key", "", prefix+"the home's ship key `FILE` (its state/ship-key): every event is checked against it")
	f.StringVar(&o.keyArchive, "key-from-archive", "", prefix+"take the ship key from the home's compaction archive `DIR` (its ship-key file; the archive must be this home's)")
	f.BoolVar(&o.unauthenticated, "unauthenticated", false, prefix+"restore without checking who published the events (no key at hand); a message without a MAC after one with is still refused")
}

// key returns the key to check the stream of homeID with: --key,
// --key-from-archive, or local's state/ship-key when local is homeID's
// home (replay --from-nats in the home itself); nil with --unauthenticated.
func (o *restoreKeyOpts) key(homeID string, local *home.Home) ([]byte, error) {
	switch {
	case o.keyFile != "" && o.keyArchive != "":
		return nil, &usageError{"--key and --key-from-archive are exclusive"}
	case o.keyFile != "":
		k, err := ship.ReadKey(o.keyFile)
		return k, keyFix(err, "--key-from-archive DIR (the home's compaction archive keeps a copy)")
	case o.keyArchive != "":
		a, err := wal.ReadArchiveIdentity(o.keyArchive)
		if err != nil {
			return nil, keyFix(err, "--key FILE (a copy of the home's state/ship-key)")
		}
		if a != nil && a.HomeID != "" && a.HomeID != homeID {
			return nil, keyFix(fmt.Errorf("%s is the archive of home %s, not of %s: its ship key cannot authenticate this stream", o.keyArchive, a.HomeID, homeID),
				"--key-from-archive with this home's archive, or --key FILE (a copy of its state/ship-key)")
		}
		k, err := ship.ReadKey(filepath.Join(o.keyArchive, "ship-key"))
		return k, keyFix(err, "--key FILE (a copy of the home's state/ship-key)")
	case local != nil:
		if id, err := home.ReadHomeID(*local); err == nil && id == homeID {
			if k, err := ship.ReadKey(ship.KeyFile(*local)); err == nil {
				return k, nil
			}
		}
	}
	return nil, nil
}

// keyFix is err (a key given to restore that cannot be used) with its
// fix: the other way to give the key, else --unauthenticated. Nothing is
// written before the key is read.
func keyFix(err error, other string) error {
	if err == nil {
		return nil
	}
	return &cliError{Code: "BAD_KEY", Message: err.Error(), exit: exitError, cause: err,
		Fix: "pass " + other + "; if no copy of the key is left, --unauthenticated restores without checking who published the events"}
}

// restoreFix is the exit-3 error, with its fix, for a stream that cannot
// be restored as it is; nil when err is none of those.
func restoreFix(err error, stream string) error {
	var me *ship.MessageError
	switch {
	case errors.Is(err, ship.ErrGap):
		return newCLIError(exitCorrupt, "GAP", err.Error(), "restore the events before the first missing seq with --to SEQ (the stream lacks the ones named); they exist nowhere else unless a backup or the compaction archive of the home holds them")
	case errors.Is(err, ship.ErrNeedKey):
		return newCLIError(exitCorrupt, "NEED_KEY", err.Error(), "pass --key FILE (the home's state/ship-key) or --key-from-archive DIR (its compaction archive keeps a copy); without either, --unauthenticated restores without checking who published the events")
	case errors.As(err, &me):
		fix := fmt.Sprintf("seq %d is not an event this home shipped (forged, another home's, duplicated or damaged): restore the events before it with --to %d, and inspect the stream with 'nats stream view %s'", me.Seq, me.Seq-1, me.Stream)
		if me.Seq <= 1 {
			fix = fmt.Sprintf("the stream's first message is not this home's: check --home-id and --stream, and inspect it with 'nats stream view %s'", me.Stream)
		}
		return newCLIError(exitCorrupt, "BAD_MESSAGE", err.Error(), fix)
	case errors.Is(err, ship.ErrOtherHome), errors.Is(err, ship.ErrBadMessage):
		return newCLIError(exitCorrupt, "BAD_MESSAGE", err.Error(), "check --home-id and --stream: the stream holds another home's events")
	}
	_ = stream
	return nil
}
