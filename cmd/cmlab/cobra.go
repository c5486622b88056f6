package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// finishTree gives every command of the tree the habits of gh and kubectl
// in one place, so no command can forget them:
//
//   - a command that only groups others ('cmlab runs') prints its help when
//     called bare and, called with a word that is not one of its commands
//     ('cmlab runs imports'), exits 2 with "unknown command … Did you mean";
//   - every command has an Example (commandExamples fills those that do not
//     set their own);
//   - id arguments and flags complete dynamically (completion.go).
func finishTree(root *cobra.Command, g *globalOpts) {
	byFlag := map[string]completeFunc{
		"baseline": completeRuns(g), "run": completeRuns(g), "task-review": completeRuns(g),
		"experiment": completeExperiments(g), "task-compare": completeExperiments(g),
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRunE
		}
		if c.Example == "" {
			c.Example = commandExamples[c.CommandPath()]
		}
		if c.ValidArgsFunction == nil {
			c.ValidArgsFunction = argCompletion(g, c.CommandPath())
		}
		if g.completing {
			// LocalNonPersistentFlags builds a new flag set at every
			// call: once per command, and only when the shell asks
			// for completions (a third of the tree's set-up otherwise).
			local := c.LocalNonPersistentFlags()
			if f := local.Lookup("type"); f != nil && strings.Contains(f.Usage, "event type") {
				c.RegisterFlagCompletionFunc("type", completeEventTypes())
			}
			for name, fn := range byFlag {
				if local.Lookup(name) != nil {
					c.RegisterFlagCompletionFunc(name, fn)
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// commandGroup returns c, a command that only groups others, with subs
// under it; finishTree gives it its help when called bare and its
// "unknown command" error.
func commandGroup(c *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	c.AddCommand(subs...)
	return c
}

// groupRunE is the RunE of a command that only groups subcommands.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return &usageError{msg} // printError adds the fix: run 'PATH --help'
}

// argCompletion completes the id arguments of the command at path.
func argCompletion(g *globalOpts, path string) completeFunc {
	switch path {
	case "cmlab experiments get", "cmlab experiments submit":
		return firstArg(completeExperiments(g))
	case "cmlab step plan", "cmlab step list", "cmlab replay steps", "cmlab run cancel":
		return firstArg(completeMandates(g))
	case "cmlab step start", "cmlab step complete", "cmlab step fail", "cmlab step review", "cmlab step reset", "cmlab step show":
		mandates, steps := completeMandates(g), completeSteps(g)
		return func(c *cobra.Command, args []string, p string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return mandates(c, args, p)
			case 1:
				return steps(c, args, p)
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	case "cmlab replay pty":
		return firstArg(completeConversations(g))
	case "cmlab trace":
		runs, exps := completeRuns(g), completeExperiments(g)
		return firstArg(func(c *cobra.Command, args []string, p string) ([]string, cobra.ShellCompDirective) {
			a, _ := runs(c, args, p)
			b, d := exps(c, args, p)
			return append(a, b...), d
		})
	}
	return nil
}

// firstArg limits a completion to the first argument.
func firstArg(f completeFunc) completeFunc {
	return func(c *cobra.Command, args []string, p string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(c, args, p)
	}
}

// commandExamples are the Examples of the commands that do not set one
// where they are built.
var commandExamples = map[string]string{
	"cmlab": `  cmlab serve &                         # the daemon for ~/.cm (or --home DIR)
  cmlab status
  cmlab runs import output/run1 && cmlab runs list
  cmlab pty exec 'make test'
  cmlab recover                         # what a crash left, and what recovery would do`,
	"cmlab status": `  cmlab status
  cmlab status --home ./lab --json`,
	"cmlab version": `  cmlab version
  cmlab --version`,
	"cmlab stop": `  cmlab stop
  cmlab stop --home ./lab --timeout 1m`,
	"cmlab logs": `  cmlab logs
  cmlab logs -f`,
	"cmlab bench": `  cmlab bench wal --appenders 1,64     # runs cmlab-bench wal --appenders 1,64
  cmlab bench api --json`,
	"cmlab experiments": `  cmlab experiments create --baseline run_a --variant B=run_b
  cmlab experiments list`,
	"cmlab experiments get": `  cmlab experiments get exp_0194…
  cmlab experiments get exp_0194… --json`,
	"cmlab experiments list": `  cmlab experiments list
  cmlab experiments list --json`,
	"cmlab experiments submit": `  cmlab experiments submit exp_0194… --body answers.json
  echo '{…}' | cmlab experiments submit exp_0194… --body -`,
	"cmlab export": `  cmlab export --session lab_0194…
  cmlab export --session lab_0194… --path - | jq .`,
	"cmlab feedback": `  cmlab feedback add --run run_0194… --rating overall=80 --notes 'good pacing'
  cmlab feedback poll --since 0 --json`,
	"cmlab pty blocks": `  cmlab pty blocks
  cmlab pty blocks --since 10
  cmlab pty blocks blk_0194…            # one block's output`,
	"cmlab pty interactive": `  cmlab pty interactive python3          # prints its resume_cursor, say 1234
  cmlab pty wait '>>> ' --from 1234 && cmlab pty send 'print(1)\n'`,
	"cmlab pty read": `  cmlab pty read --from 0
  cmlab pty read --from 4096 --max-bytes 1024`,
	"cmlab pty reset": `  cmlab pty reset --reason 'stuck prompt'`,
	"cmlab pty search": `  cmlab pty search 'FAIL'
  cmlab pty search error --block blk_0194…`,
	"cmlab pty send": `  cmlab pty send 'yes\n'
  cmlab pty send '\x03'                  # Ctrl+C`,
	"cmlab rebuild": `  cmlab rebuild --check
  cmlab rebuild --into /tmp/views`,
	"cmlab recover": `  cmlab recover                         # the plan, nothing changes
  cmlab recover --apply
  cmlab recover --salvage               # a corrupt log: what salvage would cut
  cmlab recover --salvage --apply`,
	"cmlab run": `  cmlab run mandate.json
  cmlab run mandate.json --json`,
	"cmlab run cancel": `  cmlab run cancel m1 --reason 'wrong inputs'`,
	"cmlab runs": `  cmlab runs import output/run1
  cmlab runs list`,
	"cmlab runs import": `  cmlab runs import output/run1          # resolved against your working directory
  cmlab runs import ~/renders/take2/video.mp4 --topic intro`,
	"cmlab runs list": `  cmlab runs list
  cmlab runs list --json`,
	"cmlab step": `  cmlab step plan m1 plan.json
  cmlab step start m1 s1 --world out/ && cmlab step complete m1 s1 --world out/ --exit-code 0 --output step.log`,
	"cmlab step complete": `  # settle a step in manual review: cmlab hashes the world its plan declares
  cmlab step complete m1 s1 --exit-code 0 --output step.log
  cmlab step complete m1 s1 --world out/ --exit-code 0 --output-digest sha256-…
  cmlab step complete m1 s1 --post sha256-… --result sha256-…`,
	"cmlab step fail": `  cmlab step fail m1 s1 --class timeout --msg 'no answer in 60s' --exit-code 124`,
	"cmlab step show": `  cmlab step show demo-mandate s2
  cmlab step show demo-mandate s2 --json`,
	"cmlab step list": `  cmlab step list
  cmlab step list m1 --json`,
	"cmlab step plan":   `  cmlab step plan m1 plan.json`,
	"cmlab step reset":  `  cmlab step reset m1 s1 --reason 'retry after fixing the disk'`,
	"cmlab step review": `  cmlab step review m1 s1 --reason 'side effect unknown'`,
	"cmlab step start":  `  cmlab step start m1 s1 --world out/`,
	"cmlab wal": `  cmlab wal verify
  cmlab wal dump --type 'pty.*' --follow`,
	"cmlab wal dump": `  cmlab wal dump --from 100 --to 200
  cmlab wal dump --type lab.feedback.added --json
  cmlab wal dump --follow`,
	"cmlab wal stat":   `  cmlab wal stat --json`,
	"cmlab wal verify": `  cmlab wal verify || cmlab recover --salvage`,
}
