package daemon

import (
	"os"
	"path/filepath"

	"github.com/cmlab/cmlab/labapi"
)

// What the daemon exposes to local callers without the operator token
// (docs/security.md): its import roots and the Lab streams' share of the
// connection cap. The checks themselves are labapi's (peer.go,
// events_budget.go, exposure.go).

// labRoots are the import roots of a daemon: for callers whose uid is
// known, the working directory, its output/ and --allow-root (what
// content-machine allows); for callers whose uid is not (peer.go), only
// output/ and --allow-root, unless cwdForUnknown (serve
// --unknown-peer-cwd) gives them content-machine's defaults too.
func labRoots(extra []string, cwdForUnknown bool) (allowed, unknown []string) {
	allowed = labapi.DefaultAllowedRoots(extra)
	if cwdForUnknown {
		return allowed, allowed
	}
	if wd, err := os.Getwd(); err == nil {
		unknown = append(unknown, filepath.Join(wd, "output"))
	}
	return allowed, append(unknown, extra...)
}

// labStreamBudget is how many Lab-token event streams a daemon holds at
// once: asked (serve --lab-streams), else three quarters of the
// connection cap, so that a quarter always stays for the operator's
// console and for requests that end (the CLI has its own socket).
func labStreamBudget(asked, maxConns int) int {
	if asked > 0 {
		return min(asked, max(maxConns-1, 1))
	}
	return max(maxConns*3/4, 1)
}
