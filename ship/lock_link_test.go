package ship

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// TestShipLockNeverThroughALink: state/ship.lock replaced by a link to a
// file elsewhere was opened (created) and locked through the link. It is
// refused, naming its fix, and neither the link nor its target changes.
func TestShipLockNeverThroughALink(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "not-created")
	link := filepath.Join(h.StateDir(), "ship.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockShipper(h)
	if err == nil {
		unlock()
		t.Fatal("took state/ship.lock through a link")
	}
	if !strings.Contains(err.Error(), "fix: ") {
		t.Fatalf("the refusal names no fix: %v", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the link's target was created: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
}
