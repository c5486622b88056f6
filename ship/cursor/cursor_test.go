package cursor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/home"
)

// TestDamagedCursorNamesItsFix: a state/ship.json that is cut or not JSON
// is refused (compaction cannot know what the stream holds, the shipper
// where to go on) and the error names the fix. The damage matrix found
// 'cmlab compact' exiting 1 with the JSON error alone
// (ship-cursor/truncate and symlink-wal × compact); 'cmlab ship' did too.
func TestDamagedCursorNamesItsFix(t *testing.T) {
	for _, bad := range []string{`{"home_id":"x","shipped_se`, "\xfb\x00garbage"} {
		h := home.Home{Dir: t.TempDir()}
		if err := os.MkdirAll(h.StateDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.StateDir(), "ship.json"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Read(h)
		if err == nil || os.IsNotExist(err) || !strings.Contains(err.Error(), "state/ship.json") ||
			!strings.Contains(err.Error(), "cmlab ship --nats URL") || !strings.Contains(err.Error(), "before compacting") {
			t.Fatalf("Read of %q: %v", bad, err)
		}
	}
}
