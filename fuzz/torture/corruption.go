package torture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/wal"
)

// CorruptionOptions configure RunCorruption.
type CorruptionOptions struct {
	// Dir is where the generated log and its damaged copies are made.
	// Default os.TempDir().
	Dir string
	// Events is the size of the generated log. Default 120.
	Events int
	// SegmentSize of the generated log. Default 4096, so that the log has
	// several segments.
	SegmentSize int
	// Sample, when > 0, tries that many randomly chosen cases of each kind
	// instead of every one (CI).
	Sample int
	// Seed picks the sample. Default 1.
	Seed uint64
	// Out receives the summary. Default io.Discard.
	Out io.Writer
}

// CorruptionSummary counts the cases of the campaign.
type CorruptionSummary struct {
	Flips, FlipsDetected        int // single-byte flips tried / found by Verify at the right place
	FlipsRepaired, FlipsRefused int // tail damage Open repaired / mid-log damage Open refused
	Salvaged                    int // refused logs that Salvage brought back with every intact event
	Cuts, CutsDetected          int // truncations (log cut there, later segments gone)
	CutsInPlace                 int // truncations of the second-to-last segment with the last kept
	CutsInPlaceRefused          int
	Violations                  []string
}

// frame is one entry of the generated log, located by an independent parser.
type frame struct {
	seg      string
	off, end int64 // [off, end) including the length prefix
	seq      uint64
}

