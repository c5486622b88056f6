package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/cmlab/cmlab/wal"
	"github.com/spf13/cobra"
)

type statusReport struct {
	Home   string             `json:"home"`
	Daemon *labapi.DaemonInfo `json:"daemon"`
	// StaleDaemon says why state/daemon.json names no running daemon.
	StaleDaemon string            `json:"staleDaemon,omitempty"`
	Health      *labapi.Health    `json:"health,omitempty"`
	HealthError string            `json:"healthError,omitempty"`
	LogBytes    int64             `json:"logBytes"`
	LogSegments int               `json:"logSegments"`
	LastSeq     uint64            `json:"lastSeq"`
	Checkpoint  json.RawMessage   `json:"checkpoint"`
	Durability  string            `json:"durability"`
	AwaitReview []string          `json:"awaitingReview"`
	Compaction  *compactionStatus `json:"compaction"`
	// LeftOpen: terminal blocks a crash left open (no daemon runs).
	LeftOpen []pty.LeftBlock `json:"terminalLeftOpen"`
	// Executing: steps left executing (no daemon runs); UncleanStop: the
	// last daemon, when it did not stop cleanly (status_crash.go).
	Executing   []string           `json:"executing"`
	UncleanStop *labapi.DaemonInfo `json:"uncleanStop,omitempty"`
	Ship        *shipStatus        `json:"ship,omitempty"`
	// Archive: the check of the compacted log's archived ranges (wal_archive.go).
	Archive *wal.ArchiveReport `json:"archive,omitempty"`

	// LogBytes (above) is the bytes of the log's entries, to the end of
	// the last valid frame; LogAllocatedBytes the segment files' sizes,
	// which include the zeros preallocated ahead of the writer
	// (wal/prealloc.go). Version is this command's (the daemon's is in
	// daemon.version); ReadOnly whether writes to the home are refused,
	// and why (status_mode.go). Adopted: the content-machine home cmlab
	// adopted (state/adopted.json, engine/adopt.go).
	LogAllocatedBytes int64               `json:"logAllocatedBytes"`
	Version           string              `json:"version"`
	ReadOnly          bool                `json:"readOnly"`
	ReadOnlyReason    string              `json:"readOnlyReason,omitempty"`
	Adopted           *engine.AdoptReport `json:"adopted,omitempty"`

	// cpSeq is the checkpoint's seq when cpOK; cpErr why it is not
	// trusted (projections.ReadCheckpointSeq), for the text output.
	cpSeq uint64
	cpOK  bool
	cpErr error
}

// shipStatus is state/ship.json with the lag against the log's last seq.
type shipStatus struct {
	cursor.State
	Lag uint64 `json:"lag"`
}

