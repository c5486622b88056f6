package labapi

import (
	"context"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

// TestNewRequiresItsParts: New builds no journal or retention model of
// its own (the daemon's are the only ones); without them, or with a
// journal of another engine, it refuses and says which.
func TestNewRequiresItsParts(t *testing.T) {
	open := func() *engine.Engine {
		eng, err := engine.Open(context.Background(), engine.Options{Home: home.Home{Dir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	eng, other := open(), open()
	full := withReadModels(t, Options{Engine: eng, SessionID: "lab_t"})
	foreign, err := steps.NewJournal(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no engine", func(o *Options) { o.Engine = nil }, "Options.Engine is required"},
		{"no journal", func(o *Options) { o.Journal = nil }, "Options.Journal is required"},
		{"foreign journal", func(o *Options) { o.Journal = foreign }, "Options.Journal records on another engine"},
		{"no retention", func(o *Options) { o.Retention = nil }, "Options.Retention is required"},
	} {
		o := full
		tc.mod(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	srv, err := New(full)
	if err != nil {
		t.Fatalf("with its parts: %v", err)
	}
	srv.Close()
}
