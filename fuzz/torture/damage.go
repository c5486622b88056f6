package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/wal"
)

// The damage matrix (issue 27): every kind of file a home can hold
// (home.Kinds) × every damage × every command that opens a home. Each case
// starts from a copy of one fixture home (damage_fixture.go), damages one
// file of the kind, runs the command (this very binary, as a child) and
// checks the invariants:
//
//   - no command crashes: exit 2, a signal or a Go panic/fatal trace is a
//     violation (so is a command still running after CaseTimeout);
//   - no acknowledged event is lost while a copy of it exists: the events
//     found in any copy (every segment of wal/ and of the archive, read
//     one file at a time by wal.ScanFile) before the command are all
//     found in some copy after it;
//   - no command exits 0 while history is missing: when an event the
//     fixture acknowledged is in no copy, exit 0 is a violation;
//   - every damage is named with the command that fixes it: an exit other
//     than 0 must say "cmlab <command>", a "--flag" or a "fix:" line;
//   - nothing is sent to an unauthenticated listener: in the stale
//     daemon.json case a listener of ours holds the recorded port (and a
//     live process of ours the recorded pid) and must receive nothing;
//   - a home made by cmlab replay --into takes no write while its mark,
//     state/replayed.json, is there, damaged or not;
//   - the terminal's dropped past reads back as it was, or is refused:
//     after serve cases of view-pty and snapshot, and in the one cell of
//     the flip-live damage (a digit of a dropped block's command changed
//     in pty/fx/events.jsonl while serve runs, after its verification),
//     every read of it answers as the undamaged fixture or with an error
//     (damage_past.go).

// Damages, in the order the matrix walks them.
var Damages = []string{"flip", "truncate", "delete", "foreign", "symlink-elsewhere", "symlink-wal", "unreadable", "disk-full", "stale-daemon", "flip-live"}

// DamageCommands are the commands that open a home, in matrix order.
var DamageCommands = []string{"serve", "status", "recover", "salvage", "compact", "wal-verify", "rebuild", "restore", "write", "ship"}

// naCommands are commands the matrix cannot run yet, with why.
var naCommands = map[string]string{
	"restore": "restores from a NATS JetStream stream into a new directory: it opens no damaged home, and the matrix has no NATS server (--nats URL)",
	"ship":    "ships to a NATS JetStream stream: the matrix has no NATS server (--nats URL)",
}

// shipReads are the kinds cmlab ship reads or writes: the log, the home's
// id, its ship key, cursor and lock, and their directories.
var shipReads = map[string]bool{"segment": true, "manifest": true, "verified": true, "wal-lock": true, "home-id": true,
	"ship-cursor": true, "ship-lock": true, "ship-key": true, "dir-wal": true, "dir-state": true}

// naCommand says why command cannot run on a case of kind k (ok false:
// it can); nats: the matrix has a NATS server. restore reads the stream
// and, of the damaged files, only the archive (its ship key, with
// --key-from-archive).
func naCommand(command string, k home.Kind, nats bool) (string, bool) {
	if command == "restore" && nats {
		if k.Root != home.RootArchive {
			return "restore builds a new home from the stream and the archive's ship key: it reads no file of the damaged home", true
		}
		return "", false
	}
	if command == "ship" && nats {
		if !shipReads[k.Name] {
			return "cmlab ship reads the log, the home's id, its ship key, cursor and lock: not this file", true
		}
		return "", false
	}
	why, ok := naCommands[command]
	return why, ok
}

// DamageOptions configure RunDamage.
type DamageOptions struct {
	Binary string    // the cmlab binary
	Dir    string    // where to work (default the system temp dir)
	Sample int       // run this many random cases (0: all)
	Seed   uint64    // of the sample and the damage positions (0: from the clock)
	Keep   bool      // keep the work directory
	Out    io.Writer // the summary (nil: discarded)
	// CaseTimeout bounds one command (default 30 s).
	CaseTimeout time.Duration
	// Posts is the fixture's number of feedback posts (default 120).
	Posts int
	// Filter, when set, keeps only the cases it accepts (before sampling).
	Filter func(DamageCase) bool
	// NATS is the URL of a NATS server with JetStream: the fixture is
	// shipped there, which makes the ship kinds, and restore runs
	// (damage_ship.go). Without it they are n/a.
	NATS string
}

// DamageCase is one cell of the matrix.
type DamageCase struct {
	Kind, Damage, Command string
}

