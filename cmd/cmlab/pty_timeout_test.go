package main

import (
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// exec and follow wait for their block without a limit unless --timeout
// (or the old --timeout-ms) was given: the waits' 30 s default is not
// theirs, even when given explicitly it is.
func TestPtyFollowTimeout(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"--timeout", "2s"}, 2 * time.Second},
		{[]string{"--timeout", "30s"}, 30 * time.Second},
		{[]string{"--timeout-ms", "1500"}, 1500 * time.Millisecond},
		{[]string{"--timeout", "2s", "--timeout-ms", "1500"}, 1500 * time.Millisecond},
	} {
		o := &ptyOpts{}
		cmd := &cobra.Command{Use: "exec"}
		cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "") // as newPtyCmd
		cmd.Flags().Int64Var(&o.timeoutMs, "timeout-ms", 0, "")
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		if got := o.followTimeout(cmd); got != c.want {
			t.Errorf("%q: followTimeout = %v, want %v", c.args, got, c.want)
		}
	}
}
