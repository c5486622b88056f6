package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cmlab/cmlab/daemon"
	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"

	"github.com/cmlab/cmlab/labapi"
	"github.com/google/uuid"
)

// dialLab returns a Lab API client for the command's home: the running
// daemon when there is one, else an in-process server over the home.
func dialLab(ctx context.Context, g *globalOpts) (*labapi.Client, func() error, error) {
	h, err := g.existingHome()
	if err != nil {
		return nil, nil, err
	}
	if _, err := labapi.ReadDaemonInfo(h); errors.Is(err, labapi.ErrNoDaemon) {
		noteStaleDaemon(g.stderr, err)
	}
	guard := &inProcessWrites{g: g, h: h}
	c, closeFn, err := labapi.Dial(ctx, h, labapi.DialOptions{InProcess: func(ctx context.Context) (*labapi.Client, func() error, error) {
		dh, err := daemon.Open(ctx, daemon.Options{Home: h, OneShot: true})
		if err != nil {
			return nil, nil, err
		}
		noteAdopted(g.stderr, dh.Engine.Adopted()) // adopt.go
		return labapi.NewLocalClient(guard.wrap(dh.Server.Handler()), dh.OperatorToken), dh.Close, nil
	}})
	if err != nil {
		return nil, nil, err
	}
	return c, func() error { err := closeFn(); guard.notice(); return err }, nil
}

// noteStaleDaemon says on w, when err is a stale state/daemon.json, that
// no daemon runs and why (a daemon that died uncleanly left it): the
// command then works on the home itself, which the user should know.
func noteStaleDaemon(w io.Writer, err error) {
	var stale *labapi.StaleDaemonError
	if errors.As(err, &stale) {
		fmt.Fprintf(w, "cmlab: %v; working on the home in this process (fix: %s)\n", stale, stale.Fix())
	}
}

// labCall dials, sends one request and closes. reqID "" gets a fresh
// UUID for mutations so a retry by the transport cannot double-append.
func labCall(ctx context.Context, g *globalOpts, method, path, reqID string, in, out any) error {
	c, closeFn, err := dialLab(ctx, g)
	if err != nil {
		return err
	}
	defer closeFn()
	if reqID == "" && method != "GET" && method != "HEAD" {
		reqID = uuid.NewString()
	}
	return labErr(c.Do(ctx, method, path, reqID, in, out))
}

// labErr returns err as is: an *labapi.APIError is printed with its code
// and a fix in CLI terms by printError (errors.go).
func labErr(err error) error { return err }

// labPrintJSON writes v indented to the command's stdout (a json.RawMessage
// is re-indented).
func labPrintJSON(g *globalOpts, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var x any
		if err := json.Unmarshal(raw, &x); err == nil {
			v = x
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.stdout, string(b))
	return err
}

// readLocal answers a read of a home no daemon serves without opening it:
// read builds the route's JSON from the read models' snapshots and the log
// after them, or from a view file (labapi.ReadRunsList, ReadStepsList,
// ReadFeedbackPage), so no command replays the whole log. It returns false
// when a daemon runs, or the views are not known to be current: the caller
// then goes through labCall (the daemon, or the home opened in-process).
func readLocal(g *globalOpts, read func(h home.Home) (any, error), out any) (bool, error) {
	h, err := g.existingHome()
	if err != nil {
		return true, err
	}
	if _, err := labapi.ReadDaemonInfo(h); !errors.Is(err, labapi.ErrNoDaemon) {
		return false, nil
	}
	if h.CheckOwner() != nil {
		return false, nil // labCall refuses, naming the fix
	}
	if engine.WantsAdoption(h) {
		return false, nil // a content-machine home: the open adopts it first (adopt.go)
	}
	v, err := read(h)
	if errors.Is(err, labapi.ErrViewsNotCurrent) {
		return false, nil
	}
	if err != nil {
		return true, labErr(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return true, err
	}
	return true, json.Unmarshal(b, out)
}
