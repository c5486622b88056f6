package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/internal/shiptest"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/projections"
	"github.com/cmlab/cmlab/ship"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRestoreCLIRefusesForgedDuplicatedOrCorruptMessages (issue 27
// finding 10 and item 11): an event published as seq N+1 with the home's
// headers by someone else — another home's event, the home's own last
// event again under a new message id, or its bytes damaged — was restored
// (exit 0), or refused with exit 1 and no fix. Each is refused with exit
// 3, naming the seq and the fix; the fix (--to N) restores the rest.
func TestRestoreCLIRefusesForgedDuplicatedOrCorruptMessages(t *testing.T) {
	url := testNATS(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		forged func(own, foreign []*events.Event) ([]byte, string)
	}{
		{"foreign", func(_, foreign []*events.Event) ([]byte, string) { return shiptest.EntryAt(t, foreign[2], 31), "" }},
		{"duplicated", func(own, _ []*events.Event) ([]byte, string) { return shiptest.EntryAt(t, own[29], 31), "copied" }},
		{"corrupt", func(own, _ []*events.Event) ([]byte, string) {
			b := shiptest.EntryAt(t, own[29], 31)
			b[len(b)-1] ^= 0x20
			return b, ""
		}},
	}
	other := workloadHomeCLI(t, 10)
	foreign := shiptest.LogEvents(t, other)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := workloadHomeCLI(t, 30)
			id := shipAll(t, h, url, 30)
			key := filepath.Join(h.Dir, "state", "ship-key")
			own := shiptest.LogEvents(t, h)
			data, mac := c.forged(own, foreign)
			if mac == "copied" {
				nc, err := nats.Connect(url)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc)
				st, err := js.Stream(ctx, ship.DefaultStream(id))
				if err != nil {
					t.Fatal(err)
				}
				m30, err := st.GetMsg(ctx, 30)
				if err != nil {
					t.Fatal(err)
				}
				mac = m30.Header.Get(ship.HeaderMAC)
			}
			shiptest.Publish(t, url, shiptest.Forged{Subject: ship.Subject(id, "feedback.submitted"), Seq: 31, Data: data, MsgID: "forged-" + c.name,
				Header: map[string]string{ship.HeaderHomeID: id, ship.HeaderSeq: "31", ship.HeaderType: "feedback.submitted", ship.HeaderMAC: mac}})
			into := filepath.Join(t.TempDir(), "restored")
			code, out, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--into", into)
			if code != exitCorrupt || !strings.Contains(errs, "seq 31") || !strings.Contains(errs, "fix: seq 31 is not an event this home shipped") || !strings.Contains(errs, "--to 30") {
				t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
			}
			if _, err := os.Stat(into); err == nil {
				t.Fatal("a refused restore created its directory")
			}
			code, out, errs = cli(t, "restore", "--nats", url, "--home-id", id, "--key", key, "--to", "30", "--into", into)
			if code != 0 || !strings.Contains(out, "30 events (seq 1–30)") {
				t.Fatalf("restore --to 30: exit %d\n%s%s", code, out, errs)
			}
		})
	}
	// Without a key an authenticated stream is refused, naming the key.
	h := workloadHomeCLI(t, 5)
	id := shipAll(t, h, url, 5)
	code, _, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--into", filepath.Join(t.TempDir(), "r"))
	if code != exitCorrupt || !strings.Contains(errs, "fix: pass --key FILE") {
		t.Fatalf("restore without --key: exit %d\n%s", code, errs)
	}
	if code, _, errs := cli(t, "restore", "--nats", url, "--home-id", id, "--unauthenticated", "--into", filepath.Join(t.TempDir(), "r")); code != 0 {
		t.Fatalf("restore --unauthenticated: exit %d\n%s", code, errs)
	}
}

