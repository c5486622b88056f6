package daemon

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/compact"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/labapi"
)

// TestStartStopSequence: Run builds and takes down a home in one order,
// the crash-safety order: recovery decides before anything listens; the
// session event and daemon.json come once the server is built; at
// shutdown serving stops first, and resumed mandates, the server, the
// terminals, the compaction and the verification log all stop before the
// engine closes (its final checkpoint), which is last.
func TestStartStopSequence(t *testing.T) {
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(ctx, Options{Home: h, Listen: "127.0.0.1:0",
		Compaction: &compact.Options{}, CompactEvery: time.Hour,
		Sidecar: func(ctx context.Context) error { <-ctx.Done(); return nil },
		Trace: func(step string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, step)
		},
		Ready: func(labapi.DaemonInfo) { cancel() }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// Open
		"open engine", "step journal", "start-up recovery", "retention model", "start compaction", "terminal manager", "http server",
		// Run
		"listen", "resume mandates", "session started", "serve http", "write daemon.json", "start sidecar", "ready", "verify after start",
		// shutdown
		"stop serving", "stop sidecar", "remove daemon.json",
		// Close
		"stop resumed mandates", "close http server", "close terminals", "stop compaction", "stop verification log", "close engine",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("sequence\n got: %s\nwant: %s", strings.Join(got, " → "), strings.Join(want, " → "))
	}
}

// TestOpenSequenceByRole: a read-only home starts no recovery, terminal,
// compaction or session; a one-shot home (a CLI command's) only the
// engine, the journal, the read models and the server.
func TestOpenSequenceByRole(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"one-shot", Options{OneShot: true, Compaction: &compact.Options{}},
			[]string{"open engine", "step journal", "retention model", "http server", "close http server", "close engine"}},
		{"agent", Options{Compaction: &compact.Options{}},
			[]string{"open engine", "step journal", "start-up recovery", "retention model", "start compaction", "terminal manager", "http server",
				"resume mandates", "session started", "verify after start",
				"stop resumed mandates", "close http server", "close terminals", "stop compaction", "stop verification log", "close engine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			o := tc.o
			o.Home = home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
			o.Trace = func(step string) { got = append(got, step) }
			dh, err := Open(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := dh.Start(context.Background(), "stdio"); err != nil {
				t.Fatal(err)
			}
			dh.Serving()
			if err := dh.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("sequence\n got: %s\nwant: %s", strings.Join(got, " → "), strings.Join(tc.want, " → "))
			}
		})
	}
	// Read-only: serve a home that exists.
	h := home.Home{Dir: filepath.Join(privateTempDir(t), "home")}
	dh, err := Open(context.Background(), Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	dh.Close()
	var got []string
	ro, err := Open(context.Background(), Options{Home: h, ReadOnly: true, Compaction: &compact.Options{}, Trace: func(s string) { got = append(got, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Start(context.Background(), "stdio"); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	want := []string{"open engine", "step journal", "retention model", "http server", "close http server", "stop verification log", "close engine"}
	if !slices.Equal(got, want) {
		t.Fatalf("read-only sequence\n got: %s\nwant: %s", strings.Join(got, " → "), strings.Join(want, " → "))
	}
}
