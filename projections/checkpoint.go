package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cmlab/cmlab/home"
)

// checkpointVersion is the format version of state/checkpoint.json.
const checkpointVersion = 1

// Checkpoint is the content of state/checkpoint.json:
//
//	{"version":1,"seq":1234,"views":{"feedback/feedback.jsonl":5678,...}}
//
// seq is the last event whose projection every listed view holds, and views
// maps each view file (home-relative, forward slashes) to its byte size at
// that point. Keys are written sorted, so equal checkpoints are equal bytes.
type Checkpoint struct {
	Version int              `json:"version"`
	Seq     uint64           `json:"seq"`
	Views   map[string]int64 `json:"views"`
}

// ReadCheckpoint loads h's checkpoint. A missing file is (nil, nil); an
// unreadable or malformed one is an error wrapping ErrCheckpoint.
func ReadCheckpoint(h home.Home) (*Checkpoint, error) {
	b, err := os.ReadFile(h.CheckpointFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("%w: state/checkpoint.json: %v", ErrCheckpoint, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("%w: state/checkpoint.json has version %d, want %d", ErrCheckpoint, cp.Version, checkpointVersion)
	}
	if cp.Views == nil {
		cp.Views = map[string]int64{}
	}
	return &cp, nil
}

// writeCheckpoint replaces state/checkpoint.json atomically.
func writeCheckpoint(h home.Home, cp *Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(h.CheckpointFile(), append(b, '\n'))
}
