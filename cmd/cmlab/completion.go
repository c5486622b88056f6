package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cmlab/cmlab/events"
	"github.com/spf13/cobra"
)

// Dynamic completion of ids (cobra's ValidArgsFunction): read from the
// home's projected views, never by opening the engine — a completion must
// not create, repair or lock a home. Install it with
// 'cmlab completion bash|zsh|fish' (cobra's own command).

type completeFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// viewIDs lists the distinct values of key in a JSONL view file of the
// home, in file order.
func viewIDs(g *globalOpts, file func(h homeFiles) string, key string) []string {
	h, err := g.Home()
	if err != nil {
		return nil
	}
	return viewValues(file(homeFiles{h.RunsFile(), h.ExperimentsFile(), h.StepsFile()}), func(line []byte) string {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			return ""
		}
		v, _ := m[key].(string)
		return v
	})
}

// viewValues lists the distinct non-empty values that value takes from
// the lines of the JSONL view file at path, in file order (none when the
// file cannot be read).
func viewValues(path string, value func(line []byte) string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if v := value(sc.Bytes()); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// completeSteps completes the step ids of the mandate in args[0].
func completeSteps(g *globalOpts) completeFunc {
	return func(c *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		h, err := g.Home()
		if err != nil || len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		steps := viewValues(h.StepsFile(), func(line []byte) string {
			var r struct {
				Mandate string `json:"mandate_id"`
				Step    string `json:"step_id"`
			}
			if json.Unmarshal(line, &r) != nil || r.Mandate != args[0] {
				return ""
			}
			return r.Step
		})
		return completeFrom(func() []string { return steps })(c, args, prefix)
	}
}

// homeFiles are the views completion reads.
type homeFiles struct{ runs, experiments, steps string }

func completeFrom(ids func() []string) completeFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, id := range ids() {
			if strings.HasPrefix(id, prefix) {
				out = append(out, id)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeRuns completes run ids (lab/runs.jsonl).
func completeRuns(g *globalOpts) completeFunc {
	return completeFrom(func() []string { return viewIDs(g, func(f homeFiles) string { return f.runs }, "runId") })
}

// completeExperiments completes experiment ids (lab/experiments.jsonl).
func completeExperiments(g *globalOpts) completeFunc {
	return completeFrom(func() []string { return viewIDs(g, func(f homeFiles) string { return f.experiments }, "experimentId") })
}

// completeMandates completes mandate ids (steps/steps.jsonl).
func completeMandates(g *globalOpts) completeFunc {
	return completeFrom(func() []string { return viewIDs(g, func(f homeFiles) string { return f.steps }, "mandate_id") })
}

// completeEventTypes completes event type names.
func completeEventTypes() completeFunc {
	return completeFrom(events.Types)
}

// completeConversations completes conversation ids: the directories under
// pty/ of the home.
func completeConversations(g *globalOpts) completeFunc {
	return completeFrom(func() []string { return homeDirNames(g, "pty") })
}

// homeDirNames lists the names of the directories in the home's directory
// at path (relative to the home), sorted; none when it cannot be read.
func homeDirNames(g *globalOpts, path string) []string {
	h, err := g.Home()
	if err != nil {
		return nil
	}
	des, err := os.ReadDir(filepath.Join(h.Dir, path))
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		if de.IsDir() {
			out = append(out, de.Name())
		}
	}
	sort.Strings(out)
	return out
}

// completeBlocks completes the block ids of the conversation -c names,
// newest first, asking the running daemon (the terminal lives there).
func completeBlocks(g *globalOpts, o *ptyOpts) completeFunc {
	return completeFrom(func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, closeFn, err := ptyClient(ctx, g)
		if err != nil {
			return nil
		}
		defer closeFn()
		var r struct {
			Blocks []ptyBlockRec `json:"blocks"`
		}
		if c.Do(ctx, http.MethodGet, ptyPath(o, "blocks"), "", nil, &r) != nil {
			return nil
		}
		out := make([]string, 0, len(r.Blocks))
		for i := len(r.Blocks) - 1; i >= 0; i-- {
			out = append(out, r.Blocks[i].BlockID)
		}
		return out
	})
}
