package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
	"github.com/cmlab/cmlab/steps"
	"github.com/spf13/cobra"
)

// stepShowTail is how much of a step's captured output 'step show' prints
// (the end of it); the file keeps more.
const stepShowTail = 64 << 10

// newStepShowCmd builds 'cmlab step show MANDATE STEP': one step's state
// and the output its command wrote on its latest attempt.
func newStepShowCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "show MANDATE_ID STEP_ID",
		Short: "Show a step's state and the output its command wrote",
		Long: `Show one step: its status, hashes, process and exit, and the output its
command wrote on its latest attempt (stdout and stderr together, captured by
'cmlab run' in state/step-output/<mandate>/<step>.out; the last 64 KiB are
printed). That output is what a reviewer needs to settle a step a crash left
executing: did the side effect happen as planned ('cmlab step approve M S'),
or not ('cmlab step fail' or 'cmlab step reset')?`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			mid, sid := args[0], args[1]
			var out struct {
				Mandate *steps.MandateState `json:"mandate"`
			}
			done, err := readLocal(g, func(h home.Home) (any, error) { return labapi.ReadStepsList(h, mid) }, &out)
			if !done {
				err = labCall(cmd.Context(), g, http.MethodGet, "/api/steps?mandateId="+url.QueryEscape(mid), "", nil, &out)
			}
			if err != nil {
				return err
			}
			var s *steps.StepState
			if out.Mandate != nil {
				s = out.Mandate.Step(sid)
			}
			if s == nil {
				return newCLIError(exitError, "NOT_FOUND", fmt.Sprintf("mandate %s has no step %s", mid, sid), "list its steps with 'cmlab step list "+mid+"'")
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			path := steps.OutputFile(h, mid, sid)
			output, size, outErr := home.ReadTail(path, stepShowTail)
			if g.json {
				return labPrintJSON(g, map[string]any{"step": s, "output": string(output), "outputBytes": size, "outputFile": path})
			}
			w := g.stdout
			fmt.Fprintf(w, "step:        %s/%s\n", mid, sid)
			fmt.Fprintf(w, "status:      %s\n", s.Status)
			for _, kv := range [][2]string{{"pre", s.PreHash}, {"expected", s.ExpectedPostHash}, {"observed", s.ObservedPreHash},
				{"post", s.PostHash}, {"result", s.ResultHash}, {"digest", s.OutputDigest}, {"error", s.ErrorClass + " " + s.ErrorMsg}, {"reason", s.Reason}} {
				if kv[1] != "" && kv[1] != " " {
					fmt.Fprintf(w, "%-12s %s\n", kv[0]+":", kv[1]) // aligned with "status:      "
				}
			}
			if s.ExitCode != nil {
				fmt.Fprintf(w, "exit code:   %d\n", *s.ExitCode)
			}
			if s.Pid != 0 {
				fmt.Fprintf(w, "process:     pid %d\n", s.Pid)
			}
			switch {
			case errors.Is(outErr, fs.ErrNotExist):
				fmt.Fprintf(w, "output:      none captured (%s; 'cmlab run' captures it)\n", h.Rel(path))
			case outErr != nil:
				fmt.Fprintf(w, "output:      unreadable: %v\n", outErr)
			default:
				from := ""
				if size > int64(len(output)) {
					from = fmt.Sprintf(", its last %d", len(output))
				}
				fmt.Fprintf(w, "output:      %d bytes in %s%s:\n", size, h.Rel(path), from)
				w.Write(output)
				if len(output) > 0 && output[len(output)-1] != '\n' {
					fmt.Fprintln(w)
				}
			}
			return nil
		},
	}
}
