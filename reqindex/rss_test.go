package reqindex

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// rssFileKiB is RssFile of this process (/proc/self/status): its resident
// file-backed pages, bbolt's map among them.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestTrimMapped: reading a 24 MiB bbolt file whole makes its pages
// resident; TrimMapped (and WhileTrimming around such a read) drops them,
// and every value still reads back the same.
func TestTrimMapped(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000) }
	const n = 24 << 10
	if err := db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		b.FillPercent = 1
		for i := range n {
			if err := b.Put([]byte(fmt.Sprintf("k%08d", i)), val(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	readAll := func() error {
		return db.View(func(tx *bolt.Tx) error {
			i := 0
			return tx.Bucket([]byte("b")).ForEach(func(k, v []byte) error {
				if !bytes.Equal(v, val(i)) {
					return fmt.Errorf("value %d differs", i)
				}
				i++
				return nil
			})
		})
	}
	if err := readAll(); err != nil {
		t.Fatal(err)
	}
	before := rssFileKiB(t)
	TrimMapped(db)
	after := rssFileKiB(t)
	if before-after < 16<<10 {
		t.Fatalf("RssFile %d KiB → %d KiB after TrimMapped: the map's pages stayed resident", before, after)
	}
	if err := WhileTrimming(db, time.Millisecond, readAll); err != nil {
		t.Fatal(err)
	}
	if again := rssFileKiB(t); again-after > 8<<10 {
		t.Fatalf("RssFile %d KiB after a read under WhileTrimming (%d before it)", again, after)
	}
}
