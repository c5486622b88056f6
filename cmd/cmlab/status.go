package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/pty"
	"github.com/cmlab/cmlab/ship/cursor"
	"github.com/spf13/cobra"
)

type statusReport struct {
	Home        string             `json:"home"`
	Daemon      *labapi.DaemonInfo `json:"daemon"`
	Health      *labapi.Health     `json:"health,omitempty"`
	HealthError string             `json:"healthError,omitempty"`
	LogBytes    int64              `json:"logBytes"`
	LogSegments int                `json:"logSegments"`
	LastSeq     uint64             `json:"lastSeq"`
	Checkpoint  json.RawMessage    `json:"checkpoint"`
	Durability  string             `json:"durability"`
	AwaitReview []string           `json:"awaitingReview"`
	Compaction  *compactionStatus  `json:"compaction"`
	// LeftOpen: terminal blocks a crash left open (no daemon runs).
	LeftOpen []pty.LeftBlock `json:"terminalLeftOpen"`
	Ship     *shipStatus     `json:"ship,omitempty"`
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

With no daemon, status opens the home in-process (which repairs a torn tail
and catches the views up, as any command would).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			if ok, err := homeExists(h); err != nil {
				return err
			} else if !ok {
				// Never create a home to report on it (requireHome's rule,
				// without --init: status only reads).
				return newCLIError(exitError, "NO_HOME", fmt.Sprintf("no cmlab home at %s (%s)", h.Dir, g.homeSource()),
					"check the path; 'cmlab serve --home DIR' creates a home and serves it")
			}
			var openErr error // a corrupt log: reported, then returned
			rep := statusReport{Home: h.Dir, AwaitReview: []string{},
				Durability: "fsync before acknowledging: each group commit is one write + one fsync (plus directory fsync for a new segment)"}
			if info, err := labapi.ReadDaemonInfo(h); err == nil {
				rep.Daemon = info
			}
			c, closeFn, err := labapi.Dial(cmd.Context(), h, labapi.DialOptions{Version: labapi.Version})
			if err != nil {
				rep.HealthError = err.Error()
				if isCorrupt(err) {
					openErr = err // exit 3 with the salvage commands
				}
			} else {
				var hl labapi.Health
				if err := c.Do(cmd.Context(), "GET", "/api/health", "", nil, &hl); err != nil {
					rep.HealthError = labErr(err).Error()
				} else {
					rep.Health = &hl
					rep.LastSeq = hl.WalIndex
				}
				closeFn()
			}
			rep.LogBytes, rep.LogSegments = walDirSize(h.WALDir())
			if b, err := os.ReadFile(h.CheckpointFile()); err == nil && json.Valid(b) {
				rep.Checkpoint = json.RawMessage(strings.TrimSpace(string(b)))
			} else {
				rep.Checkpoint = json.RawMessage("null")
			}
			rep.AwaitReview = stepsAwaitingReview(h)
			rep.Compaction = readCompactionStatus(cmd.Context(), h)
			rep.LeftOpen = []pty.LeftBlock{}
			if rep.Daemon == nil && openErr == nil {
				rep.LeftOpen = leftOpenBlocks(h)
			}
			if st, err := cursor.Read(h); err == nil {
				st.LastSeq = max(st.LastSeq, rep.LastSeq)
				rep.Ship = &shipStatus{State: st, Lag: st.Lag()}
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
				fmt.Fprintf(w, "daemon:      running, pid %d at http://%s (session %s)\n", rep.Daemon.Pid, rep.Daemon.Listen, rep.Daemon.SessionID)
			} else {
				fmt.Fprintf(w, "daemon:      not running\n")
			}
			switch {
			case rep.Health == nil:
				fmt.Fprintf(w, "health:      unknown: %s\n", rep.HealthError)
			case rep.Health.Status == "degraded":
				fmt.Fprintf(w, "health:      DEGRADED: %s\n             fix: %s\n", rep.Health.Cause, rep.Health.Fix)
			default:
				fmt.Fprintf(w, "health:      %s\n", rep.Health.Status)
			}
			fmt.Fprintf(w, "log:         %d bytes in %d segment(s), last seq %d\n", rep.LogBytes, rep.LogSegments, rep.LastSeq)
			printCompactionStatus(w, rep.Compaction)
			var cp struct {
				Seq uint64 `json:"seq"`
			}
			if string(rep.Checkpoint) != "null" && json.Unmarshal(rep.Checkpoint, &cp) == nil {
				fmt.Fprintf(w, "checkpoint:  seq %d\n", cp.Seq)
			} else {
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
			printLeftOpen(w, rep.LeftOpen)
			return openErr
		},
	}
}

func walDirSize(dir string) (int64, int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	var n int64
	segs := 0
	for _, e := range ents {
		if e.IsDir() || e.Name() == "LOCK" || e.Name() == "MANIFEST" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
			segs++
		}
	}
	return n, segs
}

// stepsAwaitingReview reads steps/steps.jsonl (last record per step wins)
// and lists "mandate/step" of those whose status is needs_review.
func stepsAwaitingReview(h home.Home) []string {
	out := []string{}
	f, err := os.Open(h.StepsFile())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return []string{"unreadable " + filepath.Base(h.StepsFile()) + ": " + err.Error()}
		}
		return out
	}
	defer f.Close()
	last := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		m, _ := rec["mandate_id"].(string)
		s, _ := rec["step_id"].(string)
		st, _ := rec["status"].(string)
		key := m + "/" + s
		if _, ok := last[key]; !ok {
			order = append(order, key)
		}
		last[key] = st
	}
	for _, k := range order {
		if last[k] == "needs_review" {
			out = append(out, k)
		}
	}
	return out
}
