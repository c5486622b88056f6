package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// The archive part of 'cmlab wal verify' and 'cmlab status': every range
// compaction archived must be where wal/MANIFEST (or --archive) says,
// this home's, and readable; wal verify reads every archived entry like
// the log's own (wal.VerifyArchives). A problem exits 3 naming the files
// and the fix.

// verifyWithArchives is wal verify's JSON: the log's report and the
// archive's.
type verifyWithArchives struct {
	wal.Report
	Archives *wal.ArchiveReport `json:"archives,omitempty"`
}

// archiveFix is what to type about archive problems ps.
func archiveFix(homeFlag string, ps []wal.ArchiveProblem) string {
	h := ""
	if homeFlag != "" {
		h = " --home " + homeFlag
	}
	var fixes []string
	seen := map[string]bool{}
	for _, p := range ps {
		var f string
		switch p.Kind {
		case wal.ArchiveMissing:
			f = fmt.Sprintf("restore the archive: put the segment files of seqs %d..%d back in %s (from a backup, or 'cmlab restore' from the home's stream), or pass --archive DIR where they are now", p.First, p.Last, p.Archive)
		case wal.ArchiveForeign:
			f = fmt.Sprintf("pass --archive with this home's own archive (%s is not it)", p.Archive)
			if p.File != p.Archive && !strings.HasSuffix(p.File, "/ARCHIVE") {
				f = fmt.Sprintf("put this home's own copy of %s back (from a backup of the archive, or 'cmlab restore' from the home's stream), or pass --archive DIR where this home's archive is", p.File)
			}
		default:
			if strings.HasSuffix(p.File, "/ARCHIVE") {
				f = "rewrite the archive's record with 'cmlab compact --repair-manifest --archive " + p.Archive + h + "'"
			} else {
				f = "keep every intact archived entry with 'cmlab recover --salvage --apply" + h + "' (stop the daemon first; it salvages archived segments like the log's)"
			}
		}
		if !seen[f] {
			seen[f] = true
			fixes = append(fixes, f)
		}
	}
	return strings.Join(fixes, "; ")
}

// archiveError is the exit-3 error for archive problems.
func archiveError(homeFlag string, rep wal.ArchiveReport) error {
	ps := rep.Problems
	msg := fmt.Sprintf("the log's archive is incomplete or damaged: %d problem(s):", len(ps))
	for _, p := range ps {
		msg += "\n    " + p.String()
	}
	return newCLIError(exitCorrupt, "ARCHIVE", msg, archiveFix(homeFlag, ps))
}

// printArchives prints the archive lines of wal verify.
func printArchives(w io.Writer, rep *wal.ArchiveReport) {
	if rep == nil || (rep.Ranges == 0 && rep.Deleted == 0) {
		return
	}
	fmt.Fprintf(w, "archive: %d range(s), %d segment(s), %d entries checked", rep.Ranges, rep.Segments, rep.Entries)
	if rep.Deleted > 0 {
		fmt.Fprintf(w, "; %d seq(s) deleted by compaction", rep.Deleted)
	}
	fmt.Fprintln(w)
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "ARCHIVE %s: %s\n", strings.ToUpper(p.Kind), p)
	}
}

// statusArchives is the archive check of 'cmlab status': presence,
// ownership and soundness of every archived range, as the next open
// checks it (wal.CheckArchives: a stat per segment an open read whole
// and recorded, unchanged since; any other segment is read). Problems
// make the health degraded and the command exit 3.
func statusArchives(h home.Home, g *globalOpts, rep *statusReport) error {
	if err := wal.CheckFront(h.WALDir()); err != nil {
		if rep.Health != nil && rep.Health.Status == "ok" {
			rep.Health.Status = "degraded"
			rep.Health.Cause = err.Error()
			rep.Health.Fix = fixForCorrupt(g.home, err)
		}
		return err
	}
	arep, err := wal.CheckArchives(h.WALDir(), g.archive)
	if err != nil {
		return nil // a bad manifest is reported by the log's own check
	}
	if arep.Ranges > 0 {
		rep.Archive = &arep
	}
	if arep.OK() {
		return nil
	}
	aerr := archiveError(g.home, arep)
	if rep.Health != nil && rep.Health.Status == "ok" {
		rep.Health.Status = "degraded"
		rep.Health.Cause = fmt.Sprintf("the log's archive is incomplete or damaged: %s", arep.Problems[0])
		rep.Health.Fix = archiveFix(g.home, arep.Problems)
	}
	return aerr
}

// archiveOpenError describes the refusal of an open whose archive is
// incomplete, damaged or another home's (*wal.ArchiveError): exit 3,
// the problems and their fixes.
func archiveOpenError(homeFlag string, err error) (cliError, bool) {
	var ae *wal.ArchiveError
	if !errors.As(err, &ae) {
		return cliError{}, false
	}
	msg, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "engine: "), "\n  fix: ")
	return cliError{Code: "ARCHIVE", Message: msg, Fix: archiveFix(homeFlag, ae.Report.Problems), exit: exitCorrupt}, true
}