func (c DamageCase) String() string { return c.Kind + "/" + c.Damage + "/" + c.Command }

// DamageResult is what one case did.
type DamageResult struct {
	DamageCase
	File       string   // the damaged file, relative to its root
	Exit       int      // the command's exit code (-1: killed by a signal or timed out)
	NA         string   // why the case could not run ("" when it ran)
	Violations []string // broken invariants
	Note       string   // how the reads of the terminal's past were answered, when asked
	Output     string   // the command's output, cut
}

// DamageSummary is the outcome of RunDamage.
type DamageSummary struct {
	Seed       uint64
	Cases      int // cases run
	NA         int // cases that could not run (see Results)
	Violations int
	Results    []DamageResult
	Dir        string // the work directory, when kept
}

// RunDamage runs the damage matrix (or a seeded sample of it).
func RunDamage(ctx context.Context, o DamageOptions) (*DamageSummary, error) {
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.CaseTimeout <= 0 {
		o.CaseTimeout = 30 * time.Second
	}
	if o.Posts <= 0 {
		o.Posts = 120
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	work, err := os.MkdirTemp(o.Dir, "cmlab-damage-")
	if err != nil {
		return nil, err
	}
	os.Chmod(work, 0o711) // uid 65534 runs the binary from here (unreadable cases)
	sum := &DamageSummary{Seed: o.Seed}
	defer func() {
		if o.Keep || sum.Violations > 0 {
			sum.Dir = work
			return
		}
		os.RemoveAll(work)
	}()
	m := &matrix{o: o, work: work, rng: rand.New(rand.NewPCG(o.Seed, 0xda6a9e))}
	if err := m.setup(ctx); err != nil {
		return sum, err
	}
	defer m.teardown()

	var cases []DamageCase
	for _, k := range home.Kinds {
		for _, d := range Damages {
			for _, c := range DamageCommands {
				dc := DamageCase{Kind: k.Name, Damage: d, Command: c}
				if d == "flip-live" && (k.Name != "view-pty" || c != "serve") {
					continue // one cell (runCase)
				}
				if o.Filter == nil || o.Filter(dc) {
					cases = append(cases, dc)
				}
			}
		}
	}
	if o.Sample > 0 && o.Sample < len(cases) {
		m.rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
		cases = cases[:o.Sample]
		sort.SliceStable(cases, func(i, j int) bool { return cases[i].String() < cases[j].String() })
	}
	for _, dc := range cases {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		r := m.runCase(ctx, dc)
		sum.Results = append(sum.Results, r)
		switch {
		case r.NA != "":
			sum.NA++
		default:
			sum.Cases++
			sum.Violations += len(r.Violations)
			if len(r.Violations) > 0 {
				fmt.Fprintf(o.Out, "VIOLATION %s (%s): exit %d: %s\n", r.DamageCase, r.File, r.Exit, strings.Join(r.Violations, "; "))
			}
		}
	}
	printDamage(o.Out, sum)
	if sum.Violations > 0 {
		return sum, ErrViolations
	}
	return sum, nil
}

// matrix is the state of one run.
type matrix struct {
	o     DamageOptions
	work  string
	rng   *rand.Rand
	bin   string // the binary, copied where uid 65534 can run it
	tpl   string // the fixture, as built
	other string // another home's fixture (the "foreign" damage)
	fx    *fixture
	ofx   *fixture
	// caseRoot is where every case runs: the fixture was built there, so
	// the archive path wal/MANIFEST records is right in every copy.
	caseRoot string
	asNobody bool   // root: "unreadable" runs the command as uid 65534
	tmpfs    bool   // root: "disk-full" mounts a small tmpfs
	naWhy    string // why unreadable cannot be real, when it cannot
}

func (m *matrix) setup(ctx context.Context) error {
	m.bin = filepath.Join(m.work, "cmlab")
	b, err := os.ReadFile(m.o.Binary)
	if err != nil {
		return err
	}
	if err := os.WriteFile(m.bin, b, 0o755); err != nil {
		return err
	}
	m.caseRoot = filepath.Join(m.work, "case")
	fx, err := buildFixtureOf(ctx, m.bin, m.caseRoot, m.o.Posts, true, m.o.NATS)
	if err != nil {
		return err
	}
	m.fx = fx
	m.tpl = filepath.Join(m.work, "tpl")
	if err := copyTree(m.caseRoot, m.tpl); err != nil {
		return err
	}
	otherRoot := filepath.Join(m.work, "other")
	ofx, err := buildFixture(ctx, m.bin, otherRoot, max(8, m.o.Posts/4), m.o.NATS)
	if err != nil {
		return err
	}
	m.ofx, m.other = ofx, otherRoot
	if os.Geteuid() == 0 {
		m.asNobody = searchable(m.work)
		if !m.asNobody {
			m.naWhy = "an ancestor of the work directory is not searchable by uid 65534"
		}
		probe := filepath.Join(m.work, "tmpfs-probe")
		os.MkdirAll(probe, 0o700)
		if syscall.Mount("tmpfs", probe, "tmpfs", 0, "size=64k") == nil {
			syscall.Unmount(probe, 0)
			m.tmpfs = true
		}
		os.Remove(probe)
	}
	return nil
}

// teardown leaves the last case's home in place with Keep (to look at).
func (m *matrix) teardown() {
	if !m.o.Keep {
		m.reset()
		return
	}
	syscall.Unmount(m.caseRoot, syscall.MNT_DETACH)
}

// reset unmounts and makes writable whatever the last case left.
func (m *matrix) reset() {
	syscall.Unmount(m.caseRoot, syscall.MNT_DETACH)
	filepath.Walk(m.caseRoot, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSymlink == 0 {
			os.Chmod(p, 0o700)
		} else if err != nil {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(m.caseRoot)
}

// searchable reports whether every ancestor of dir lets others search it.
func searchable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if filepath.Dir(d) == d {
			return true
		}
	}
}

func kindByName(name string) home.Kind {
	for _, k := range home.Kinds {
		if k.Name == name {
			return k
		}
	}
	return home.Kind{}
}

// runCase runs one cell of the matrix.
func (m *matrix) runCase(ctx context.Context, dc DamageCase) (r DamageResult) {
	r.DamageCase = dc
	k := kindByName(dc.Kind)
	if why, ok := naKind(k, m.o.NATS != ""); ok {
		r.NA = why
		return r
	}
	if why, ok := naCommand(dc.Command, k, m.o.NATS != ""); ok {
		r.NA = why
		return r
	}
	if !m.fx.made[k.Name] {
		r.NA = "the fixture holds no file of this kind"
		return r
	}
	switch {
	case dc.Damage == "stale-daemon" && k.Name != "daemon-info":
		r.NA = "a stale daemon.json is a damage of the daemon-info kind"
		return r
	case dc.Damage == "unreadable" && os.Geteuid() == 0 && !m.asNobody:
		r.NA = m.naWhy
		return r
	case dc.Damage == "disk-full" && !m.tmpfs:
		r.NA = "needs root and a tmpfs mount to fill a disk for real"
		return r
	case k.Dir && (dc.Damage == "flip" || dc.Damage == "truncate"):
		r.NA = "a directory has no bytes to flip or cut"
		return r
	case dc.Damage == "flip-live" && (k.Name != "view-pty" || dc.Command != "serve"):
		// Not a cell of the matrix (RunDamage): a byte changed under a
		// running daemon after its verification is read back only by the
		// terminal's reads of its dropped past (damage_past.go).
		r.NA = "flip-live is a damage of view-pty under serve"
		return r
	}
	m.reset()
	if dc.Damage == "disk-full" {
		// The copy goes onto a tmpfs with little room left.
		os.MkdirAll(m.caseRoot, 0o700)
		size := treeSize(m.tpl) + 256<<10
		if err := syscall.Mount("tmpfs", m.caseRoot, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
			r.NA = "tmpfs mount: " + err.Error()
			return r
		}
	}
	if err := copyTree(m.tpl, m.caseRoot); err != nil {
		r.Violations = append(r.Violations, "harness: copy the fixture: "+err.Error())
		return r
	}
	homeName, archName := "home", "archive"
	if v, ok := m.fx.variants[k.Made]; ok {
		// A home of its own (fixture.variants); compact archives it
		// beside it.
		homeName, archName = v, v+"-archive"
	}
	h := filepath.Join(m.caseRoot, homeName)
	arch := filepath.Join(m.caseRoot, archName)
	if p, ok := m.fx.placed[k.Name]; ok {
		os.WriteFile(filepath.Join(h, filepath.FromSlash(p.rel)), p.data, 0o600)
	}
	dir := h
	if k.Root == home.RootArchive {
		dir = arch
	}
	files := home.FilesOf(k, dir)
	if len(files) == 0 {
		r.NA = "no file of this kind in the fixture"
		return r
	}
	r.File = files[m.rng.IntN(len(files))]
	if dc.Damage == "flip-live" {
		r.File = pastView // the file the reads of the past read back
	}
	target := filepath.Join(dir, filepath.FromSlash(r.File))
	acked := copies(filepath.Join(m.tpl, homeName), filepath.Join(m.tpl, archName))

	var nobody bool
	var listener *trapListener
	switch dc.Damage {
	case "flip":
		b, err := os.ReadFile(target)
		if err != nil || len(b) == 0 {
			r.NA = "empty file"
			return r
		}
		b[m.rng.IntN(len(b))] ^= 1 << m.rng.IntN(8)
		os.WriteFile(target, b, 0o600)
	case "truncate":
		fi, err := os.Stat(target)
		if err != nil || fi.Size() == 0 {
			r.NA = "empty file"
			return r
		}
		os.Truncate(target, m.rng.Int64N(fi.Size()))
	case "delete":
		os.RemoveAll(target)
	case "foreign":
		od := filepath.Join(m.other, homeName)
		if k.Root == home.RootArchive {
			od = filepath.Join(m.other, "archive")
		}
		ofiles := home.FilesOf(k, od)
		if len(ofiles) == 0 {
			if p, ok := m.ofx.placed[k.Name]; ok {
				os.WriteFile(target, p.data, 0o600)
				break
			}
			r.NA = "the other home holds no file of this kind"
			return r
		}
		src := filepath.Join(od, filepath.FromSlash(ofiles[m.rng.IntN(len(ofiles))]))
		os.RemoveAll(target)
		if k.Dir {
			copyTree(src, target)
		} else {
			b, _ := os.ReadFile(src)
			os.WriteFile(target, b, 0o600)
		}
	case "symlink-elsewhere":
		// A copy of the same bytes outside the home, linked in its place.
		elsewhere := filepath.Join(m.caseRoot, "elsewhere", filepath.Base(target))
		os.MkdirAll(filepath.Dir(elsewhere), 0o700)
		if k.Dir {
			copyTree(target, elsewhere)
		} else {
			b, _ := os.ReadFile(target)
			os.WriteFile(elsewhere, b, 0o600)
		}
		os.RemoveAll(target)
		os.Symlink(elsewhere, target)
	case "symlink-wal":
		// Into wal/: the directory itself for a directory kind (the
		// archive as the log's own directory), else a segment.
		to := filepath.Join(h, "wal")
		if !k.Dir {
			segs := home.FilesOf(kindByName("segment"), h)
			if len(segs) == 0 {
				r.NA = "no segment to link to"
				return r
			}
			to = filepath.Join(h, filepath.FromSlash(segs[len(segs)-1]))
			if to == target {
				to = filepath.Join(h, filepath.FromSlash(segs[0]))
			}
		}
		os.RemoveAll(target)
		os.Symlink(to, target)
	case "unreadable":
		os.Chmod(target, 0)
		if os.Geteuid() == 0 {
			// Root reads anything: the command runs as uid 65534, owner of
			// the case, so the mode bits are what stops it.
			chownTree(m.caseRoot, 65534, 65534)
			nobody = true
		}
	case "disk-full":
		fill(filepath.Join(m.caseRoot, "filler"))
	case "stale-daemon":
		var err error
		listener, err = newTrapListener()
		if err != nil {
			r.Violations = append(r.Violations, "harness: "+err.Error())
			return r
		}
		defer listener.close()
		holder := exec.Command("sleep", "120")
		if err := holder.Start(); err != nil {
			r.Violations = append(r.Violations, "harness: "+err.Error())
			return r
		}
		defer func() { holder.Process.Kill(); holder.Wait() }()
		var info map[string]any
		json.Unmarshal(m.fx.placed["daemon-info"].data, &info)
		if info == nil {
			info = map[string]any{}
		}
		info["pid"], info["listen"] = holder.Process.Pid, listener.addr
		b, _ := json.Marshal(info)
		os.WriteFile(target, b, 0o600)
	}

	before := copies(h, arch) // what the damage left: the command may lose none of it
	outside := filepath.Join(m.caseRoot, "elsewhere")
	outsideBefore := treeState(outside) // a link's target: nothing may write there
	var past []pastRead
	if pastKinds[dc.Kind] {
		past = m.fx.past
	}
	var live func() string
	if dc.Damage == "flip-live" {
		live = func() string { return flipPastDigit(target, m.rng) }
	}
	code, out, pastV := m.runCommand(ctx, dc.Command, h, arch, nobody, past, live)
	r.Exit, r.Output = code, tail(out, 1500)
	r.Violations = append(r.Violations, pastV...)
	for _, l := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(l, "[matrix] reads of the terminal's dropped past: "); ok {
			r.Note = strings.TrimPrefix(r.Note+"; "+n, "; ")
		}
	}
	if nobody {
		chownTree(m.caseRoot, 0, 0)
	}
	os.Chmod(target, 0o700)
	after := copies(h, arch)
	if dc.Command == "restore" { // the restored home is a copy too
		maps.Copy(after, copies(filepath.Join(m.caseRoot, "restored"), ""))
	}
	// Salvage reports the loss it accepts; ship follows the log until the
	// matrix stops it (its exit 0 says it stopped when asked).
	r.Violations = append(r.Violations, checkCase(code, out, dc.Command == "salvage" || dc.Command == "ship", acked, before, after)...)
	if k.Made == home.MadeByReplay {
		r.Violations = append(r.Violations, checkReplayed(dc.Damage, before, after)...)
	}
	if changed := treeChanged(outsideBefore, treeState(outside)); changed != "" {
		r.Violations = append(r.Violations, "wrote outside the home, through the link: "+changed)
	}
	if listener != nil {
		if got := listener.requests(); len(got) > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("sent %d request(s) to a listener that never proved it is the daemon (first: %s)", len(got), got[0]))
		}
	}
	return r
}

