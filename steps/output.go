package steps

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/home"
)

// A step's captured output: what its command wrote (stdout and stderr
// together) on its latest attempt, kept at
// state/step-output/<mandate>/<step>.out so that a reviewer deciding about
// a step a crash left executing can read what it did ('cmlab step show').
// It is a report, not part of the log: the log keeps the output's digest
// (step.completed output_digest); this file is not fsynced, is replaced by
// each attempt, and keeps at most OutputCap bytes.

// OutputCap bounds a step's captured output file.
const OutputCap = 16 << 20

// OutputFile is the captured output of mandate/step in h.
func OutputFile(h home.Home, mandateID, stepID string) string {
	return filepath.Join(h.StateDir(), "step-output", mandateID, stepID+".out")
}

// CaptureOutput returns RunnerOptions.StepOutput for h: each attempt of a
// step truncates its file and writes up to OutputCap bytes into it.
func CaptureOutput(h home.Home) func(mandateID, stepID string) (io.Writer, func() error, error) {
	return func(mandateID, stepID string) (io.Writer, func() error, error) {
		if err := home.ValidateID(mandateID); err != nil {
			return nil, nil, err
		}
		if err := home.ValidateID(stepID); err != nil {
			return nil, nil, err
		}
		p := OutputFile(h, mandateID, stepID)
		// Nothing through a link: the directories on the way (home.CheckPath;
		// 'cmlab run' writes here itself, whether a daemon runs or not) and
		// the file (home.OpenOwn).
		if err := h.CheckPath("state/step-output/" + mandateID); err != nil {
			return nil, nil, fmt.Errorf("step output: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, nil, fmt.Errorf("step output: %w", err)
		}
		f, err := home.OpenOwn(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("step output: %w", err)
		}
		return &cappedWriter{w: f, left: OutputCap}, f.Close, nil
	}
}

// cappedWriter writes up to left bytes to w and drops the rest, never
// failing the command that writes (its output also goes elsewhere).
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.left > 0 {
		b := p
		if int64(len(b)) > c.left {
			b = b[:c.left]
		}
		n, _ := c.w.Write(b)
		c.left -= int64(n)
		if c.left <= 0 {
			fmt.Fprintf(c.w, "\n[cmlab: output past %d bytes not kept here]\n", OutputCap)
			c.left = -1
		}
	}
	return len(p), nil
}
