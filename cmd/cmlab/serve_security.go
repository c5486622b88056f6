package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/labapi"
	"github.com/spf13/pflag"
)

// securityServeOpts are serve's flags about what local callers without
// the operator token may do (docs/security.md).
type securityServeOpts struct {
	unknownPeerCwd bool
	exportBudget   int64
	labStreams     int
}

func (o *securityServeOpts) flags(f *pflag.FlagSet) {
	f.BoolVar(&o.unknownPeerCwd, "unknown-peer-cwd", false, "let callers whose uid the kernel cannot tell (remote clients under --allow-remote) import from the working directory too, as content-machine does (default: its output/ and --allow-root only)")
	f.Int64Var(&o.exportBudget, "export-budget", labapi.DefaultExportBudget, "bytes lab/exports/ may hold; an export past it is refused with 507 until old exports are removed")
	f.IntVar(&o.labStreams, "lab-streams", 0, "Lab-token /api/events streams held at once; more are refused with 503 and Retry-After (0: three quarters of --max-conns)")
}

// apply copies the flags into the daemon's options.
func (o *securityServeOpts) apply(d *daemon.Options) {
	d.UnknownPeerCwd, d.ExportBudget, d.LabStreams = o.unknownPeerCwd, o.exportBudget, o.labStreams
}

// printRoots is serve's line about import roots.
func printRoots(w io.Writer, info labapi.DaemonInfo) {
	fmt.Fprintf(w, "  roots:  %s (imports; each caller is served only files it could read itself)\n", strings.Join(info.AllowedRoots, ", "))
	if strings.Join(info.UnknownPeerRoots, ",") != strings.Join(info.AllowedRoots, ",") {
		fmt.Fprintf(w, "          %s for callers of unknown uid (--unknown-peer-cwd adds the working directory)\n", orNone(info.UnknownPeerRoots))
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
