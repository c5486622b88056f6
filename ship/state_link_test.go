package ship

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// TestShipNeverWritesThroughALinkedState: a home whose state/ is a link to
// a directory elsewhere had its shipping files (home id, ship key, later
// the cursor) written through the link by 'cmlab ship' (the damage
// matrix's dir-state/symlink-elsewhere/ship: state/ship.json changed in
// the target). New refuses such a home, naming the fix, and the target
// keeps every entry.
func TestShipNeverWritesThroughALinkedState(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	target := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, h.StateDir()); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Home: h, Conn: Conn{URL: "nats://127.0.0.1:1"}})
	if !errors.Is(err, home.ErrLinkedDir) {
		t.Fatalf("New on a home whose state/ is a link: %v", err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}