// workloadHomeCLI is a home of n workload events of every type.
func workloadHomeCLI(t *testing.T, n int) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	e, err := engine.Open(context.Background(), engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range projections.Workload(projections.WorkloadEveryType, 5, n) {
		if _, err := e.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSalvageTakesShippedEntriesBackFromTheStream (issue 27 finding 3:
// salvage never writes placeholders for a range a stream still holds): a
// flipped byte in an acknowledged entry of a home that shipped it. The
// salvage refuses, changing nothing and naming --from-nats; with it, the
// lost entry is written back from the stream byte for byte (MAC checked),
// with no placeholder, and the log verifies.
func TestSalvageTakesShippedEntriesBackFromTheStream(t *testing.T) {
	url := testNATS(t)
	h := workloadHomeCLI(t, 60)
	shipAll(t, h, url, 60)
	before := shiptest.LogEvents(t, h)
	segs := walSegmentNames(t, h.WALDir())
	seg := filepath.Join(h.WALDir(), segs[len(segs)-1])
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	damaged := slices.Clone(b)
	damaged[len(b)/2] ^= 0x10
	if err := os.WriteFile(seg, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "recover", "--home", h.Dir, "--salvage", "--apply")
	if code != exitCorrupt || !strings.Contains(errs, "holds them") || !strings.Contains(errs, "--from-nats "+url) {
		t.Fatalf("salvage of shipped entries without --from-nats: exit %d\n%s%s", code, out, errs)
	}
	if got, _ := os.ReadFile(seg); !bytes.Equal(got, damaged) {
		t.Fatal("a refused salvage changed the segment")
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "state", "views-stale")); err == nil {
		t.Fatal("a refused salvage left state/views-stale")
	}
	code, out, errs = cli(t, "recover", "--home", h.Dir, "--salvage", "--apply", "--from-nats", url)
	// Exit 4: the workload's steps await review (recover --apply's own
	// verdicts, appended after the salvage); the salvage itself is done.
	if (code != 0 && code != exitNeedReview) || !strings.Contains(out, "no view line changed") {
		t.Fatalf("salvage --from-nats: exit %d\n%s%s", code, out, errs)
	}
	after := shiptest.LogEvents(t, h)
	if len(after) < len(before) {
		t.Fatalf("%d events after the salvage, want %d", len(after), len(before))
	}
	for i := range before {
		if after[i].ID != before[i].ID || after[i].Type != before[i].Type {
			t.Fatalf("seq %d: %s %s after the salvage, want %s %s", i+1, after[i].Type, after[i].ID, before[i].Type, before[i].ID)
		}
	}
	if got, _ := os.ReadFile(seg); len(got) < len(b) || !bytes.Equal(got[:len(b)], b) {
		t.Fatal("the salvaged segment is not the original byte for byte")
	}
	if code, out, errs := cli(t, "wal", "verify", "--home", h.Dir); code != 0 {
		t.Fatalf("wal verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestRepairManifestFromTheStream (issue 27 finding 3: the manifest is
// rebuilt from segment names in wal/, the archive, or the JetStream
// stream): wal/MANIFEST lost and the archive directory gone too. The
// repair names what no archive holds; with --from-nats it writes the
// front back from the home's stream (MACs checked) into a new archive,
// and every event is there with the views byte-identical.
func TestRepairManifestFromTheStream(t *testing.T) {
	url := testNATS(t)
	h := compactHome(t)
	shipAll(t, home.Home{Dir: h}, url, 120)
	archive := filepath.Join(t.TempDir(), "archive")
	if code, _, errs := walCLI(t, "--home", h, "compact", "--archive", archive); code != 0 {
		t.Fatal(errs)
	}
	views := viewFiles(t, h)
	if err := os.Remove(filepath.Join(h, "wal", "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(archive); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "rebuilt")
	code, out, errs := walCLI(t, "--home", h, "compact", "--repair-manifest", "--archive", fresh)
	if code == 0 || !strings.Contains(errs, "no archive holds seqs 1..") {
		t.Fatalf("repair with an empty archive: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = walCLI(t, "--home", h, "compact", "--repair-manifest", "--archive", fresh, "--from-nats", url)
	if code != 0 || !strings.Contains(out, "rebuilt: the log starts at seq") {
		t.Fatalf("repair --from-nats: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"wal", "verify"}, {"rebuild", "--check"}, {"status"}} {
		if code, out, errs := walCLI(t, append([]string{"--home", h}, args...)...); code != 0 {
			t.Fatalf("%v after the repair: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if n, errs := dumpCount(t, h); n != 120 {
		t.Fatalf("%d events after the repair: %s", n, errs)
	}
	if got := viewFiles(t, h); !maps.Equal(got, views) {
		t.Fatal("views changed")
	}
}
