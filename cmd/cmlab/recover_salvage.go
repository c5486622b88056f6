package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/wal"
)

// salvageLog runs wal.Salvage over the home's log (the daemon must be
// stopped: Salvage takes the lock) and lists each lost entry with where it
// was and what its neighbours say it probably was.
func salvageLog(h home.Home) ([]recovery.SalvagedEntry, error) {
	rep, err := wal.Salvage(h.WALDir(), h.QuarantineDir())
	if err != nil {
		return nil, err
	}
	out := make([]recovery.SalvagedEntry, 0, len(rep.Lost))
	for _, l := range rep.Lost {
		where := fmt.Sprintf("segment %s offset %d (%s", l.Segment, l.Offset, l.Reason)
		if q := l.Quarantine; q != "" {
			if filepath.IsAbs(q) {
				q = h.Rel(q)
			} else {
				q = "quarantine/" + filepath.ToSlash(q)
			}
			where += ", bytes in " + q
		}
		where += ")"
		guess := l.Guess
		var nb []string
		if l.Prev != nil {
			nb = append(nb, fmt.Sprintf("after seq %d %s on %s", l.Prev.Seq, l.Prev.Type, l.Prev.Stream))
		}
		if l.Next != nil {
			nb = append(nb, fmt.Sprintf("before seq %d %s on %s", l.Next.Seq, l.Next.Type, l.Next.Stream))
		}
		if guess == "" {
			guess = strings.Join(nb, ", ")
		}
		out = append(out, recovery.SalvagedEntry{Seq: l.Seq, Where: where, Guess: guess})
	}
	return out, nil
}
