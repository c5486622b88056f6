package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cmlab/cmlab/wal"
)

// The kinds shipping makes (state/ship.json, state/ship.lock,
// state/ship-key, the archive's ship-key) need a NATS server with
// JetStream, which the cmlab binary does not hold: the matrix takes its
// URL (DamageOptions.NATS, cmlab torture --damage --nats URL; the Go
// tests start one in-process). The fixture then ships its log once before
// compaction (so the archive keeps a copy of the ship key) and once at the
// end, and `cmlab restore` and `cmlab ship` join the commands.

// shipCaught runs `cmlab ship` on homeDir to the NATS server at url until
// state/ship.json says the stream holds the log's last seq, then stops it
// with SIGTERM.
func shipCaught(ctx context.Context, bin, homeDir, url string) error {
	r, err := wal.OpenReader(filepath.Join(homeDir, "wal"))
	if err != nil {
		return err
	}
	last, err := r.LastSeq()
	if err != nil {
		return err
	}
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
		if st, err := readShipCursor(homeDir); err == nil && st.Shipped >= last && strings.Contains(out.String(), shipStarted) {
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

// shipStarted is what cmlab ship prints once it handles SIGTERM (and
// before it ships).
const shipStarted = "interrupt to stop"

type shipCursor struct {
	Shipped   uint64 `json:"shipped_seq"`
	LastSeq   uint64 `json:"last_seq"`
	UpdatedAt string `json:"updated_at"`
}

// readShipCursor reads homeDir's state/ship.json.
func readShipCursor(homeDir string) (shipCursor, error) {
	var st shipCursor
	b, err := os.ReadFile(filepath.Join(homeDir, "state", "ship.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// runShip runs `cmlab ship` on the damaged home h, as a case's command:
// it follows the log until stopped, so once state/ship.json says the
// stream holds the log's last seq, or after 10 s, it gets SIGTERM (and
// should exit 0); a ship that ends on its own returns its code and output.
func (m *matrix) runShip(ctx context.Context, h string, nobody bool) (int, string, []string) {
	cmd := exec.Command(m.bin, "ship", "--home", h, "--nats", m.o.NATS)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = m.work
	cmd.Env = append(os.Environ(), "CMLAB_HOME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	asUser(cmd, nobody)
	if err := cmd.Start(); err != nil {
		return 1, err.Error(), nil
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Caught up: this run wrote the cursor (it found where the stream
	// ends) and the stream holds what it knows of the log.
	before, _ := readShipCursor(h)
	caughtUp := func() bool {
		st, err := readShipCursor(h)
		return err == nil && strings.Contains(out.String(), shipStarted) && st.UpdatedAt != before.UpdatedAt && st.Shipped == st.LastSeq
	}
	termed := false
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-exited:
			return exitOf(ctx, cmd, err), out.String(), nil
		case <-ctx.Done(): // the whole group goes
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return -2, out.String(), nil
		case <-time.After(50 * time.Millisecond):
		}
		if !termed && (caughtUp() || time.Now().After(deadline)) {
			cmd.Process.Signal(syscall.SIGTERM)
			termed = true
		}
	}
}
