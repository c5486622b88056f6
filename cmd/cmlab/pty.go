package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ptyOpts are the flags every 'cmlab pty' subcommand shares.
type ptyOpts struct {
	conv      string
	requestID string
	timeoutMs int64
}

// newPtyCmd builds 'cmlab pty': the agent terminal through the running
// daemon's API (a shell lives in the daemon, not in a CLI process).
func newPtyCmd(g *globalOpts) *cobra.Command {
	o := &ptyOpts{}
	c := &cobra.Command{
		Use:   "pty",
		Short: "Drive the agent terminal of the running daemon (blocks, spool, wait_for)",
		Long: `Drive the agent terminal of 'cmlab serve': one bash per conversation, every
output byte in the log and in pty/<conversationId>/output.spool. Cursors are
byte offsets into that spool; pass the resume_cursor of one call as the
--from of the next.`,
	}
	pf := c.PersistentFlags()
	pf.StringVarP(&o.conv, "conversation", "c", "default", "conversation id")
	pf.StringVar(&o.requestID, "request-id", "", "request id for a safe retry (default: a fresh one)")
	pf.Int64Var(&o.timeoutMs, "timeout-ms", 30000, "how long waits wait")
	for _, mk := range []func(*globalOpts, *ptyOpts) *cobra.Command{
		newPtyExecCmd, newPtyInteractiveCmd, newPtySendCmd, newPtyWaitCmd, newPtyPromptCmd,
		newPtyStatusCmd, newPtyReadCmd, newPtyBlocksCmd, newPtySearchCmd, newPtyResetCmd, newPtyEndCmd,
	} {
		c.AddCommand(mk(g, o))
	}
	return c
}

// ptyCall sends one terminal request to the daemon.
func ptyCall(ctx context.Context, g *globalOpts, o *ptyOpts, method, op string, in any, out any) error {
	c, closeFn, err := dialLab(ctx, g)
	if err != nil {
		return err
	}
	defer closeFn()
	if !c.Remote {
		return fmt.Errorf("no daemon serves this home: start 'cmlab serve' first (the terminal lives in the daemon)")
	}
	reqID := ""
	if method == http.MethodPost && o.requestID != "" {
		reqID = o.requestID
	}
	return labErr(c.Do(ctx, method, "/api/pty/"+url.PathEscape(o.conv)+"/"+op, reqID, in, out))
}

// ptyPrint prints the raw JSON answer with --json, else calls human.
func ptyPrint(g *globalOpts, raw json.RawMessage, human func(m map[string]any)) error {
	if g.json {
		return labPrintJSON(g, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	human(m)
	return nil
}

// ptyShow sends one terminal request and prints its answer with ptyPrint.
func ptyShow(cmd *cobra.Command, g *globalOpts, o *ptyOpts, method, op string, in any, human func(m map[string]any)) error {
	var raw json.RawMessage
	if err := ptyCall(cmd.Context(), g, o, method, op, in, &raw); err != nil {
		return err
	}
	return ptyPrint(g, raw, human)
}

func ptyNum(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func newPtyExecCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var cwd string
	var noWait bool
	c := &cobra.Command{
		Use:   "exec CMD",
		Short: "Run CMD as a block; wait for its prompt and print its output (exits 1 when the block exits non-zero; its code is in the message and in --json)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var st map[string]any
			if err := ptyCall(ctx, g, o, http.MethodGet, "status", nil, &st); err != nil {
				return err
			}
			var raw json.RawMessage
			if err := ptyCall(ctx, g, o, http.MethodPost, "exec_block", map[string]any{"cmd": args[0], "cwd": cwd}, &raw); err != nil {
				if strings.Contains(err.Error(), "HTTP 409") {
					return fmt.Errorf("the terminal is busy (a block or an interactive session runs): %w", err)
				}
				return err
			}
			if noWait {
				return ptyPrint(g, raw, func(m map[string]any) { fmt.Fprintln(g.stdout, m["block_id"]) })
			}
			var res map[string]any
			json.Unmarshal(raw, &res)
			id, _ := res["block_id"].(string)
			var w map[string]any
			if err := ptyCall(ctx, g, o, http.MethodPost, "wait_prompt", map[string]any{"from_cursor": st["resume_cursor"], "timeout_ms": o.timeoutMs}, &w); err != nil {
				return err
			}
			if w["matched"] != true {
				return fmt.Errorf("block %s: no prompt within %d ms (foreground: %v)", id, o.timeoutMs, w["foreground"])
			}
			var blk struct {
				Block map[string]any `json:"block"`
			}
			if err := ptyCall(ctx, g, o, http.MethodGet, "blocks/"+id, nil, &blk); err != nil {
				return err
			}
			var out map[string]any
			if err := ptyCall(ctx, g, o, http.MethodGet, "blocks/"+id+"/output?max_bytes=4194304", nil, &out); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, map[string]any{"block": blk.Block, "output": out["data"]})
			}
			fmt.Fprint(g.stdout, out["data"])
			if code := ptyNum(blk.Block["exit_code"]); code != 0 {
				return withCode(exitError, fmt.Errorf("block %s: %v, exit code %d", id, blk.Block["status"], code))
			}
			return nil
		},
	}
	c.Flags().StringVar(&cwd, "cwd", "", "working directory for the command")
	c.Flags().BoolVar(&noWait, "no-wait", false, "print the block id and return at once")
	return c
}

func newPtyInteractiveCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var cwd string
	c := &cobra.Command{
		Use:   "interactive CMD",
		Short: "Start CMD as an interactive session; prints session, block and resume_cursor",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "exec_interactive", map[string]any{"cmd": args[0], "cwd": cwd}, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "session %v block %v resume_cursor %d\n", m["session_id"], m["block_id"], ptyNum(m["resume_cursor"]))
			})
		},
	}
	c.Flags().StringVar(&cwd, "cwd", "", "working directory for the command")
	return c
}

func newPtySendCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var raw bool
	c := &cobra.Command{
		Use:   "send DATA",
		Short: `Type DATA into the terminal (escapes \r \n \t \x03 are decoded unless --raw)`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data := args[0]
			if !raw {
				u, err := strconv.Unquote(`"` + strings.ReplaceAll(data, `"`, `\"`) + `"`)
				if err != nil {
					return &usageError{"DATA has a bad escape: " + err.Error()}
				}
				data = u
			}
			return ptyShow(cmd, g, o, http.MethodPost, "send", map[string]any{"data": data}, func(map[string]any) {})
		},
	}
	c.Flags().BoolVar(&raw, "raw", false, "send DATA as is")
	return c
}

// ptyWait sends one wait request (op wait_for or wait_prompt) and prints
// the answer; a timeout exits 1.
func ptyWait(cmd *cobra.Command, g *globalOpts, o *ptyOpts, op string, in any) error {
	var raw json.RawMessage
	if err := ptyCall(cmd.Context(), g, o, http.MethodPost, op, in, &raw); err != nil {
		return err
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	if err := ptyPrint(g, raw, func(m map[string]any) {
		if m["matched"] == true {
			fmt.Fprintf(g.stdout, "matched %q at %d, resume_cursor %d\n", m["match_text"], ptyNum(m["match_cursor"]), ptyNum(m["resume_cursor"]))
		} else {
			fmt.Fprintf(g.stdout, "timeout, resume_cursor %d (mode %v, foreground %v)\n", ptyNum(m["resume_cursor"]), m["mode"], m["foreground"])
		}
	}); err != nil {
		return err
	}
	if m["matched"] != true {
		return withCode(exitError, fmt.Errorf("timeout"))
	}
	return nil
}

func newPtyWaitCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from int64
	var matchType string
	c := &cobra.Command{
		Use:   "wait MATCH",
		Short: "Wait for MATCH in the spool from --from (substring, regex or prompt)",
		Args:  cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			match := ""
			if len(args) == 1 {
				match = args[0]
			}
			return ptyWait(cmd, g, o, "wait_for", map[string]any{"match": match, "match_type": matchType, "from_cursor": from, "timeout_ms": o.timeoutMs})
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "cursor to scan from (a resume_cursor)")
	c.Flags().StringVar(&matchType, "type", "substring", "substring | regex | prompt")
	return c
}

func newPtyPromptCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from int64
	c := &cobra.Command{
		Use:   "prompt",
		Short: "Wait for the prompt sentinel from --from and mode idle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyWait(cmd, g, o, "wait_prompt", map[string]any{"from_cursor": from, "timeout_ms": o.timeoutMs})
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "cursor to scan from (a resume_cursor)")
	return c
}

func newPtyStatusCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Mode, active block/session, shell and resume_cursor",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodGet, "status", nil, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "mode %v  resume_cursor %d  blocks %d  shell %v alive=%v\n", m["mode"], ptyNum(m["resume_cursor"]), ptyNum(m["blocks"]), m["shell_id"], m["shell_alive"])
				if m["active_block_id"] != nil {
					fmt.Fprintf(g.stdout, "active block %v session %v\n", m["active_block_id"], m["active_session_id"])
				}
				if m["foreground"] != nil {
					fmt.Fprintf(g.stdout, "foreground %v\n", m["foreground"])
				}
			})
		},
	}
}

func newPtyReadCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from, max int64
	c := &cobra.Command{
		Use:   "read",
		Short: "Print spool bytes from --from (at most --max-bytes); the resume_cursor goes to stderr",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "read_spool", map[string]any{"from_cursor": from, "max_bytes": max}, func(m map[string]any) {
				fmt.Fprint(g.stdout, m["data"])
				fmt.Fprintf(g.stderr, "resume_cursor %d\n", ptyNum(m["resume_cursor"]))
			})
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "cursor to read from")
	c.Flags().Int64Var(&max, "max-bytes", 65536, "most bytes to read")
	return c
}

func newPtyBlocksCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var since int64
	c := &cobra.Command{
		Use:   "blocks [BLOCK_ID]",
		Short: "List blocks after --since (block number), or print one block's output",
		Args:  cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return ptyShow(cmd, g, o, http.MethodGet, "blocks/"+url.PathEscape(args[0])+"/output?max_bytes=4194304", nil, func(m map[string]any) { fmt.Fprint(g.stdout, m["data"]) })
			}
			return ptyShow(cmd, g, o, http.MethodGet, "blocks?since="+strconv.FormatInt(since, 10), nil, func(m map[string]any) {
				bl, _ := m["blocks"].([]any)
				for _, x := range bl {
					b, _ := x.(map[string]any)
					code := "-"
					if b["exit_code"] != nil {
						code = strconv.FormatInt(ptyNum(b["exit_code"]), 10)
					}
					status, _ := b["status"].(string)
					if r, _ := b["reason"].(string); r != "" {
						status += " (" + r + ")"
					}
					fmt.Fprintf(g.stdout, "%4d  %-38v %-11s exit %-4s %v\n", ptyNum(b["seq"]), b["block_id"], status, code, b["cmd"])
				}
			})
		},
	}
	c.Flags().Int64Var(&since, "since", 0, "list blocks numbered after this")
	return c
}

func newPtySearchCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var block string
	c := &cobra.Command{
		Use:   "search QUERY",
		Short: "Lines of the spool (or of --block's output) containing QUERY",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"q": {args[0]}}
			if block != "" {
				q.Set("block_id", block)
			}
			return ptyShow(cmd, g, o, http.MethodGet, "search?"+q.Encode(), nil, func(m map[string]any) {
				hits, _ := m["matches"].([]any)
				for _, x := range hits {
					h, _ := x.(map[string]any)
					fmt.Fprintf(g.stdout, "%d\t%v\t%v\n", ptyNum(h["match_cursor"]), h["block_id"], h["line"])
				}
			})
		},
	}
	c.Flags().StringVar(&block, "block", "", "search only this block's output")
	return c
}

func newPtyResetCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "reset",
		Short: "Kill the shell and its processes and start a new one (spool and blocks stay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "reset", map[string]any{"reason": reason}, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "new shell %v (was %v), resume_cursor %d\n", m["shell_id"], m["old_shell_id"], ptyNum(m["resume_cursor"]))
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "reset", "reason recorded in pty.session.reset")
	return c
}

func newPtyEndCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var graceMs int64
	c := &cobra.Command{
		Use:   "end",
		Short: "End the running session or block: Ctrl+C, then SIGKILL, then reset",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "end_session", map[string]any{"grace_ms": graceMs}, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "mode %v ended=%v forced=%v reset=%v\n", m["mode"], m["ended"], m["forced"], m["reset"])
			})
		},
	}
	c.Flags().Int64Var(&graceMs, "grace-ms", 2000, "how long to wait after each step")
	return c
}
