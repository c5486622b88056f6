package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/cmlab/cmlab/labapi"
	"github.com/spf13/cobra"
)

// versionString is what 'cmlab version' and 'cmlab --version' print: the
// API version, the module version and VCS revision the binary was built
// from (when the build recorded them) and the Go version.
func versionString() string {
	s := "cmlab " + labapi.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			s += " (module " + v + ")"
		}
		var rev, dirty string
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.modified":
				if st.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			s += " commit " + rev + dirty
		}
	}
	return s + " " + runtime.Version()
}

// addOperatorCmds adds the commands of the operator's day that are not
// about the log's content: version (and --version), stop, logs.
func addOperatorCmds(root *cobra.Command, g *globalOpts) {
	root.AddCommand(newStopCmd(g), newLogsCmd(g))
	root.Version = versionString()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version of this cmlab binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.json {
				return labPrintJSON(g, map[string]string{"version": labapi.Version, "build": versionString()})
			}
			_, err := fmt.Fprintln(g.stdout, versionString())
			return err
		},
	})
}
