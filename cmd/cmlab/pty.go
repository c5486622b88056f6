package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/labapi"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// ptyOpts are the flags every 'cmlab pty' subcommand shares.
type ptyOpts struct {
	conv      string
	requestID string
	timeout   time.Duration
	timeoutMs int64 // deprecated spelling of --timeout
}

// waitTimeoutMs is the timeout of a wait, in the API's milliseconds.
func (o *ptyOpts) waitTimeoutMs() int64 {
	if o.timeoutMs > 0 {
		return o.timeoutMs
	}
	return o.timeout.Milliseconds()
}

// followTimeout is how long exec and follow wait for their block to end:
// until it ends (0) unless --timeout or --timeout-ms was given, as their
// default is not the waits' 30 s.
func (o *ptyOpts) followTimeout(cmd *cobra.Command) time.Duration {
	if cmd.Flags().Changed("timeout") || cmd.Flags().Changed("timeout-ms") {
		return time.Duration(o.waitTimeoutMs()) * time.Millisecond
	}
	return 0
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
--from of the next. Waits without --from start at the end of the spool, so
they never match output that was already there.`,
		Example: `  cmlab pty exec 'make test'          # stream the output, exit with its exit code
  cmlab pty exec -c build2 'ls' --timeout 10s
  cmlab pty interactive python3       # then: send, wait, prompt, end
  cmlab pty status                    # this conversation and the shell slots in use`,
	}
	pf := c.PersistentFlags()
	pf.StringVarP(&o.conv, "conversation", "c", "default", "conversation id")
	pf.StringVar(&o.requestID, "request-id", "", "request id for a safe retry (default: a fresh one)")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long waits wait (a Go duration: 500ms, 30s, 2m)")
	pf.Int64Var(&o.timeoutMs, "timeout-ms", 0, "how long waits wait, in ms")
	pf.MarkHidden("timeout-ms") // the old spelling; --timeout takes a duration
	c.RegisterFlagCompletionFunc("conversation", completeConversations(g))
	for _, mk := range []func(*globalOpts, *ptyOpts) *cobra.Command{
		newPtyExecCmd, newPtyFollowCmd, newPtyInterruptCmd, newPtyInteractiveCmd, newPtySendCmd, newPtyWaitCmd, newPtyPromptCmd,
		newPtyStatusCmd, newPtyReadCmd, newPtyBlocksCmd, newPtySearchCmd, newPtyResetCmd, newPtyEndCmd,
	} {
		c.AddCommand(mk(g, o))
	}
	return c
}

// ptyClient dials the running daemon; the terminal lives only there.
func ptyClient(ctx context.Context, g *globalOpts) (*labapi.Client, func() error, error) {
	h, err := g.Home()
	if err != nil {
		return nil, nil, err
	}
	// Ask daemon.json first: without a daemon, opening the home here would
	// only create or lock it for nothing.
	_, infoErr := labapi.ReadDaemonInfo(h)
	if infoErr != nil && !errors.Is(infoErr, labapi.ErrNoDaemon) {
		return nil, nil, infoErr
	}
	var c *labapi.Client
	closeFn := func() error { return nil }
	if infoErr == nil {
		if c, closeFn, err = dialLab(ctx, g); err != nil {
			return nil, nil, err
		}
	}
	if c == nil || !c.Remote {
		closeFn()
		why := ""
		var stale *labapi.StaleDaemonError
		if errors.As(infoErr, &stale) {
			why = "; state/daemon.json is stale: " + stale.Why
		}
		return nil, nil, newCLIError(exitError, "NO_DAEMON", "no daemon serves the home "+h.Dir+" (the terminal lives in the daemon)"+why,
			"start it with 'cmlab serve --home "+h.Dir+"', or point --home (or $CMLAB_HOME) at the home your daemon serves")
	}
	return c, closeFn, nil
}

// ptyPath is the API path of op on o's conversation.
func ptyPath(o *ptyOpts, op string) string {
	return "/api/pty/" + url.PathEscape(o.conv) + "/" + op
}