var (
	crashRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[|unexpected fault address|\[signal SIG)`)
	})
	fixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("cmlab [a-z]+|--[a-z][a-z-]+|(?m)^ *fix: ") })
)

// checkCase applies the invariants to one command's outcome. acked are the
// events the fixture holds; before and after the events found in any copy
// before and after the command (another home's events a "foreign" copy
// brought in are not this home's: only acked ones count). salvage: the
// command's exit 0 claims no whole history (recover --salvage --apply,
// which reports the loss it accepts; ship, stopped by the matrix).
func checkCase(code int, out string, salvage bool, acked, before, after map[string]uint64) []string {
	var v []string
	switch {
	case code == -2:
		v = append(v, "still running at the case timeout (killed)")
	case code == -1:
		v = append(v, "killed by a signal")
	case code == 2:
		v = append(v, "exit 2 (a Go panic or a fatal runtime error)")
	}
	if crashRE().MatchString(out) {
		v = append(v, "a Go panic or fatal error trace in the output")
	}
	if lost := missing(intersect(before, acked), after); len(lost) > 0 {
		v = append(v, fmt.Sprintf("%d acknowledged event(s) that a copy held before the command are in none after it (seq %s)", len(lost), strings.Join(lost[:min(5, len(lost))], ", ")))
	}
	// Salvage is the fix for what the damage itself destroyed: its exit 0
	// with a loss it reports is right; only losing a copy is not (above).
	if gone := missing(acked, after); code == 0 && len(gone) > 0 && !salvage {
		v = append(v, fmt.Sprintf("exit 0 while %d acknowledged event(s) are in no copy (seq %s)", len(gone), strings.Join(gone[:min(5, len(gone))], ", ")))
	}
	if code > 0 && code != 2 && !fixRE().MatchString(out) {
		v = append(v, fmt.Sprintf("exit %d without naming the command that fixes it", code))
	}
	return v
}

// checkReplayed is the invariant of a home made by cmlab replay --into: a
// replay is history, so while its mark (state/replayed.json) is there,
// damaged or not, no command appends to its log; deleted, the home is one
// like any other. before and after are the events of every copy.
func checkReplayed(damage string, before, after map[string]uint64) []string {
	if n := len(missing(after, before)); n > 0 && damage != "delete" {
		return []string{fmt.Sprintf("a replayed home took a write: %d event(s) appended", n)}
	}
	return nil
}

// intersect is the ids of a that b holds too.
func intersect(a, b map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for id, seq := range a {
		if _, ok := b[id]; ok {
			out[id] = seq
		}
	}
	return out
}

// missing lists the seqs (as text, in order) of the ids of a not in b.
func missing(a, b map[string]uint64) []string {
	var seqs []uint64
	for id, seq := range a {
		if _, ok := b[id]; !ok {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	out := make([]string, len(seqs))
	for i, s := range seqs {
		out[i] = fmt.Sprint(s)
	}
	return out
}

// copies is every event (id → seq) found in any copy: each segment file of
// the home's wal/ and of the archive, read on its own.
func copies(homeDir, archive string) map[string]uint64 {
	ids := map[string]uint64{}
	for _, dir := range []string{filepath.Join(homeDir, "wal"), archive} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if home.KindOf(home.RootArchive, e.Name()) != "archive-segment" {
				continue // segments only (the same names in wal/ and the archive)
			}
			evs, _ := wal.ScanFile(filepath.Join(dir, e.Name()))
			for _, ev := range evs {
				ids[ev.ID] = ev.Seq
			}
		}
	}
	return ids
}

// runCommand runs one command of the matrix on the home h; it returns the
// exit code (-1: a signal, -2: the case timeout), the output and, for
// serve, the answers to the reads of past (checkPast) that broke the rule.
func (m *matrix) runCommand(ctx context.Context, name, h, arch string, nobody bool, past []pastRead, live func() string) (int, string, []string) {
	ctx, cancel := context.WithTimeout(ctx, m.o.CaseTimeout)
	defer cancel()
	if name == "serve" {
		return m.runServe(ctx, h, nobody, past, live)
	}
	if name == "ship" {
		return m.runShip(ctx, h, nobody)
	}
	if name == "restore" {
		id, _ := os.ReadFile(filepath.Join(m.tpl, "home", "state", "home-id")) // the operator knows it
		return m.runArgs(ctx, []string{"restore", "--nats", m.o.NATS, "--home-id", strings.TrimSpace(string(id)),
			"--key-from-archive", arch, "--into", filepath.Join(m.caseRoot, "restored")}, nobody)
	}
	args := map[string][]string{
		"status":     {"status"},
		"recover":    {"recover"},
		"salvage":    {"recover", "--salvage", "--apply"},
		"compact":    {"compact", "--archive", arch, "--resume-window", "1ms"},
		"wal-verify": {"wal", "verify"},
		"rebuild":    {"rebuild"},
		"write":      {"feedback", "add", "--notes", "damage matrix"},
	}[name]
	return m.runArgs(ctx, append(append([]string{}, args...), "--home", h), nobody)
}

// runArgs runs the binary with args (as uid 65534 when nobody).
func (m *matrix) runArgs(ctx context.Context, args []string, nobody bool) (int, string, []string) {
	cmd := exec.CommandContext(ctx, m.bin, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.Dir = m.work
	cmd.Env = append(os.Environ(), "CMLAB_HOME=")
	asUser(cmd, nobody)
	err := cmd.Run()
	return exitOf(ctx, cmd, err), buf.String(), nil
}

// runServe starts serve; once it answers it takes one write through it,
// is asked the reads of past, and is stopped with SIGTERM. With live, once
// the daemon says its verification after start ended, live damages a file
// (and says how) and the reads of past are asked again. A serve that
// refuses to start returns its exit code and output.
func (m *matrix) runServe(ctx context.Context, h string, nobody bool, past []pastRead, live func() string) (int, string, []string) {
	cmd := exec.Command(m.bin, "serve", "--home", h, "--listen", "127.0.0.1:0")
	var buf syncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.Dir = m.work
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	asUser(cmd, nobody)
	if err := cmd.Start(); err != nil {
		return 1, err.Error(), nil
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var pastV []string
	ended := func(err error) (int, string, []string) { return exitOf(ctx, cmd, err), buf.String(), pastV }
	killed := func() (int, string, []string) { // ctx ended: the whole group goes
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return -2, buf.String(), pastV
	}
	// pause waits 25 ms, or returns how the command ended.
	pause := func() func() (int, string, []string) {
		select {
		case err := <-exited:
			return func() (int, string, []string) { return ended(err) }
		case <-ctx.Done():
			return killed
		case <-time.After(25 * time.Millisecond):
			return nil
		}
	}
	for {
		if end := pause(); end != nil {
			return end()
		}
		b, err := os.ReadFile(filepath.Join(h, "state", "daemon.json"))
		var info daemonInfo
		if err != nil || json.Unmarshal(b, &info) != nil || info.Pid != cmd.Process.Pid {
			continue
		}
		tok, _ := os.ReadFile(filepath.Join(h, "state", "token"))
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+info.Listen+"/api/feedback", strings.NewReader(`{"notes":"damage matrix"}`))
		req.Header.Set("X-CM-LAB-TOKEN", strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			fmt.Fprintf(&buf, "\n[matrix] POST /api/feedback: %d %s\n", res.StatusCode, bytes.TrimSpace(body))
		}
		checkReads := func() {
			if len(past) == 0 {
				return
			}
			v, line := checkPast(ctx, "http://"+info.Listen, strings.TrimSpace(string(tok)), past)
			pastV = append(pastV, v...)
			fmt.Fprintf(&buf, "[matrix] %s\n", line)
		}
		checkReads()
		if live != nil {
			for !strings.Contains(buf.String(), "after start") {
				if end := pause(); end != nil {
					return end()
				}
			}
			fmt.Fprintf(&buf, "\n[matrix] after the verification: %s\n", live())
			checkReads()
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return ended(err)
		case <-ctx.Done():
			return killed()
		}
	}
}

func exitOf(ctx context.Context, cmd *exec.Cmd, err error) int {
	if ctx.Err() != nil {
		return -2
	}
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

func asUser(cmd *exec.Cmd, nobody bool) {
	if !nobody {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "HOME="+os.TempDir())
}

func chownTree(root string, uid, gid int) {
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, uid, gid)
		}
		return nil
	})
}

func treeSize(root string) int64 {
	var n int64
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += (fi.Size() + 4095) &^ 4095
		} else if err == nil && fi.IsDir() {
			n += 4096
		}
		return nil
	})
	return n
}

// fill writes to path until the filesystem is full.
func fill(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	for {
		if _, err := f.Write(b); err != nil {
			break
		}
	}
	for { // the last blocks
		if _, err := f.Write(b[:512]); err != nil {
			return
		}
	}
}

// trapListener stands for an impostor on a stale daemon.json's port: it
// records every request it receives and answers nothing useful.
type trapListener struct {
	addr string
	ln   net.Listener
	srv  *http.Server
	mu   sync.Mutex
	got  []string
}

func newTrapListener() (*trapListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &trapListener{addr: ln.Addr().String(), ln: ln}
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		tok := ""
		if r.Header.Get("X-CM-LAB-TOKEN") != "" || r.Header.Get("Authorization") != "" {
			tok = " carrying a token"
		}
		t.got = append(t.got, r.Method+" "+r.URL.Path+tok)
		t.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: 5 * time.Second}
	go t.srv.Serve(ln)
	return t, nil
}

func (t *trapListener) requests() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.got...)
}

func (t *trapListener) close() { t.srv.Close() }

func printDamage(out io.Writer, sum *DamageSummary) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tdamage\tcommand\tfile\texit\tresult\t")
	for _, r := range sum.Results {
		res := "ok"
		if r.Note != "" {
			res += " (past: " + r.Note + ")"
		}
		switch {
		case r.NA != "":
			res = "n/a: " + r.NA
		case len(r.Violations) > 0:
			res = "VIOLATION: " + strings.Join(r.Violations, "; ")
		}
		exit := fmt.Sprint(r.Exit)
		if r.NA != "" {
			exit = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Kind, r.Damage, r.Command, r.File, exit, res)
	}
	tw.Flush()
	for _, r := range sum.Results {
		if len(r.Violations) > 0 {
			fmt.Fprintf(out, "\n--- %s (%s): exit %d\n%s\n", r.DamageCase, r.File, r.Exit, strings.TrimSpace(r.Output))
		}
	}
	fmt.Fprintf(out, "\ndamage matrix: seed %d, cases %d, n/a %d, violations %d\n", sum.Seed, sum.Cases, sum.NA, sum.Violations)
}

// treeState maps every entry below dir (links not followed) to its mode
// and bytes; nil when dir does not exist.
func treeState(dir string) map[string]string {
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	m := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		rel, _ := filepath.Rel(dir, p)
		switch {
		case err != nil:
			m[rel] = "error"
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			m[rel] = "file " + string(b)
		default:
			m[rel] = fi.Mode().Type().String()
		}
		return nil
	})
	return m
}

// treeChanged names the first entry that differs between two treeStates
// ("" when none does).
func treeChanged(before, after map[string]string) string {
	var names []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			names = append(names, k+" removed")
		} else if w != v {
			names = append(names, k+" changed")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			names = append(names, k+" created")
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("%d entries (%s)", len(names), strings.Join(names[:min(3, len(names))], ", "))
}
