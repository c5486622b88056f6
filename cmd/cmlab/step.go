package main

import (
	"encoding/json"
	"fmt"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cmlab/cmlab/steps"
)

// newStepCmd builds 'cmlab step plan|start|complete|fail|review|reset|list':
// the durable step journal for other programs (SPEC §8), through the
// daemon's steps API.
func newStepCmd(g *globalOpts) *cobra.Command {
	return commandGroup(&cobra.Command{
		Use:   "step",
		Short: "Record durable step transitions (a step journal for other programs)",
		Long: `Use cmlab as the durable step journal of another program: commit a plan,
then move each step pending → executing → completed | failed | needs_review.
After a crash 'cmlab recover' classifies every step from these records.
Hashes are "sha256-" + 64 hex digits; --world PATH (repeatable, with --dir)
computes a world hash from files instead of passing one. Each command takes
--request-id to make a retry safe.`,
	}, newStepPlanCmd(g), newStepStartCmd(g), newStepCompleteCmd(g),
		newStepFailCmd(g), newStepReviewCmd(g), newStepResetCmd(g), newStepListCmd(g), newStepApproveCmd(g), newStepShowCmd(g))
}

// stepPost sends one transition and prints the answer.
func stepPost(cmd *cobra.Command, g *globalOpts, mandate, tr, reqID string, body any) error {
	ctx := cmd.Context()
	var out json.RawMessage
	if err := labCall(ctx, g, http.MethodPost, "/api/steps/"+url.PathEscape(mandate)+"/"+tr, reqID, body, &out); err != nil {
		return err
	}
	if g.json {
		return labPrintJSON(g, out)
	}
	var r steps.TransitionResponse
	json.Unmarshal(out, &r)
	line := r.MandateID
	if r.StepID != "" {
		line += "/" + r.StepID
	}
	line += ": " + r.Status
	if r.IdemKey != "" {
		line += " (idem_key " + r.IdemKey + ")"
	}
	_, err := fmt.Fprintln(g.stdout, line)
	return err
}

// stepRequestIDFlag adds the --request-id every transition takes.
func stepRequestIDFlag(c *cobra.Command, reqID *string) {
	c.Flags().StringVar(reqID, "request-id", "", "request id (a retry with the same id appends nothing)")
}

// worldFlags computes a hash from --world/--dir when given, else uses hash.
type worldFlags struct {
	paths []string
	dir   string
}

func (w *worldFlags) add(c *cobra.Command) {
	c.Flags().StringArrayVar(&w.paths, "world", nil, "a world path to hash instead of passing the hash (repeatable)")
	c.Flags().StringVar(&w.dir, "dir", "", "directory relative --world paths resolve against (default: working directory)")
}

func (w *worldFlags) hash(given, flag string) (string, error) {
	if len(w.paths) == 0 {
		if given == "" {
			return "", nil // the caller falls back to the planned world (plannedWorldHash)
		}
		return given, nil
	}
	if given != "" {
		return "", &usageError{"give either --" + flag + " or --world, not both"}
	}
	dir := w.dir
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return steps.WorldHash(abs, w.paths)
}

// worldHashOrPlanned is the --FLAG hash, the hash of --world paths, or, when
// neither is given, the hash of the world the step's plan declares (its
// paths under its dir), computed now on this machine: the person settling
// a step by hand does not have the hash, but the plan says what to hash.
func worldHashOrPlanned(cmd *cobra.Command, g *globalOpts, w *worldFlags, given, flag, mandate, step string) (string, error) {
	h, err := w.hash(given, flag)
	if err != nil || h != "" {
		return h, err
	}
	var out struct {
		Mandate *steps.MandateState `json:"mandate"`
	}
	if err := labCall(cmd.Context(), g, http.MethodGet, "/api/steps?mandateId="+url.QueryEscape(mandate), "", nil, &out); err != nil {
		return "", err
	}
	var st *steps.StepState
	if out.Mandate != nil {
		for _, s := range out.Mandate.Steps {
			if s.StepID == step {
				st = s
			}
		}
	}
	if st == nil {
		return "", fmt.Errorf("mandate %s has no step %s: see `cmlab step list %s`", mandate, step, mandate)
	}
	if len(st.World) == 0 {
		return "", &usageError{"step " + step + "'s plan declares no world paths, so its world hash cannot be computed: give --" + flag + " HASH or --world PATH"}
	}
	return st.CurrentWorldHash()
}