// ptyCall sends one terminal request to the daemon.
func ptyCall(ctx context.Context, g *globalOpts, o *ptyOpts, method, op string, in any, out any) error {
	c, closeFn, err := ptyClient(ctx, g)
	if err != nil {
		return err
	}
	defer closeFn()
	reqID := ""
	if method == http.MethodPost && o.requestID != "" {
		reqID = o.requestID
	}
	return labErr(c.Do(ctx, method, ptyPath(o, op), reqID, in, out))
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
	var noWait, shellCwd, rawOut bool
	c := &cobra.Command{
		Use:   "exec CMD",
		Short: "Run CMD as a block, stream its output and exit with its exit code",
		Long: `Run CMD as a block in the conversation's shell and stream its output as it
arrives. The CLI exits with the block's exit code, as ssh and kubectl exec
do (a block killed by Ctrl+C exits 130).

Ctrl+C is forwarded to the block (the shell's foreground program gets
SIGINT) and exec keeps streaming until the block ends; a third Ctrl+C
detaches, leaving the block running. Without --timeout exec waits until the
block ends; with it, a block still running at the timeout is left running,
exec says how to follow or interrupt it and exits 124.

The command runs in your current directory (where you type 'cmlab pty
exec'), or in --cwd; either way only this block runs there: the
conversation's shell keeps its own directory for later blocks (a 'cd' in
the command is undone after it). --shell-cwd runs the command in the
shell's directory instead, where an earlier 'cmlab pty exec --shell-cwd
"cd DIR"' left it.

The output is clean: the terminal's internal marker lines are not shown
(--raw shows the block's output bytes as they are).

With --json the output is not streamed: one JSON object {block, output,
resume_cursor} is printed when the block ends (resume_cursor: the spool
position before the command), and the exit code is the block's all the
same. --no-wait prints the block id, and its resume_cursor on stderr.`,
		Example: `  cmlab pty exec 'go test ./...'         # in this directory
  cmlab pty exec --cwd /tmp 'ls -l'
  cmlab pty exec --timeout 1m 'make' || echo "exit $?"
  cmlab pty exec --no-wait 'sleep 600'     # prints the block id; follow it later`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, closeFn, err := ptyClient(ctx, g)
			if err != nil {
				return err
			}
			defer closeFn()
			reqID := o.requestID
			if reqID == "" {
				reqID = uuid.NewString() // a transport retry must not run it twice
			}
			var res struct {
				BlockID      string `json:"block_id"`
				ResumeCursor int64  `json:"resume_cursor"`
			}
			dir, err := ptyCwd(cwd, shellCwd)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(ctx, http.MethodPost, ptyPath(o, "exec_block"), reqID, map[string]any{"cmd": args[0], "cwd": dir}, &raw); err != nil {
				var ae *labapi.APIError
				if errors.As(err, &ae) && ae.Code == labapi.CodeBusy {
					what, _, _ := strings.Cut(ae.Message, ";") // the rest names API routes
					return newCLIError(exitError, labapi.CodeBusy, fmt.Sprintf("the terminal of conversation %q is busy: %s", o.conv, what), cliFix(cmd.CommandPath(), ae.Code))
				}
				return labErr(err)
			}
			if err := json.Unmarshal(raw, &res); err != nil || res.BlockID == "" {
				return fmt.Errorf("the daemon answered exec without a block id: %s", raw)
			}
			if noWait {
				return ptyPrint(g, raw, func(m map[string]any) {
					fmt.Fprintln(g.stdout, m["block_id"])
					fmt.Fprintf(g.stderr, "resume_cursor %d\n", res.ResumeCursor)
				})
			}
			return ptyFollow(ctx, g, o, c, res.BlockID, 0, o.followTimeout(cmd), followOpts{raw: rawOut, cursor: res.ResumeCursor})
		},
	}
	c.Flags().StringVar(&cwd, "cwd", "", "directory to run this command in (default: your current directory); the shell's own directory does not change")
	c.Flags().BoolVar(&shellCwd, "shell-cwd", false, "run in the conversation shell's directory instead of yours")
	c.Flags().BoolVar(&noWait, "no-wait", false, "print the block id and return at once")
	c.Flags().BoolVar(&rawOut, "raw", false, "show the output's bytes as they are (internal lines included)")
	c.MarkFlagsMutuallyExclusive("cwd", "shell-cwd")
	return c
}

// ptyCwd is the directory a block runs in: --cwd, else the caller's
// current directory, else ("" with --shell-cwd) the shell's own.
func ptyCwd(cwd string, shellCwd bool) (string, error) {
	switch {
	case shellCwd:
		return "", nil
	case cwd != "":
		return filepath.Abs(cwd)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("your current directory: %w (pass --cwd DIR or --shell-cwd)", err)
	}
	return wd, nil
}

func newPtyFollowCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var offset int64
	var rawOut bool
	c := &cobra.Command{
		Use:   "follow BLOCK_ID",
		Short: "Stream a block's output from --offset until it ends; exit with its exit code",
		Long: `Print a block's output from --offset (0: all of it), then what it prints
until it ends, and exit with its exit code — what 'cmlab pty exec' does
after starting the block. Ctrl+C is forwarded as in exec. Without --timeout
follow waits until the block ends.`,
		Example: `  cmlab pty follow blk_0194…             # after exec --no-wait or an exec timeout
  cmlab pty follow -c build2 blk_0194… --offset 4096`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBlocks(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, closeFn, err := ptyClient(ctx, g)
			if err != nil {
				return err
			}
			defer closeFn()
			return ptyFollow(ctx, g, o, c, args[0], offset, o.followTimeout(cmd), followOpts{raw: rawOut, cursor: -1})
		},
	}
	c.Flags().Int64Var(&offset, "offset", 0, "byte offset into the block's output to start at")
	c.Flags().BoolVar(&rawOut, "raw", false, "show the output's bytes as they are (internal lines included)")
	return c
}

func newPtyInterruptCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "interrupt",
		Short: "Send Ctrl+C to the running block or session and return (the shell stays)",
		Example: `  cmlab pty interrupt
  cmlab pty interrupt -c build2 && cmlab pty prompt -c build2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "interrupt", map[string]any{}, func(m map[string]any) {
				if m["interrupted"] == true {
					fmt.Fprintf(g.stdout, "sent Ctrl+C to block %v, resume_cursor %d\n", m["block_id"], ptyNum(m["resume_cursor"]))
				} else {
					fmt.Fprintf(g.stdout, "nothing is running, resume_cursor %d\n", ptyNum(m["resume_cursor"]))
				}
			})
		},
	}
}

func newPtyInteractiveCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var cwd string
	var shellCwd bool
	c := &cobra.Command{
		Use:   "interactive CMD",
		Short: "Start CMD as an interactive session; prints session, block and resume_cursor",
		Long: `Start CMD as an interactive session you drive with send, wait and prompt;
it runs until it returns to the shell prompt. Like exec it runs in your
current directory (or --cwd, or with --shell-cwd the shell's).`,
		Example: `  cmlab pty interactive python3
  cmlab pty wait '>>> ' --from input
  cmlab pty send 'print(6*7)\n'
  cmlab pty wait '>>> ' --from input
  cmlab pty send 'exit()\n'
  cmlab pty prompt --from input`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := ptyCwd(cwd, shellCwd)
			if err != nil {
				return err
			}
			return ptyShow(cmd, g, o, http.MethodPost, "exec_interactive", map[string]any{"cmd": args[0], "cwd": dir}, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "session %v block %v resume_cursor %d\n", m["session_id"], m["block_id"], ptyNum(m["resume_cursor"]))
			})
		},
	}
	c.Flags().StringVar(&cwd, "cwd", "", "directory to run the program in (default: your current directory)")
	c.Flags().BoolVar(&shellCwd, "shell-cwd", false, "run in the conversation shell's directory instead of yours")
	c.MarkFlagsMutuallyExclusive("cwd", "shell-cwd")
	return c
}

func newPtySendCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var raw bool
	c := &cobra.Command{
		Use:   "send DATA",
		Short: `Type DATA into the terminal (escapes \r \n \t \x03 are decoded unless --raw)`,
		Long: `Type DATA into the terminal and print resume_cursor, the spool position
before it: 'cmlab pty wait MATCH --from input' (or --from that cursor) sees
the program's whole answer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data := args[0]
			if !raw {
				u, err := strconv.Unquote(`"` + strings.ReplaceAll(data, `"`, `\"`) + `"`)
				if err != nil {
					return &usageError{"DATA has a bad escape: " + err.Error()}
				}
				data = u
			}
			return ptyShow(cmd, g, o, http.MethodPost, "send", map[string]any{"data": data}, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "resume_cursor %d\n", ptyNum(m["resume_cursor"]))
			})
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
		ex, _ := m["extra"].(map[string]any)
		switch {
		case m["matched"] == true && ex != nil && m["match_text"] == "":
			// A prompt: its sentinel line is not shown.
			fmt.Fprintf(g.stdout, "prompt back (exit %v, cwd %v) at %d, resume_cursor %d\n", ex["exit"], ex["cwd"], ptyNum(m["match_cursor"]), ptyNum(m["resume_cursor"]))
		case m["matched"] == true:
			fmt.Fprintf(g.stdout, "matched %q at %d, resume_cursor %d\n", m["match_text"], ptyNum(m["match_cursor"]), ptyNum(m["resume_cursor"]))
		default:
			fmt.Fprintf(g.stdout, "timeout, resume_cursor %d (mode %v, foreground %v)\n", ptyNum(m["resume_cursor"]), m["mode"], m["foreground"])
		}
	}); err != nil {
		return err
	}
	if m["matched"] != true {
		return newCLIError(exitError, "TIMEOUT", fmt.Sprintf("no match within %s", time.Duration(o.waitTimeoutMs())*time.Millisecond),
			fmt.Sprintf("wait again with --from %d (the resume_cursor) and a longer --timeout", ptyNum(m["resume_cursor"])))
	}
	return nil
}

// fromFlag is --from of wait and prompt: a spool cursor; "input", the
// cursor before the conversation's last input (exec, interactive, send,
// interrupt: status's input_cursor), so the wait sees the whole answer to
// it; or unset for the end of the spool when the request arrives (the
// daemon's default when the body has no from_cursor).
func fromFlag(cmd *cobra.Command, g *globalOpts, o *ptyOpts, body map[string]any, from string) (map[string]any, error) {
	if !cmd.Flags().Changed("from") {
		return body, nil
	}
	if from == "input" {
		var st struct {
			InputCursor *int64 `json:"input_cursor"`
		}
		if err := ptyCall(cmd.Context(), g, o, http.MethodGet, "status", nil, &st); err != nil {
			return nil, err
		}
		if st.InputCursor == nil {
			return nil, newCLIError(exitError, "UNSUPPORTED", "this daemon does not report input_cursor", "upgrade the daemon, or pass --from with a cursor")
		}
		body["from_cursor"] = *st.InputCursor
		return body, nil
	}
	n, err := strconv.ParseInt(from, 10, 64)
	if err != nil || n < 0 {
		return nil, &usageError{"--from wants a cursor (a resume_cursor) or \"input\", not " + strconv.Quote(from)}
	}
	body["from_cursor"] = n
	return body, nil
}

func newPtyWaitCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from string
	var matchType string
	var rawOut bool
	c := &cobra.Command{
		Use:   "wait MATCH",
		Short: "Wait for MATCH in new output (or from --from): substring, regex or prompt",
		Long: `Wait until MATCH appears in the spool. Without --from the wait scans only
output that arrives after it starts (the end of the spool now), so old
output never matches. --from input scans from just before the last thing
typed into this conversation (interactive, send, exec, interrupt), so it
sees the whole answer to it however fast it came; --from N scans from the
resume_cursor N of an earlier call. Exits 1 on --timeout.`,
		Example: `  cmlab pty interactive python3
  cmlab pty wait '>>> ' --from input --timeout 10s
  cmlab pty wait '>>> ' --from 1234          # a resume_cursor printed earlier
  cmlab pty wait --match-type regex 'Guess a number.*' --from input`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			match := ""
			if len(args) == 1 {
				match = args[0]
			}
			if match == "" && matchType != "prompt" {
				return &usageError{msg: "pty wait needs MATCH, the text (or --match-type regex) to wait for; for the shell's prompt use 'cmlab pty prompt'"}
			}
			body, err := fromFlag(cmd, g, o, map[string]any{"match": match, "match_type": matchType, "timeout_ms": o.waitTimeoutMs(), "raw": rawOut}, from)
			if err != nil {
				return err
			}
			return ptyWait(cmd, g, o, "wait_for", body)
		},
	}
	c.Flags().StringVar(&from, "from", "", `where to scan from: a resume_cursor, or "input" (just before the last input); default: the end of the spool now`)
	c.Flags().BoolVar(&rawOut, "raw", false, "print a prompt match's sentinel line as it is")
	c.Flags().StringVar(&matchType, "match-type", "substring", "substring | regex | prompt")
	c.Flags().StringVar(&matchType, "type", "substring", "") // the old name: --type is an event type elsewhere
	c.Flags().MarkHidden("type")
	c.RegisterFlagCompletionFunc("match-type", cobra.FixedCompletions([]string{"substring", "regex", "prompt"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func newPtyPromptCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from string
	var rawOut bool
	c := &cobra.Command{
		Use:   "prompt",
		Short: "Wait for the shell's next prompt (from --from) and mode idle",
		Long: `Wait until the shell prints its prompt again and nothing runs: the running
command or interactive program has ended. A prompt older than the latest
command never counts. Without --from only a prompt printed after the wait
starts counts; --from input counts one printed since the last input (so a
program that exited at once is not missed). While an interactive program
runs, the prompt comes back only when it exits: prompt says so on stderr
(send it its exit command first, or end it with 'cmlab pty end').`,
		Example: `  cmlab pty send 'exit()\n' && cmlab pty prompt --from input --timeout 5s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := fromFlag(cmd, g, o, map[string]any{"timeout_ms": o.waitTimeoutMs(), "raw": rawOut}, from)
			if err != nil {
				return err
			}
			ptyPromptNote(cmd, g, o)
			return ptyWait(cmd, g, o, "wait_prompt", body)
		},
	}
	c.Flags().StringVar(&from, "from", "", `where to scan from: a resume_cursor, or "input" (just before the last input); default: the end of the spool now`)
	c.Flags().BoolVar(&rawOut, "raw", false, "print the prompt's sentinel line as it is")
	return c
}

