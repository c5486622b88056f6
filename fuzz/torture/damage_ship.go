package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The kinds shipping makes (state/ship.json, state/ship.lock,
// state/ship-key, the archive's ship-key) need a NATS server with
// JetStream, which the cmlab binary does not hold: the matrix takes its
// URL (DamageOptions.NATS, cmlab torture --damage --nats URL; the Go
// tests start one in-process). The fixture then ships its log once before
// compaction (so the archive keeps a copy of the ship key) and once at the
// end, and `cmlab restore` joins the commands.

// shipCaught runs `cmlab ship` on homeDir to the NATS server at url until
// state/ship.json says the stream holds the log's last seq, then stops it
// with SIGTERM.
func shipCaught(ctx context.Context, bin, homeDir, url string) error {
	cmd := exec.CommandContext(ctx, bin, "ship", "--home", homeDir, "--nats", url)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// stop ends it (the cursor is durable before it says so: whether the
	// SIGTERM finds it in its handler or not makes no difference).
	stop := func(why string) error {
		cmd.Process.Signal(syscall.SIGTERM)
		err := <-exited
		if why != "" {
			return fmt.Errorf("fixture: cmlab ship: %s (%v):\n%s", why, err, tail(out.String(), 2000))
		}
		return nil
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		var st struct {
			Shipped uint64 `json:"shipped_seq"`
			LastSeq uint64 `json:"last_seq"`
		}
		if b, err := os.ReadFile(filepath.Join(homeDir, "state", "ship.json")); err == nil && json.Unmarshal(b, &st) == nil &&
			st.Shipped > 0 && st.Shipped == st.LastSeq {
			return stop("")
		}
		if time.Now().After(deadline) {
			return stop("the stream did not catch up with the log in 60 s")
		}
		select {
		case err := <-exited:
			return fmt.Errorf("fixture: cmlab ship ended (%v):\n%s", err, tail(out.String(), 2000))
		case <-ctx.Done():
			return stop(ctx.Err().Error())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