func newStepPlanCmd(g *globalOpts) *cobra.Command {
	var reqID string
	c := &cobra.Command{
		Use:   "plan MANDATE_ID PLAN.json",
		Short: "Commit a mandate's plan (step.planned); PLAN.json is {name?, steps:[…]} or - for stdin",
		Long: `Commit the plan of MANDATE_ID. PLAN.json (or - for stdin) is
  {"name": "…", "steps": [{"step_id": "a", "tool": "sh", "params_hash": "sha256-…",
    "pre_hash": "sha256-…", "expected_post_hash": "sha256-…", "idem_key": "…",
    "world": ["out.txt"], "dir": "/abs/dir"}]}
idem_key defaults to one derived from mandate, step and params_hash.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			var err error
			if args[1] == "-" {
				b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20+1))
			} else {
				b, err = os.ReadFile(args[1])
			}
			if err != nil {
				return err
			}
			if !json.Valid(b) {
				return fmt.Errorf("%s is not valid JSON", args[1])
			}
			return stepPost(cmd, g, args[0], "plan", reqID, json.RawMessage(b))
		},
	}
	stepRequestIDFlag(c, &reqID)
	return c
}

func newStepStartCmd(g *globalOpts) *cobra.Command {
	var reqID, pre string
	var w worldFlags
	c := &cobra.Command{
		Use:   "start MANDATE_ID STEP_ID",
		Short: "Record that a step is executing (step.executing with observed_pre_hash)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := worldHashOrPlanned(cmd, g, &w, pre, "observed-pre", args[0], args[1])
			if err != nil {
				return err
			}
			return stepPost(cmd, g, args[0], "executing", reqID, map[string]any{"step_id": args[1], "observed_pre_hash": h})
		},
	}
	c.Flags().StringVar(&pre, "observed-pre", "", "world hash observed before the side effect (default: hash the world the plan declares, now)")
	stepRequestIDFlag(c, &reqID)
	w.add(c)
	return c
}

func newStepCompleteCmd(g *globalOpts) *cobra.Command {
	var reqID, post, result, digest, output string
	var exit int
	var w worldFlags
	c := &cobra.Command{
		Use:   "complete MANDATE_ID STEP_ID",
		Short: "Record a finished step (step.completed with post_hash and result_hash)",
		Long: `Record that a step finished. The post hash defaults to the hash of the world
the step's plan declares, computed now (give --post or --world to override).
The result hash is derived from --exit-code and the step's output: pass the
output as a file with --output FILE (- for stdin), or its digest with
--output-digest; or give --result HASH directly.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && digest != "" {
				return &usageError{"give either --output or --output-digest, not both"}
			}
			if output != "" {
				b, err := readOutputArg(output)
				if err != nil {
					return err
				}
				digest = steps.HashBytes(b)
			}
			if result == "" && !(cmd.Flags().Changed("exit-code") && digest != "") {
				return &usageError{"cmlab cannot know the step's result: give --exit-code N with --output FILE (or --output-digest HASH), or --result HASH"}
			}
			h, err := worldHashOrPlanned(cmd, g, &w, post, "post", args[0], args[1])
			if err != nil {
				return err
			}
			body := map[string]any{"step_id": args[1], "post_hash": h}
			if cmd.Flags().Changed("exit-code") {
				body["exit_code"] = exit
			}
			if digest != "" {
				body["output_digest"] = digest
			}
			if result == "" {
				result = steps.ResultHash(exit, digest)
			}
			body["result_hash"] = result
			return stepPost(cmd, g, args[0], "completed", reqID, body)
		},
	}
	c.Flags().StringVar(&post, "post", "", "world hash after the step (default: hash the world the plan declares, now)")
	c.Flags().StringVar(&result, "result", "", "result hash")
	c.Flags().IntVar(&exit, "exit-code", 0, "exit code of the step")
	c.Flags().StringVar(&digest, "output-digest", "", "sha256- digest of the step's output")
	c.Flags().StringVar(&output, "output", "", "a file holding the step's output (- for stdin); its digest is computed")
	stepRequestIDFlag(c, &reqID)
	w.add(c)
	return c
}