// ptyPromptNote says on stderr what a prompt wait waits for when a command
// or an interactive program runs (a wait on python3 would otherwise look
// hung).
func ptyPromptNote(cmd *cobra.Command, g *globalOpts, o *ptyOpts) {
	var st struct {
		Mode       string `json:"mode"`
		Active     string `json:"active_block_id"`
		Foreground string `json:"foreground"`
	}
	if ptyCall(cmd.Context(), g, o, http.MethodGet, "status", nil, &st) != nil || st.Active == "" {
		return
	}
	what := "block " + st.Active
	if st.Foreground != "" {
		what = st.Foreground + " (" + what + ")"
	}
	conv := ""
	if o.conv != "default" {
		conv = " -c " + o.conv
	}
	if st.Mode == "interactive" {
		fmt.Fprintf(g.stderr, "cmlab: waiting for the interactive program %s to exit and the shell prompt to come back; "+
			"type its exit command with 'cmlab pty send%s', or end it with 'cmlab pty end%s'\n", what, conv, conv)
		return
	}
	fmt.Fprintf(g.stderr, "cmlab: waiting for %s to finish; 'cmlab pty interrupt%s' sends it Ctrl+C\n", what, conv)
}

func newPtyStatusCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Mode, active block/session, shell and resume_cursor; the shell slots in use",
		Long: `Print the conversation's mode, active block or session, shell and
resume_cursor, then the shell slots in use across all conversations (each
running shell takes one; 'cmlab pty end' frees one, and shells idle for the
daemon's --pty-idle are ended by it). With --json: the conversation's
status with the slots under "slots".`,
		Example: `  cmlab pty status
  cmlab pty status -c build2 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var conv, slots json.RawMessage
			if err := ptyCall(cmd.Context(), g, o, http.MethodGet, "status", nil, &conv); err != nil {
				return err
			}
			c, closeFn, err := ptyClient(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := c.Do(cmd.Context(), http.MethodGet, "/api/pty", "", nil, &slots); err != nil {
				return labErr(err)
			}
			if g.json {
				var m map[string]any
				if err := json.Unmarshal(conv, &m); err != nil {
					return err
				}
				m["slots"] = slots
				return labPrintJSON(g, m)
			}
			return ptyPrint(g, conv, func(m map[string]any) {
				fmt.Fprintf(g.stdout, "mode %v  resume_cursor %d  blocks %d  shell %v alive=%v\n", m["mode"], ptyNum(m["resume_cursor"]), ptyNum(m["blocks"]), m["shell_id"], m["shell_alive"])
				if line := ptyActiveLine(m); line != "" {
					fmt.Fprintln(g.stdout, line)
				}
				if m["foreground"] != nil {
					fmt.Fprintf(g.stdout, "foreground %v\n", m["foreground"])
				}
				fmt.Fprintf(g.stdout, "output caps: block %s, conversation %s, all conversations %s (%d bytes stored); dropped past them %d bytes",
					ptyCap(m["block_output_cap"]), ptyCap(m["conversation_output_cap"]), ptyCap(m["total_output_cap"]), ptyNum(m["total_stored_bytes"]), ptyNum(m["dropped_bytes"]))
				if m["active_block_id"] != nil {
					fmt.Fprintf(g.stdout, " (active block: %d bytes stored, %d dropped)", ptyNum(m["active_block_bytes"]), ptyNum(m["active_block_dropped_bytes"]))
				}
				fmt.Fprintln(g.stdout)
				var sl struct {
					MaxShells     int   `json:"max_shells"`
					IdleTimeoutMs int64 `json:"idle_timeout_ms"`
					Shells        []struct {
						Conv   string `json:"conversation_id"`
						Shell  string `json:"shell_id"`
						Pid    int    `json:"pid"`
						Mode   string `json:"mode"`
						IdleMs int64  `json:"idle_ms"`
					} `json:"shells"`
				}
				json.Unmarshal(slots, &sl)
				reap := "never"
				if sl.IdleTimeoutMs > 0 {
					reap = (time.Duration(sl.IdleTimeoutMs) * time.Millisecond).String()
				}
				fmt.Fprintf(g.stdout, "shell slots: %d of %d in use (idle shells ended after %s)\n", len(sl.Shells), sl.MaxShells, reap)
				for _, x := range sl.Shells {
					fmt.Fprintf(g.stdout, "  %-24s %-14s pid %-7d idle %s\n", x.Conv, x.Mode, x.Pid, (time.Duration(x.IdleMs) * time.Millisecond).Round(time.Second))
				}
			})
		},
	}
}

func newPtyReadCmd(g *globalOpts, o *ptyOpts) *cobra.Command {
	var from, max int64
	var rawOut bool
	c := &cobra.Command{
		Use:   "read",
		Short: "Print the terminal's output from --from (at most --max-bytes); the resume_cursor goes to stderr",
		Long: `Print the conversation's output from the spool cursor --from: clean, as a
