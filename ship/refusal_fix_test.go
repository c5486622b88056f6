package ship

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// TestShipRefusalsNameTheirFix: what makes 'cmlab ship' refuse to start —
// a ship key that is no key, a home id that is no id, a cursor of another
// home (or a home id that changed under its cursor) — is named with the
// command or file that fixes it. The damage matrix found each exiting 1
// with the error alone (ship-key, home-id, ship-cursor × flip, truncate,
// foreign, … × ship).
func TestShipRefusalsNameTheirFix(t *testing.T) {
	shipped := func(t *testing.T) home.Home {
		h := home.Home{Dir: t.TempDir()}
		s, err := New(Options{Home: h, Conn: Conn{URL: "nats://127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.update(func(st *State) { st.Shipped, st.LastSeq = 3, 3 }); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		damage func(h home.Home) error
		want   []string
	}{
		{"key cut", func(h home.Home) error { return os.Truncate(KeyFile(h), 10) }, []string{"ship-key", "archive"}},
		{"home id not an id", func(h home.Home) error {
			return os.WriteFile(filepath.Join(h.StateDir(), "home-id"), []byte("\xfb\n"), 0o600)
		}, []string{"state/home-id", "state/ship.json"}},
		{"home id changed", func(h home.Home) error {
			return os.WriteFile(filepath.Join(h.StateDir(), "home-id"), []byte("01a2530d-4b36-71fe-9725-e1223e1575ec\n"), 0o600)
		}, []string{"state/home-id", "state/ship.json", "cmlab ship"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := shipped(t)
			if err := tc.damage(h); err != nil {
				t.Fatal(err)
			}
			_, err := New(Options{Home: h, Conn: Conn{URL: "nats://127.0.0.1:1"}})
			if err == nil || !strings.Contains(err.Error(), "fix: ") {
				t.Fatalf("New: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not name %q: %v", w, err)
				}
			}
		})
	}
}

// TestShipLostHomeIDWritesNothing: a home whose state/home-id is gone
// while its cursor names the id it shipped under is refused before
// anything is written: New once made a new id first, then refused on the
// cursor, and the fix then had to overwrite the id it had just made.
func TestShipLostHomeIDWritesNothing(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	s, err := New(Options{Home: h, Conn: Conn{URL: "nats://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.update(func(st *State) { st.Shipped, st.LastSeq = 3, 3 }); err != nil {
		t.Fatal(err)
	}
	id, err := home.ReadHomeID(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h.HomeIDFile()); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Home: h, Conn: Conn{URL: "nats://127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "fix: ") {
		t.Fatalf("New with state/home-id gone: %v; want a refusal naming %s and the fix", err, id)
	}
	if _, err := os.Stat(h.HomeIDFile()); !os.IsNotExist(err) {
		t.Fatalf("state/home-id after the refusal: %v (a new id was written)", err)
	}
}