// readOutputArg reads the file named by --output, or stdin for "-".
func readOutputArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	return b, nil
}

func newStepFailCmd(g *globalOpts) *cobra.Command {
	var reqID, class, msg string
	var exit int
	c := &cobra.Command{
		Use:   "fail MANDATE_ID STEP_ID",
		Short: "Record a failed step (step.failed; the message is cut to 500 characters)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"step_id": args[1], "error_class": class, "error_msg": msg}
			if cmd.Flags().Changed("exit-code") {
				body["exit_code"] = exit
			}
			return stepPost(cmd, g, args[0], "failed", reqID, body)
		},
	}
	c.Flags().StringVar(&class, "class", "", "error class (required)")
	c.Flags().StringVar(&msg, "msg", "", "error message")
	c.Flags().IntVar(&exit, "exit-code", 0, "exit code of the step")
	stepRequestIDFlag(c, &reqID)
	return c
}

func newStepReviewCmd(g *globalOpts) *cobra.Command {
	return newStepReasonCmd(g, "review", "Park a step for a human (step.needs_review; its mandate is paused)",
		"", "why the step needs review (required)")
}

func newStepResetCmd(g *globalOpts) *cobra.Command {
	return newStepReasonCmd(g, "reset", "Move an executing, failed or in-review step back to pending (same idem_key)",
		"operator", "why")
}

// newStepReasonCmd builds 'cmlab step TR MANDATE_ID STEP_ID --reason R': a
// transition whose body is the step and a reason (review, reset).
func newStepReasonCmd(g *globalOpts, tr, short, reasonDefault, reasonUsage string) *cobra.Command {
	var reqID, reason string
	c := &cobra.Command{
		Use:   tr + " MANDATE_ID STEP_ID",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return stepPost(cmd, g, args[0], tr, reqID, map[string]any{"step_id": args[1], "reason": reason})
		},
	}
	c.Flags().StringVar(&reason, "reason", reasonDefault, reasonUsage)
	stepRequestIDFlag(c, &reqID)
	return c
}

func newStepListCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list [MANDATE_ID]",
		Short: "Show mandates and their steps",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var ms []*steps.MandateState
			if len(args) == 1 {
				var out struct {
					Mandate *steps.MandateState `json:"mandate"`
				}
				done, err := readLocal(g, func(h home.Home) (any, error) { return labapi.ReadStepsList(h, args[0]) }, &out)
				if !done {
					err = labCall(ctx, g, http.MethodGet, "/api/steps?mandateId="+url.QueryEscape(args[0]), "", nil, &out)
				}
				if err != nil {
					return err
				}
				ms = append(ms, out.Mandate)
			} else {
				var out struct {
					Mandates []*steps.MandateState `json:"mandates"`
				}
				done, err := readLocal(g, func(h home.Home) (any, error) { return labapi.ReadStepsList(h, "") }, &out)
				if !done {
					err = labCall(ctx, g, http.MethodGet, "/api/steps", "", nil, &out)
				}
				if err != nil {
					return err
				}
				ms = out.Mandates
			}
			if g.json {
				return labPrintJSON(g, ms)
			}
			for _, m := range ms {
				fmt.Fprintf(g.stdout, "%s  %s\n", m.MandateID, m.Status)
				for _, s := range m.Steps {
					fmt.Fprintf(g.stdout, "  %-20s %-13s %s\n", s.StepID, s.Status, s.IdemKey)
				}
			}
			return nil
		},
	}
}
