package labapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/retention"
	"github.com/cmlab/cmlab/steps"
	"github.com/cmlab/cmlab/wal"
)

// Reads for commands without a daemon (issue 16 §5): the answers of
// GET /api/runs, GET /api/steps and GET /api/feedback built from the read
// models' snapshots and the log after them (or from the view file), read
// without the log's lock and without opening the home, so that no command
// replays the whole log. Each answer is the same JSON the route writes.
// A read that had to replay a long tail (no daemon of this build closed
// the home) writes the model's snapshot for the next command (the CLI
// calls these only for a home its user owns).

// ErrViewsNotCurrent: the view a local read would serve is not known to
// be current (the checkpoint lags the log, or feedback.jsonl holds lines
// the log does not account for yet): open the home instead (Dial), which
// catches the views up.
var ErrViewsNotCurrent = errors.New("labapi: the views are not known to be current")

// ReadRunsList is GET /api/runs of h without a daemon: read from the Lab
// store opened read-only, when it covers the whole log (as a daemon
// stopped cleanly leaves it); otherwise ErrViewsNotCurrent (the caller
// opens the home, which brings the store up to the log).
func ReadRunsList(h home.Home) (json.RawMessage, error) {
	r, err := wal.OpenReader(h.WALDir())
	if err != nil {
		return nil, err
	}
	last, err := r.LastSeq()
	if err != nil {
		return nil, err
	}
	db, covered, coveredID, err := openLabStoreFile(LabStoreFile(h), true)
	if err != nil {
		return nil, fmt.Errorf("%w: Lab store: %v", ErrViewsNotCurrent, err)
	}
	defer db.Close()
	if covered != last {
		return nil, fmt.Errorf("%w: the Lab store covers seq %d, the log ends at %d", ErrViewsNotCurrent, covered, last)
	}
	if covered > 0 {
		var id string
		for ev, err := range r.Events(covered) {
			if err != nil {
				return nil, err
			}
			id = ev.ID
			break
		}
		if id != coveredID {
			return nil, fmt.Errorf("%w: the Lab store covers another log", ErrViewsNotCurrent)
		}
	}
	// Read-only: a damaged value is an error, never a rebuild.
	st := labStoreReader(db, covered, coveredID)
	defer st.Close()
	var buf bytes.Buffer
	if err := writeRunsList(&buf, st); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ReadStepsList is GET /api/steps[?mandateId=id] of h without a daemon
// (the step state's snapshot and the log after it, steps.Load). An
// unknown or invalid id is the route's *APIError.
func ReadStepsList(h home.Home, id string) (json.RawMessage, error) {
	st, read, err := steps.Load(h)
	if err != nil {
		return nil, err
	}
	if read >= steps.SnapshotEvery {
		st.WriteSnapshot(steps.SnapshotFile(h), 0) // as loadLabStateLocal
	}
	body, err := stepsListBody(st, id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(body)
}

// ReadFeedbackPage is GET /api/feedback of h without a daemon: the view
// file from the cursor (PollFeedback), once the checkpoint shows it
// current: the checkpoint covers the log's last seq (found by the
// retention model's snapshot and the log's tail) and feedback.jsonl
// has exactly the size the checkpoint recorded. Otherwise
// ErrViewsNotCurrent.
func ReadFeedbackPage(h home.Home, since, sessionID, limit string) (*FeedbackPage, error) {
	cp, err := projections.ReadCheckpoint(h)
	if err != nil || cp == nil {
		return nil, fmt.Errorf("%w: no usable checkpoint", ErrViewsNotCurrent)
	}
	// The log's last seq: the retention model's snapshot and the log
	// after it, whose damage is reported as opening the home would.
	_, info, err := retention.Load(h)
	if err != nil {
		return nil, err
	}
	if last := info.Last; cp.Seq != last {
		return nil, fmt.Errorf("%w: checkpoint at seq %d, log at %d", ErrViewsNotCurrent, cp.Seq, info.Last)
	}
	var size int64
	if fi, err := os.Stat(h.FeedbackFile()); err == nil {
		size = fi.Size()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if want := cp.Views[projections.FeedbackView]; want != size {
		return nil, fmt.Errorf("%w: feedback.jsonl has %d bytes, the checkpoint %d", ErrViewsNotCurrent, size, want)
	}
	return PollFeedback(h.FeedbackFile(), since, strings.TrimSpace(sessionID), parseLimit(limit))
}