// newStatusCmd builds 'cmlab status'.
func newStatusCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon, log health, size, last seq, checkpoint and steps awaiting review",
		Long: `Show the state of the home: the running daemon (address, pid, session) or
that none runs; health ("ok", or "degraded" with its cause when the log
cannot make writes durable); log size and last sequence; the last
checkpoint; the durability policy; and steps awaiting manual review.

Status only reads, and never the whole log: the steps awaiting review, the
blocks a crash left open and the reclaimable bytes come from the retention
model's snapshot (state/snapshots/retention.msgpack, written by the daemon
at checkpoints) and the log after it, read without the log's lock. With no
daemon, health is the log's own state on disk (a torn tail is repaired by
the next command that opens the home; the checkpoint shown is the one on
disk, which catch-up brings to the log then).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			if ok, err := homeExists(h); err != nil {
				return err
			} else if !ok && engine.WantsAdoption(h) {
				return newCLIError(exitError, "NO_HOME", fmt.Sprintf("%s is a content-machine home that cmlab has not opened yet (%s)", h.Dir, g.homeSource()),
					"'cmlab serve --home DIR' (or any command that opens it) adopts it: their runs, experiments and feedback become cmlab's, their files stay as they are (docs/content-machine.md)")
			} else if !ok {
				// Never create a home to report on it (requireHome's rule,
				// without --init: status only reads).
				return newCLIError(exitError, "NO_HOME", fmt.Sprintf("no cmlab home at %s (%s)", h.Dir, g.homeSource()),
					"check the path; 'cmlab serve --home DIR' creates a home and serves it")
			}
			rep, openErr := gatherStatus(cmd, h, g.json)
			if aerr := statusArchives(h, g, &rep); aerr != nil && openErr == nil {
				openErr = aerr
			}
			if terr := statusTail(h, g, &rep); terr != nil && openErr == nil {
				openErr = terr
			}
			if g.json {
				if err := labPrintJSON(g, rep); err != nil {
					return err
				}
				return openErr
			}
			w := g.stdout
			fmt.Fprintf(w, "home:        %s\n", rep.Home)
			if rep.Daemon != nil {
				mode := ""
				if rep.Health != nil && rep.Health.ReadOnly {
					mode = ", read-only: every write is refused"
				}
				fmt.Fprintf(w, "daemon:      running, pid %d at http://%s (session %s%s), version %s\n", rep.Daemon.Pid, rep.Daemon.Listen, rep.Daemon.SessionID, mode, rep.Daemon.Version)
			} else if rep.StaleDaemon != "" && rep.UncleanStop == nil {
				fmt.Fprintf(w, "daemon:      not running (%s; 'cmlab serve' starts one and replaces the file)\n", strings.TrimPrefix(rep.StaleDaemon, "no daemon runs: "))
			} else {
				printNoDaemon(w, rep.UncleanStop) // status_crash.go
				if rep.StaleDaemon != "" {
					fmt.Fprintf(w, "             (%s; 'cmlab serve' starts one and replaces the file)\n", strings.TrimPrefix(rep.StaleDaemon, "no daemon runs: "))
				}
			}
			switch {
			case rep.Health == nil:
				fmt.Fprintf(w, "health:      unknown: %s\n", rep.HealthError)
			case rep.Health.Status == "degraded":
				fmt.Fprintf(w, "health:      DEGRADED: %s\n             fix: %s\n", rep.Health.Cause, rep.Health.Fix)
			default:
				fmt.Fprintf(w, "health:      %s\n", rep.Health.Status)
			}
			printVersionMode(w, rep) // status_mode.go
			printLogBytes(w, rep)
			printCompactionStatus(w, rep.Compaction)
			switch {
			case rep.cpErr != nil:
				fmt.Fprintf(w, "checkpoint:  not trusted: %v (the next start rebuilds the views from the log)\n", rep.cpErr)
			case rep.cpOK:
				fmt.Fprintf(w, "checkpoint:  seq %d\n", rep.cpSeq)
			default:
				fmt.Fprintf(w, "checkpoint:  none\n")
			}
			fmt.Fprintf(w, "durability:  %s\n", rep.Durability)
			if sh := rep.Ship; sh != nil {
				fmt.Fprintf(w, "shipping:    seq %d of %d shipped to stream %s (lag %d), at %s\n", sh.Shipped, sh.LastSeq, sh.Stream, sh.Lag, sh.UpdatedAt)
				switch {
				case sh.Stopped:
					fmt.Fprintf(w, "             STOPPED: %s\n", sh.LastError)
				case sh.Retrying:
					fmt.Fprintf(w, "             RETRYING: %s (since %s)\n", sh.LastError, sh.LastErrorAt)
				case sh.LastError != "":
					fmt.Fprintf(w, "             last error: %s (at %s)\n", sh.LastError, sh.LastErrorAt)
				}
			}
			if len(rep.AwaitReview) == 0 {
				fmt.Fprintf(w, "review:      no steps await manual review\n")
			} else {
				fmt.Fprintf(w, "review:      %d step(s) await manual review: %s (see cmlab recover)\n", len(rep.AwaitReview), strings.Join(rep.AwaitReview, ", "))
			}
			printExecuting(w, rep.Executing)
			printLeftOpen(w, rep.LeftOpen)
			return openErr
		},
	}
}

// gatherStatus builds the status report of h. Nothing in it reads the log
// from seq 1: the retention model is its snapshot and the log after it
// (retention.Load). A corrupt log is reported and returned (exit 3).
// withCheckpoint includes the checkpoint file itself (--json); the text
// output needs only its seq, which a terminal home's checkpoint (a view
// per block) gives without decoding all of it.
func gatherStatus(cmd *cobra.Command, h home.Home, withCheckpoint bool) (statusReport, error) {
	ctx := cmd.Context()
	var openErr error
	rep := statusReport{Home: h.Dir, AwaitReview: []string{}, LeftOpen: []pty.LeftBlock{}, Executing: []string{},
		Durability: "fsync before acknowledging: each group commit is one write + one fsync (plus directory fsync for a new segment)"}
	if info, err := labapi.ReadDaemonInfo(h); err == nil {
		rep.Daemon = info
		c, closeFn, err := daemon.Dial(ctx, h)
		if err != nil {
			rep.HealthError = err.Error()
		} else {
			var hl labapi.Health
			if err := c.Do(ctx, "GET", "/api/health", "", nil, &hl); err != nil {
				rep.HealthError = labErr(err).Error()
			} else {
				rep.Health = &hl
				rep.LastSeq = hl.WalIndex
			}
			closeFn()
		}
	} else if stale := (*labapi.StaleDaemonError)(nil); errors.As(err, &stale) {
		rep.StaleDaemon = stale.Error()
		rep.UncleanStop = uncleanStop(h) // status_crash.go: its daemon.json outlived it
	} else if !errors.Is(err, labapi.ErrNoDaemon) {
		rep.HealthError = err.Error()
	} else {
		rep.UncleanStop = uncleanStop(h)
	}
	m, loaded, merr := retention.Load(h)
	if rep.Daemon == nil && rep.HealthError == "" {
		// No daemon: the log's state on disk is its health.
		if merr != nil {
			rep.HealthError = merr.Error()
			if isCorrupt(merr) {
				openErr = merr // exit 3 with the salvage commands
			} else {
				openErr = unreadableLog(merr) // status_tail.go
			}
		} else {
			rep.Health = &labapi.Health{Status: "ok", WalIndex: loaded.Last}
			rep.LastSeq = loaded.Last
		}
	}
	// One listing (and one stat per segment) serves the log's size and
	// the compaction plan: on a home of 10M events that is 900 segments.
	segs, segErr := wal.Segments(h.WALDir())
	for _, s := range segs {
		rep.LogAllocatedBytes += s.Size
	}
	rep.LogBytes = rep.LogAllocatedBytes
	if u, err := wal.SegmentsUsage(h.WALDir(), segs); err == nil {
		rep.LogBytes, rep.LogAllocatedBytes = u.Written, u.Allocated
		segs = writtenSegments(segs, u) // status_mode.go: retention counts written bytes too
	}
	rep.LogSegments = len(segs)
	gatherMode(h, &rep) // status_mode.go
	rep.Checkpoint = json.RawMessage("null")
	if withCheckpoint {
		if b, err := os.ReadFile(h.CheckpointFile()); err == nil && json.Valid(b) {
			rep.Checkpoint = json.RawMessage(strings.TrimSpace(string(b)))
		}
	}
	// Read once for the text, the compaction plan and the acknowledged
	// tail (statusTail): a terminal home's checkpoint lists a view per
	// block, 7.6 MB at 10M events, read and summed three times before.
	rep.cpSeq, rep.cpOK, rep.cpErr = projections.ReadCheckpointSeq(h)
	if merr != nil {
		rep.AwaitReview = []string{"unknown: " + merr.Error()}
		rep.Compaction = &compactionStatus{ReclaimableBytes: -1, FirstRetainedSeq: 1, Error: merr.Error()}
	} else {
		if rep.Daemon == nil && loaded.Read >= retention.SnapshotEvery && h.CheckOwner() == nil {
			// A long tail (a home no daemon of this version has closed):
			// keep what was read for the next command, as the daemon
			// would at its checkpoints. Best effort: a read-only home
			// just reads the tail again.
			m.WriteSnapshot(retention.SnapshotFile(h), 0)
		}
		rep.AwaitReview = m.AwaitingReview()
		if segErr != nil {
			rep.Compaction = &compactionStatus{ReclaimableBytes: -1, FirstRetainedSeq: 1, Error: segErr.Error()}
		} else {
			rep.Compaction = readCompactionStatus(ctx, h, segs, m, loaded, &compact.KnownCheckpoint{Seq: rep.cpSeq, Present: rep.cpOK, Err: rep.cpErr})
		}
		if rep.Daemon == nil {
			rep.LeftOpen = m.OpenBlocks()
			rep.Executing = m.Executing()
		}
	}
	if st, err := cursor.Read(h); err == nil {
		st.LastSeq = max(st.LastSeq, rep.LastSeq)
		rep.Ship = &shipStatus{State: st, Lag: st.Lag()}
	}
	return rep, openErr
}
