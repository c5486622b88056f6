package labapi

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cmlab/cmlab/confine"
)

// What a daemon exposes to local callers that do not hold the operator
// token (issue 27 findings 5 and 8): the import roots, the export budget
// and the Lab streams' share of the connection cap. docs/security.md
// describes them for the operator.

// exposureState is the Server's state of the above.
type exposureState struct {
	peerMu     sync.Mutex
	peerGroups map[int]confine.User // peer.go: uids' groups

	exportMu sync.Mutex // an export's budget check and write are one step

	labStreams  atomic.Int64 // Lab-token event streams held now (events_budget.go)
	streamReads atomic.Int64 // log reads made by event streams, for tests
}

// DefaultExportBudget is how many bytes lab/exports/ may hold (64 MiB):
// an export is a few KiB to a few MiB, and anyone holding the Lab token
// may ask for one, so the directory cannot grow without bound (issue 27
// finding 5: 20 exports in 11 s wrote 9.7 MB).
const DefaultExportBudget = 64 << 20

// checkExportBudget refuses an export of n bytes to target when the
// exports directory would then hold more than the budget (507, naming
// the fix). A file target replaces counts as freed.
func (s *Server) checkExportBudget(root, target string, n int) error {
	budget := s.opts.ExportBudget
	if budget <= 0 {
		budget = DefaultExportBudget
	}
	var used int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && p != target {
			if fi, err := d.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("measuring lab/exports/: %w", err)
	}
	if used+int64(n) > budget {
		return NewError(CodeInsufficientStorage, fmt.Sprintf("the exports directory holds %d bytes; this export (%d bytes) would pass its budget of %d bytes", used, n, budget),
			"Remove exports you no longer need from lab/exports/ in the cmlab home (or pass the same path to overwrite one), or restart the daemon with a larger --export-budget.").
			With("usedBytes", used).With("exportBytes", n).With("budgetBytes", budget)
	}
	return nil
}