// RunCorruption generates a multi-segment log, then for every single-byte
// flip and every truncation point of its last two segments (or a sample)
// checks that wal.Verify reports the damage at the frame that holds it, that
// wal.Open repairs tail damage (keeping every entry before it) and refuses
// damage with a good entry after it, and that wal.Salvage brings a refused
// log back with every intact event byte for byte. It returns ErrViolations
// when any check failed.
func RunCorruption(ctx context.Context, opts CorruptionOptions) (*CorruptionSummary, error) {
	if opts.Events <= 0 {
		opts.Events = 120
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = 4096
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	root, err := os.MkdirTemp(opts.Dir, "cmlab-corruption-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	orig := filepath.Join(root, "orig")
	want, err := generateLog(ctx, orig, opts.Events, opts.SegmentSize)
	if err != nil {
		return nil, err
	}
	frames, err := parseFrames(orig)
	if err != nil {
		return nil, err
	}
	segs := segmentNames(frames)
	if len(segs) < 3 {
		return nil, fmt.Errorf("corruption: generated log has %d segments, want ≥ 3", len(segs))
	}
	files := map[string][]byte{}
	for _, s := range segs {
		if files[s], err = os.ReadFile(filepath.Join(orig, s)); err != nil {
			return nil, err
		}
	}
	last2 := segs[len(segs)-2:]
	sum := &CorruptionSummary{}
	rng := rand.New(rand.NewPCG(opts.Seed, 0xc0))
	c := &campaign{root: root, orig: orig, want: want, frames: frames, segs: segs, files: files, sum: sum}

	type point struct {
		seg string
		off int64
	}
	var points []point
	for _, s := range last2 {
		for off := int64(0); off < int64(len(files[s])); off++ {
			points = append(points, point{s, off})
		}
	}
	pick := func() []point {
		ps := slices.Clone(points)
		if opts.Sample > 0 && opts.Sample < len(ps) {
			rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			ps = ps[:opts.Sample]
		}
		return ps
	}
	for _, p := range pick() {
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		c.flip(p.seg, p.off, byte(1+rng.IntN(255)))
	}
	for _, p := range pick() {
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		c.cut(p.seg, p.off)
		if p.seg == segs[len(segs)-2] {
			c.cutInPlace(p.seg, p.off)
		}
	}
	fmt.Fprintf(opts.Out, "corruption: log of %d events in %d segments; flips %d (detected at the right frame %d, tail repaired %d, refused %d, salvaged %d); cuts %d (detected %d); in-place cuts %d (refused %d); violations %d\n",
		len(want)-1, len(segs), sum.Flips, sum.FlipsDetected, sum.FlipsRepaired, sum.FlipsRefused, sum.Salvaged,
		sum.Cuts, sum.CutsDetected, sum.CutsInPlace, sum.CutsInPlaceRefused, len(sum.Violations))
	for i, v := range sum.Violations {
		if i == 30 {
			fmt.Fprintf(opts.Out, "… and %d more\n", len(sum.Violations)-30)
			break
		}
		fmt.Fprintln(opts.Out, "VIOLATION:", v)
	}
	if len(sum.Violations) > 0 {
		return sum, fmt.Errorf("%w: corruption campaign: %d", ErrViolations, len(sum.Violations))
	}
	return sum, nil
}

// generateLog writes n events of varied types and sizes through wal.Open
// and returns their entry bytes by seq (index 0 unused).
func generateLog(ctx context.Context, dir string, n, segSize int) ([][]byte, error) {
	l, err := wal.Open(wal.Options{Dir: dir, QuarantineDir: dir + "-q", SegmentSize: segSize, NoSync: true})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < n; {
		batch := 1 + rng.IntN(4)
		var evs []*events.Event
		for j := 0; j < batch && i < n; j, i = j+1, i+1 {
			var p events.Payload
			switch i % 3 {
			case 0:
				o := rng.IntN(101)
				p = &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_" + strconv.Itoa(i), SessionID: "lab_x", Ratings: &events.Ratings{Overall: &o}, Notes: strings.Repeat("n", rng.IntN(200))}}
			case 1:
				p = &events.PtyOutput{BlockID: "blk_" + strconv.Itoa(i), SpoolOffset: int64(i * 10), Data: bytes.Repeat([]byte{byte(i)}, rng.IntN(300))}
			default:
				p = &events.StepExecuting{MandateID: "m", StepID: "s" + strconv.Itoa(i), IdemKey: "k", ObservedPreHash: "sha256-00"}
			}
			ev, err := events.New("stream", p)
			if err != nil {
				l.Close()
				return nil, err
			}
			if i%5 == 0 {
				ev.WithRequest("req-"+strconv.Itoa(i), "sha256-ab", []byte(`{"ok":true}`))
			}
			evs = append(evs, ev)
		}
		if _, err := l.Append(ctx, evs...); err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	want := make([][]byte, 1, n+1)
	for ev, err := range mustReader(dir).Events(1) {
		if err != nil {
			return nil, err
		}
		b, err := wal.EncodeEntry(ev)
		if err != nil {
			return nil, err
		}
		want = append(want, b)
	}
	if len(want) != n+1 {
		return nil, fmt.Errorf("corruption: generated %d events, read back %d", n, len(want)-1)
	}
	return want, nil
}

func mustReader(dir string) *wal.Reader {
	r, err := wal.OpenReader(dir)
	if err != nil {
		panic(err)
	}
	return r
}

// parseFrames locates every frame of every segment (uvarint length, entry)
// without the wal package: the campaign's own oracle.
func parseFrames(dir string) ([]frame, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []frame
	for _, e := range ents {
		name := e.Name()
		first, err := strconv.ParseUint(name, 10, 64)
		if len(name) != 20 || err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		seq := first
		for off := 0; off < len(data); {
			size, k := binary.Uvarint(data[off:])
			if k <= 0 || off+k+int(size) > len(data) {
				return nil, fmt.Errorf("corruption: generated segment %s has a bad frame at %d", name, off)
			}
			out = append(out, frame{seg: name, off: int64(off), end: int64(off + k + int(size)), seq: seq})
			off += k + int(size)
			seq++
		}
	}
	return out, nil
}

func segmentNames(fs []frame) []string {
	var out []string
	for _, f := range fs {
		if len(out) == 0 || out[len(out)-1] != f.seg {
			out = append(out, f.seg)
		}
	}
	return out
}

type campaign struct {
	root   string
	orig   string
	want   [][]byte
	frames []frame
	segs   []string
	files  map[string][]byte
	sum    *CorruptionSummary
	n      int
}

func (c *campaign) violate(format string, args ...any) {
	c.sum.Violations = append(c.sum.Violations, fmt.Sprintf(format, args...))
}

// frameAt is the frame of seg holding byte off.
func (c *campaign) frameAt(seg string, off int64) frame {
	for _, f := range c.frames {
		if f.seg == seg && off >= f.off && off < f.end {
			return f
		}
	}
	return frame{seg: seg, off: -1}
}

// framesOf lists the frames of seg.
func (c *campaign) framesOf(seg string) []frame {
	var out []frame
	for _, f := range c.frames {
		if f.seg == seg {
			out = append(out, f)
		}
	}
	return out
}

// copyLog makes a fresh copy of the original log, with edit applied to
// the copy's files, and returns its directory.
func (c *campaign) copyLog(edit func(dir string) error) (string, error) {
	c.n++
	dir := filepath.Join(c.root, fmt.Sprintf("case-%d", c.n%4), "wal")
	os.RemoveAll(filepath.Dir(dir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, s := range c.segs {
		if err := os.WriteFile(filepath.Join(dir, s), c.files[s], 0o600); err != nil {
			return "", err
		}
	}
	return dir, edit(dir)
}

// quarantineOf is the quarantine directory of a case's log directory.
func quarantineOf(dir string) string { return filepath.Join(filepath.Dir(dir), "quarantine") }

// openCase opens a case's damaged log.
func openCase(dir string) (*wal.Log, error) {
	return wal.Open(wal.Options{Dir: dir, QuarantineDir: quarantineOf(dir), NoSync: true})
}

func (c *campaign) isLastFrame(f frame) bool {
	last := c.frames[len(c.frames)-1]
	return f.seg == last.seg && f.off == last.off
}

// flip xors the byte at seg:off with x and checks detection, open and salvage.
func (c *campaign) flip(seg string, off int64, x byte) {
	c.sum.Flips++
	f := c.frameAt(seg, off)
	name := fmt.Sprintf("flip %s@%d^%02x (seq %d)", seg, off, x, f.seq)
	dir, err := c.copyLog(func(dir string) error {
		b := bytes.Clone(c.files[seg])
		b[off] ^= x
		return os.WriteFile(filepath.Join(dir, seg), b, 0o600)
	})
	if err != nil {
		c.violate("%s: harness: %v", name, err)
		return
	}
	rep, verr := wal.Verify(dir)
	tail := c.isLastFrame(f)
	var first *wal.BadEntry
	switch {
	case len(rep.Bad) > 0:
		first = &rep.Bad[0]
	case rep.TornTail != nil:
		first = rep.TornTail
	}
	if first == nil {
		c.violate("%s: Verify found nothing (err %v)", name, verr)
		return
	}
	if first.Segment != seg || first.Offset != f.off || first.Seq != f.seq {
		c.violate("%s: Verify placed it at %s, want segment %s offset %d seq %d", name, first, seg, f.off, f.seq)
		return
	}
	if tail != (len(rep.Bad) == 0) {
		c.violate("%s: Verify says torn tail %v, want %v (%v)", name, len(rep.Bad) == 0, tail, verr)
		return
	}
	if !tail && !errors.Is(verr, wal.ErrCorrupt) {
		c.violate("%s: Verify error %v does not wrap ErrCorrupt", name, verr)
	}
	c.sum.FlipsDetected++
	if tail {
		if c.openRepairs(name, dir, f.seq) {
			c.sum.FlipsRepaired++
		}
		return
	}
	if c.openRefuses(name, dir) {
		c.sum.FlipsRefused++
	}
	if c.salvageKeeps(name, dir, []uint64{f.seq}) {
		c.sum.Salvaged++
	}
}

// openRepairs checks that Open cuts the tail from seq on and keeps the rest.
func (c *campaign) openRepairs(name, dir string, seq uint64) bool {
	l, err := openCase(dir)
	if err != nil {
		c.violate("%s: Open refused tail damage: %v", name, err)
		return false
	}
	defer l.Close()
	ok := true
	rep := l.Repaired()
	if rep == nil || rep.FirstSeq != seq {
		c.violate("%s: Open repaired %+v, want a repair from seq %d", name, rep, seq)
		ok = false
	}
	for s := uint64(1); s < seq; s++ {
		ev, err := l.Read(s)
		if err != nil {
			c.violate("%s: after repair seq %d: %v", name, s, err)
			return false
		}
		if b, _ := wal.EncodeEntry(ev); !bytes.Equal(b, c.want[s]) {
			c.violate("%s: after repair seq %d changed", name, s)
			return false
		}
	}
	// The repair is recorded as the next event, at the cut's sequence.
	if ev, err := l.Read(seq); err != nil || ev.Type != events.TypeWalRepaired {
		c.violate("%s: seq %d after repair is %v (%v), want wal.repaired", name, seq, evType(ev), err)
		ok = false
	}
	if l.LastSeq() != seq {
		c.violate("%s: LastSeq %d after repair, want %d", name, l.LastSeq(), seq)
		ok = false
	}
	return ok
}

func evType(ev *events.Event) string {
	if ev == nil {
		return "nothing"
	}
	return ev.Type
}

// openRefuses checks that Open refuses mid-log damage with ErrCorrupt and
// changes nothing on disk.
func (c *campaign) openRefuses(name, dir string) bool {
	before := snapshotDir(dir)
	l, err := openCase(dir)
	if err == nil {
		l.Close()
		c.violate("%s: Open accepted damage with good entries after it", name)
		return false
	}
	if !errors.Is(err, wal.ErrCorrupt) {
		c.violate("%s: Open error %v does not wrap ErrCorrupt", name, err)
		return false
	}
	if after := snapshotDir(dir); after != before {
		c.violate("%s: refused Open changed the log directory", name)
		return false
	}
	return true
}

// salvageKeeps runs Salvage and checks every entry but lost is intact,
// each lost one is a wal.salvaged placeholder at its seq, and the log opens.
func (c *campaign) salvageKeeps(name, dir string, lost []uint64) bool {
	rep, err := wal.Salvage(dir, quarantineOf(dir))
	if err != nil {
		c.violate("%s: Salvage: %v", name, err)
		return false
	}
	var gotLost []uint64
	for _, le := range rep.Lost {
		gotLost = append(gotLost, le.Seq)
	}
	if !slices.Equal(gotLost, lost) {
		c.violate("%s: Salvage lost %v, want %v", name, gotLost, lost)
		return false
	}
	l, err := openCase(dir)
	if err != nil {
		c.violate("%s: Open after Salvage: %v", name, err)
		return false
	}
	defer l.Close()
	if l.LastSeq() != uint64(len(c.want)-1) {
		c.violate("%s: LastSeq %d after Salvage, want %d", name, l.LastSeq(), len(c.want)-1)
		return false
	}
	for s := uint64(1); s < uint64(len(c.want)); s++ {
		ev, err := l.Read(s)
		if err != nil {
			c.violate("%s: after Salvage seq %d: %v", name, s, err)
			return false
		}
		if slices.Contains(lost, s) {
			if ev.Type != events.TypeWalSalvaged {
				c.violate("%s: lost seq %d holds %s, want wal.salvaged", name, s, ev.Type)
				return false
			}
			continue
		}
		if b, _ := wal.EncodeEntry(ev); !bytes.Equal(b, c.want[s]) {
			c.violate("%s: Salvage changed intact seq %d", name, s)
			return false
		}
	}
	return true
}

// cut truncates the log at seg:off: seg is cut there and every later
// segment removed, as a crash in the middle of a write leaves it.
func (c *campaign) cut(seg string, off int64) {
	c.sum.Cuts++
	f := c.frameAt(seg, off)
	name := fmt.Sprintf("cut %s@%d (seq %d)", seg, off, f.seq)
	i := slices.Index(c.segs, seg)
	dir, err := c.copyLog(func(dir string) error {
		for _, s := range c.segs[i+1:] {
			if err := os.Remove(filepath.Join(dir, s)); err != nil {
				return err
			}
		}
		return os.Truncate(filepath.Join(dir, seg), off)
	})
	if err != nil {
		c.violate("%s: harness: %v", name, err)
		return
	}
	rep, verr := wal.Verify(dir)
	if len(rep.Bad) > 0 || verr != nil {
		c.violate("%s: Verify calls a torn tail corruption: %v", name, verr)
		return
	}
	boundary := off == f.off
	if boundary {
		// A clean cut between entries: nothing to detect; seq f.seq is the next.
		if rep.TornTail != nil {
			c.violate("%s: Verify reports a torn tail at a frame boundary: %s", name, rep.TornTail)
			return
		}
		if rep.Last != f.seq-1 {
			c.violate("%s: Verify last seq %d, want %d", name, rep.Last, f.seq-1)
			return
		}
		c.sum.CutsDetected++
		return
	}
	if rep.TornTail == nil || rep.TornTail.Segment != seg || rep.TornTail.Offset != f.off || rep.TornTail.Seq != f.seq {
		c.violate("%s: Verify torn tail %v, want segment %s offset %d seq %d", name, rep.TornTail, seg, f.off, f.seq)
		return
	}
	if c.openRepairs(name, dir, f.seq) {
		c.sum.CutsDetected++
	}
}

// cutInPlace truncates seg at off but keeps the later segments: entries
// are missing in the middle of the log, which Open must refuse and Salvage
// must bridge with placeholders.
func (c *campaign) cutInPlace(seg string, off int64) {
	c.sum.CutsInPlace++
	f := c.frameAt(seg, off)
	name := fmt.Sprintf("in-place cut %s@%d (seq %d)", seg, off, f.seq)
	dir, err := c.copyLog(func(dir string) error { return os.Truncate(filepath.Join(dir, seg), off) })
	if err != nil {
		c.violate("%s: harness: %v", name, err)
		return
	}
	rep, verr := wal.Verify(dir)
	if len(rep.Bad) == 0 || !errors.Is(verr, wal.ErrCorrupt) {
		c.violate("%s: Verify did not report the missing entries (%v)", name, verr)
		return
	}
	if b := rep.Bad[0]; b.Segment != seg || b.Seq != f.seq {
		c.violate("%s: Verify placed it at %s, want segment %s seq %d", name, b, seg, f.seq)
		return
	}
	if !c.openRefuses(name, dir) {
		return
	}
	c.sum.CutsInPlaceRefused++
	var lost []uint64
	for _, fr := range c.framesOf(seg) {
		if fr.end > off {
			lost = append(lost, fr.seq)
		}
	}
	if c.salvageKeeps(name, dir, lost) {
		c.sum.Salvaged++
	}
}

// snapshotDir is a cheap fingerprint of a directory's files: names and sizes.
func snapshotDir(dir string) string {
	ents, _ := os.ReadDir(dir)
	var b strings.Builder
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		if fi, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "%s:%d;", e.Name(), fi.Size())
		}
	}
	return b.String()
}
