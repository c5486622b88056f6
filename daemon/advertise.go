package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/cmlab/cmlab/discovery"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// advertiseDaemon is Run's hook: Advertise with hs serving the
// socket (its end reported on serveErr) within a connection cap of its
// own, as large as the TCP listener's (capped), and refused peers logged.
func advertiseDaemon(h home.Home, info labapi.DaemonInfo, hs *http.Server, capped *capListener, serveErr chan<- error, l *slog.Logger) (*labapi.Advertisement, error) {
	adv, err := labapi.Advertise(h, info, func(ln net.Listener) { go func() { serveErr <- hs.Serve(capped.Beside(ln)) }() }, func(c discovery.Cred) {
		l.Warn("refused a connection to the daemon socket: another user", "uid", c.UID, "pid", c.Pid)
	})
	if errors.Is(err, discovery.ErrLocked) {
		return nil, fmt.Errorf("a daemon already serves this home (%w): stop it first ('cmlab stop') or use its API", err)
	}
	return adv, err
}
