package reqindex_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/reqindex"
)

// reqEvent is an event carrying request id req (with a response naming it).
func reqEvent(t testing.TB, req string) *events.Event {
	t.Helper()
	ev, err := events.New("lab_t", &events.LabSessionStarted{SessionID: "lab_t", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return ev.WithRequest(req, "sha256-"+req, []byte(fmt.Sprintf(`{"ok":true,"for":%q}`, req)))
}

func openEngine(t testing.TB, h home.Home) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Options{Home: h, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// appendReqs appends n events with ids prefix-0.., plus a repeat of the
// first id (whose answer must stay the first one's).
func appendReqs(t testing.TB, e *engine.Engine, prefix string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	var batch []*events.Event
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		batch = append(batch, reqEvent(t, id))
		want[id] = fmt.Sprintf(`{"ok":true,"for":%q}`, id)
		if len(batch) == 64 || i == n-1 {
			if _, err := e.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	dup := reqEvent(t, prefix+"-0")
	dup.Resp = []byte(`{"second":true}`)
	if _, err := e.Append(context.Background(), dup); err != nil {
		t.Fatal(err)
	}
	return want
}

func checkAnswers(t *testing.T, x *reqindex.Index, want map[string]string) {
	t.Helper()
	for id, resp := range want {
		r, ok, err := x.Lookup(id)
		if err != nil || !ok {
			t.Fatalf("lookup %s: ok=%v err=%v", id, ok, err)
		}
		if string(r.Resp) != resp || r.Hash != "sha256-"+id {
			t.Fatalf("lookup %s = %q %q, want %q", id, r.Hash, r.Resp, resp)
		}
	}
	if _, ok, err := x.Lookup("never-sent"); ok || err != nil {
		t.Fatalf("unknown id: ok=%v err=%v", ok, err)
	}
}

// TestDedupeSurvivesRestart: answers are there at once (before any flush),
// after a restart without replaying the history, and for events appended
// while no index was open (caught up from the covered seq).
func TestDedupeSurvivesRestart(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	e := openEngine(t, h)
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := appendReqs(t, e, "a", 300)
	checkAnswers(t, x, want)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Appends with no index open: the file lags the log.
	e = openEngine(t, h)
	for k, v := range appendReqs(t, e, "b", 100) {
		want[k] = v
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, h)
	defer e.Close()
	x, err = e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if why := x.Rebuilt(); why != "" {
		t.Fatalf("a sound index was rebuilt: %s", why)
	}
	if x.Pending() != 0 {
		t.Fatalf("%d ids held in memory after open; the catch-up must write them to disk", x.Pending())
	}
	if got := x.Covered(); got != e.Log().LastSeq() {
		t.Fatalf("covered %d, log ends at %d", got, e.Log().LastSeq())
	}
	checkAnswers(t, x, want)
	if n, _ := x.Len(); n != len(want) {
		t.Fatalf("%d ids stored, want %d", n, len(want))
	}
}

// buildIndexed makes a home with n request ids and a flushed index file.
func buildIndexed(t *testing.T, n int) (home.Home, map[string]string) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	e := openEngine(t, h)
	if _, err := e.RequestIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := appendReqs(t, e, "c", n)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return h, want
}

// TestDamagedIndexRebuilt: a truncated, garbled, foreign-format or
// ahead-of-the-log file is never trusted: it is rebuilt from the log and
// gives the same answers.
func TestDamagedIndexRebuilt(t *testing.T) {
	for name, f := range damageCases() {
		t.Run(name, func(t *testing.T) {
			h, want := buildIndexed(t, 200)
			f(t, h, h.RequestIndexFile())
			e := openEngine(t, h)
			defer e.Close()
			x, err := e.RequestIndex(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if x.Rebuilt() == "" {
				t.Fatal("damaged index trusted")
			}
			t.Logf("rebuilt: %s", x.Rebuilt())
			checkAnswers(t, x, want)
			if n, _ := x.Len(); n != len(want) {
				t.Fatalf("%d ids stored, want %d", n, len(want))
			}
			e.Close()
			awaitNoCheckGoroutine(t)
		})
	}
}

// awaitNoCheckGoroutine fails unless every goroutine bbolt's Tx.Check
// started has ended: a check whose errors are not all read stays blocked
// on its channel for good, reading the transaction after it was closed.
func awaitNoCheckGoroutine(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "bbolt.(*Tx).Check") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a bbolt check goroutine outlived its transaction:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// damageCases are ways to damage an index file.
func damageCases() map[string]func(t *testing.T, h home.Home, path string) {
	return map[string]func(t *testing.T, h home.Home, path string){
		"truncated": func(t *testing.T, h home.Home, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"empty": func(t *testing.T, h home.Home, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		},
		"garbage": func(t *testing.T, h home.Home, path string) {
			b := make([]byte, 64<<10)
			for i := range b {
				b[i] = byte(i*7 + 3)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"keys out of order in every leaf": func(t *testing.T, h home.Home, path string) {
			// The first two keys of every leaf page swapped: bbolt's check
			// reports each page, so it has many errors to send, not one.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			const ps, leaf = 4096, 0x02
			swapped := 0
			for off := 2 * ps; off+ps <= len(b); off += ps {
				pg := b[off : off+ps]
				if binary.LittleEndian.Uint16(pg[8:]) != leaf || binary.LittleEndian.Uint16(pg[10:]) < 2 {
					continue
				}
				key := func(i int) []byte { // leaf element: flags, pos, ksize, vsize
					e := pg[16+16*i:]
					pos, ks := int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:]))
					return pg[16+16*i+pos : 16+16*i+pos+ks]
				}
				k0, k1 := key(0), key(1)
				if len(k0) != len(k1) || bytes.Equal(k0, k1) {
					continue
				}
				tmp := append([]byte{}, k0...)
				copy(k0, k1)
				copy(k1, tmp)
				swapped++
			}
			if swapped < 2 {
				t.Fatalf("%d leaf pages swapped, want at least 2", swapped)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"meta pages zeroed": func(t *testing.T, h home.Home, path string) {
			overwrite(t, path, 0, make([]byte, 8192))
		},
		"data pages garbled": func(t *testing.T, h home.Home, path string) {
			fi, _ := os.Stat(path)
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				off := 16384 + rng.Int64N(fi.Size()-16384-64)
				b := make([]byte, 16)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				overwrite(t, path, off, b)
			}
		},
		"one value byte flipped": func(t *testing.T, h home.Home, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			i := lastIndex(b, []byte(`"for":"c-17"`))
			if i < 0 {
				t.Fatal("value not found in the file")
			}
			overwrite(t, path, int64(i+8), []byte{'X'})
		},
		"other format": func(t *testing.T, h home.Home, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("cmlab-reqindex-0"))
			})
			db.Close()
		},
		"covers past the log": func(t *testing.T, h home.Home, path string) {
			// The index of a longer history over this shorter log.
			h2, _ := buildIndexed(t, 500)
			b, err := os.ReadFile(h2.RequestIndexFile())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, b, 0o600)
		},
		"another log's history": func(t *testing.T, h home.Home, path string) {
			// Same number of events, other ids: the covered event differs.
			h2, _ := buildIndexed(t, 200)
			b, err := os.ReadFile(h2.RequestIndexFile())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, b, 0o600)
		},
	}
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func lastIndex(b, sub []byte) int {
	for i := len(b) - len(sub); i >= 0; i-- {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

// TestManyIDsStayOffTheHeap stores 50k ids: at no point does the index
// hold more than MaxPending of them in memory, and once flushed none.
func TestManyIDsStayOffTheHeap(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	e := openEngine(t, h)
	defer e.Close()
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50_000
	var batch []*events.Event
	for i := range n {
		batch = append(batch, reqEvent(t, fmt.Sprintf("m-%d", i)))
		if len(batch) == 500 {
			if _, err := e.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
			if p := x.Pending(); p > reqindex.DefaultMaxPending {
				t.Fatalf("%d ids pending in memory, cap %d", p, reqindex.DefaultMaxPending)
			}
		}
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := x.Pending(); p != 0 {
		t.Fatalf("%d ids still in memory after a flush", p)
	}
	if got, _ := x.Len(); got != n {
		t.Fatalf("%d ids on disk, want %d", got, n)
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		id := fmt.Sprintf("m-%d", i)
		if r, ok, err := x.Lookup(id); !ok || err != nil || string(r.Resp) != fmt.Sprintf(`{"ok":true,"for":%q}`, id) {
			t.Fatalf("lookup %s: %q %v %v", id, r.Resp, ok, err)
		}
	}
}

// TestLookupAfterCloseFails: a closed index answers ErrClosed, never "unknown".
func TestLookupAfterCloseFails(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	e := openEngine(t, h)
	x, err := e.RequestIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if _, _, err := x.Lookup("a"); !errors.Is(err, reqindex.ErrClosed) {
		t.Fatalf("lookup after close: %v", err)
	}
}
