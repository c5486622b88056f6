package daemon

import (
	"context"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// Dial returns a client for home h: the running daemon when
// state/daemon.json names a live one (labapi.Dial), else a one-shot home
// opened in this process (Open with OneShot: engine with tail repair and
// catch-up, the step journal, the read models, the HTTP server) called
// in-process. closeFn releases what Dial opened; call it once the command
// is done. Opening the engine refuses a home that belongs to another user
// (home.Ensure): what it would write there would be this user's.
func Dial(ctx context.Context, h home.Home) (*labapi.Client, func() error, error) {
	return labapi.Dial(ctx, h, labapi.DialOptions{InProcess: func(ctx context.Context) (*labapi.Client, func() error, error) {
		dh, err := Open(ctx, Options{Home: h, OneShot: true})
		if err != nil {
			return nil, nil, err
		}
		return labapi.NewLocalClient(dh.Server.Handler(), dh.OperatorToken), dh.Close, nil
	}})
}
