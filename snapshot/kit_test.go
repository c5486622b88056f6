package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cmlab/cmlab/events"
)

// counter is the smallest Model: the number of events seen.
type counter struct {
	mu  sync.Mutex
	seq uint64
	id  string
	n   int
}

func (c *counter) Observe(ev *events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq, c.id, c.n = ev.Seq, ev.ID, c.n+1
}

func (c *counter) Covered() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

func (c *counter) Encode() ([]byte, uint64, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []byte(strconv.Itoa(c.n)), c.seq, c.id, nil
}

func (c *counter) Decode(h Header, body []byte) error {
	n, err := strconv.Atoi(string(body))
	if err != nil {
		return errors.Join(ErrInvalid, err)
	}
	c.seq, c.id, c.n = h.Seq, h.EventID, n
	return nil
}

// TestKitWriterGatesAndLoads: the kit's Writer writes only once Every
// events passed (every 0: whenever the model moved), Load fills a model
// from what it wrote, and refuses another schema or a covered event the
// log does not hold.
func TestKitWriterGatesAndLoads(t *testing.T) {
	k := Kind{Name: "counter", Schema: 2, Every: 3}
	if v := k.Version(); v != "2/"+CodeVersion() {
		t.Fatalf("version %q", v)
	}
	path := k.File(t.TempDir())
	if !strings.HasSuffix(path, filepath.Join("snapshots", "counter.msgpack")) {
		t.Fatalf("file %s", path)
	}
	m := &counter{}
	w := NewWriter(k, path, m, 0)
	if ok, err := w.Checkpoint(true); ok || err != nil {
		t.Fatalf("empty model written: %v %v", ok, err)
	}
	ids := map[uint64]string{}
	feed := func(n int) {
		for range n {
			seq := m.Covered() + 1
			ids[seq] = "ev" + strconv.FormatUint(seq, 10)
			m.Observe(&events.Event{Seq: seq, ID: ids[seq]})
		}
	}
	feed(2)
	if ok, _ := w.Checkpoint(false); ok {
		t.Fatal("written after 2 of 3 events")
	}
	feed(1)
	if ok, err := w.Checkpoint(false); !ok || err != nil {
		t.Fatalf("not written after 3 events: %v", err)
	}
	feed(1)
	if ok, _ := w.Checkpoint(false); ok {
		t.Fatal("written again after 1 event")
	}
	if ok, err := w.Checkpoint(true); !ok || err != nil {
		t.Fatalf("final checkpoint: %v %v", ok, err)
	}
	idAt := func(seq uint64) (string, error) { return ids[seq], nil }
	got := &counter{}
	h, err := k.Load(got, path, 1, 4, idAt)
	if err != nil || h.Seq != 4 || got.n != 4 || got.id != "ev4" {
		t.Fatalf("load: %+v %+v %v", h, got, err)
	}
	if c, err := k.Covers(path); c != 4 || err != nil {
		t.Fatalf("covers %d %v", c, err)
	}
	if _, err := (Kind{Name: "counter", Schema: 3}).Load(&counter{}, path, 1, 4, idAt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another schema: %v", err)
	}
	if _, err := k.Load(&counter{}, path, 1, 4, func(uint64) (string, error) { return "other", nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another event at the covered seq: %v", err)
	}
	if _, err := k.Load(&counter{}, path, 1, 3, idAt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("covering past the log's end: %v", err)
	}
	if _, err := k.Load(&counter{}, path+".none", 1, 4, idAt); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