transcript — the terminal's internal marker lines are not shown, what was
typed with send appears where it was typed. --max-bytes and the cursors
count spool bytes; --raw prints the spool's bytes as they are.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return ptyShow(cmd, g, o, http.MethodPost, "read_spool", map[string]any{"from_cursor": from, "max_bytes": max, "raw": rawOut}, func(m map[string]any) {
				fmt.Fprint(g.stdout, m["data"])
				fmt.Fprintf(g.stderr, "resume_cursor %d\n", ptyNum(m["resume_cursor"]))
			})
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "cursor to read from")
	c.Flags().Int64Var(&max, "max-bytes", 65536, "most bytes to read")
	c.Flags().BoolVar(&rawOut, "raw", false, "print the spool's bytes as they are (internal lines included)")
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
					fmt.Fprintln(g.stdout, ptyBlockLine(b))
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
	var grace time.Duration
	c := &cobra.Command{
		Use:   "end",
		Short: "End the conversation: its running block (Ctrl+C, then SIGKILL), then its shell",
		Long: `End the conversation: the running block or session first (Ctrl+C to the
foreground program; if the prompt does not come back within --grace,
SIGKILL; if still not, the shell goes with it), then the shell itself, which
frees its slot. The spool and the blocks stay; the next exec starts a new
shell.`,
		Example: `  cmlab pty end
  cmlab pty end -c build2 --grace 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ms := grace.Milliseconds()
			if graceMs > 0 {
				ms = graceMs
			}
			return ptyShow(cmd, g, o, http.MethodPost, "end_session", map[string]any{"grace_ms": ms}, func(m map[string]any) {
				fmt.Fprintln(g.stdout, ptyEndLine(m))
			})
		},
	}
	c.Flags().DurationVar(&grace, "grace", 2*time.Second, "how long to wait after each step")
	c.Flags().Int64Var(&graceMs, "grace-ms", 0, "how long to wait after each step, in ms")
	c.Flags().MarkHidden("grace-ms") // the old spelling; --grace takes a duration
	return c
}

// ptyCap prints an output cap of pty status (negative: none).
func ptyCap(v any) string {
	n := ptyNum(v)
	switch {
	case n < 0:
		return "none"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
