package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/cmlab/cmlab/labapi"
)

// newOpenCmd builds 'cmlab open': a one-time login to the operator console
// of the running daemon.
func newOpenCmd(g *globalOpts) *cobra.Command {
	var noBrowser, revoke bool
	c := &cobra.Command{
		Use:   "open",
		Short: "Open the operator console in a browser (a one-time login link)",
		Long: `Ask the running daemon, with the operator token, for a one-time login code
and print the console's login URL (valid 60 s, once, for this daemon run).
A browser is started on it when one is available and --no-browser is not
given. The browser exchanges the code for a session cookie held in the
daemon's memory: it ends after 30 minutes without a request, when the daemon
exits, or with 'cmlab open --revoke', which ends every console session.
The operator token itself never leaves this machine's files.`,
		Example: `  cmlab open
  cmlab open --no-browser     # print the URL only (e.g. over ssh -L)
  cmlab open --revoke`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.existingHome()
			if err != nil {
				return err
			}
			if _, err := labapi.ReadDaemonInfo(h); errors.Is(err, labapi.ErrNoDaemon) {
				return fmt.Errorf("no daemon serves %s: the console is served by the daemon; start it with cmlab serve, then run cmlab open", h.Dir)
			} else if err != nil {
				return err
			}
			if revoke {
				var out struct {
					Ended int `json:"ended"`
				}
				if err := labCall(cmd.Context(), g, http.MethodPost, "/api/console/revoke", "", nil, &out); err != nil {
					return err
				}
				if g.json {
					return labPrintJSON(g, out)
				}
				_, err := fmt.Fprintf(g.stdout, "ended %d console session(s); outstanding login codes are void\n", out.Ended)
				return err
			}
			var login labapi.ConsoleLogin
			if err := labCall(cmd.Context(), g, http.MethodPost, "/api/console/login-code", "", nil, &login); err != nil {
				return err
			}
			if g.json {
				return labPrintJSON(g, login)
			}
			fmt.Fprintln(g.stdout, login.URL)
			fmt.Fprintf(g.stderr, "one-time login link, valid until %s\n", login.ExpiresAt)
			if !noBrowser {
				if err := startBrowser(login.URL); err != nil {
					fmt.Fprintf(g.stderr, "no browser started (%v): open the link above\n", err)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&noBrowser, "no-browser", false, "print the URL only")
	c.Flags().BoolVar(&revoke, "revoke", false, "end every console session of the daemon")
	return c
}

// startBrowser starts $BROWSER, else xdg-open, on url when a display is
// available; it does not wait for it.
func startBrowser(url string) error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" && os.Getenv("BROWSER") == "" {
		return errors.New("no display")
	}
	name := os.Getenv("BROWSER")
	if name == "" {
		p, err := exec.LookPath("xdg-open")
		if err != nil {
			return errors.New("neither $BROWSER nor xdg-open")
		}
		name = p
	}
	cmd := exec.Command(name, url)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it; the command exits right after
	return nil
}
