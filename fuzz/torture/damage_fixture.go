package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/home"
)

// fixture is a home built by the real binary with a file of every kind it
// can make (home.Kinds), its compaction archive beside it, and the bytes of
// the kinds that are placed rather than made in place.
type fixture struct {
	root    string // holds home/, archive/, runs/
	home    string
	archive string
	runs    string
	// placed: kind name → relative path and bytes, put into a case's home
	// before it is damaged (a stale daemon.json, an interrupted swap's
	// marker, a salvage's views-stale flag).
	placed map[string]placedFile
	// made: kinds the fixture holds at least one file of.
	made map[string]bool
	// past: the reads of fx's dropped past and their answers
	// (damage_past.go); nil when the fixture ran no blocks of the past.
	past []pastRead
	// variants: the homes beside home/ where the kinds of a Made are
	// damaged, because only such a home makes them or leaves them where a
	// command writes them again: Made → the home's directory name under
	// root (a mandate resumed at start-up, damage_resume.go; a home made
	// by cmlab replay --into).
	variants map[string]string
}

type placedFile struct {
	rel  string
	data []byte
}

// naKinds are kinds the matrix cannot make yet, with why; every other
// kind of home.Kinds must be made by buildFixture (TestDamageKindsCovered).
// The ship kinds are made when the matrix has a NATS server (naKind).
var naKinds = map[string]string{
	home.MadeByShip:       "needs a NATS JetStream stream (cmlab ship): pass --nats URL",
	home.MadeByLiveDaemon: "a Unix socket holds no bytes to damage; every serve replaces a stale one (discovery.Listen) and every dial checks its peer with SO_PEERCRED (TestDaemonSocketPeerChecked, TestImpostorNeverGetsOperatorToken)",
	home.MadeByAdopt:      "only in a home content-machine wrote before cmlab first opened it (engine/adopt.go; TestAdoptSetsAsideWhatItCannotRead damages its inputs); the report itself is read by status only, which ignores an unreadable one",
}

// buildFixture makes a home under root with bin: writes through a daemon
// (feedback with request ids, a run import, a terminal block, an export, a
// malformed foreign feedback line set aside to quarantine/), a clean stop,
// a daemon killed with SIGKILL (its stale state/daemon.json kept aside),
// another clean start and stop, compaction into root/archive and a wal
// verify; and beside it the home of a mandate resumed at start-up
// (damage_resume.go) and a home made by cmlab replay --into. posts is the number of feedback posts (more: more segments).
// nats, when set, is the URL of a NATS server with JetStream the home is
// shipped to (damage_ship.go).
func buildFixture(ctx context.Context, bin, root string, posts int, nats string) (*fixture, error) {
	return buildFixtureOf(ctx, bin, root, posts, false, nats)
}

// buildFixtureOf is buildFixture; past: the terminal conversation runs
// past its history bound and the answers of reads of its dropped past are
// recorded (damage_past.go).
func buildFixtureOf(ctx context.Context, bin, root string, posts int, past bool, nats string) (*fixture, error) {
	f := &fixture{root: root, home: filepath.Join(root, "home"), archive: filepath.Join(root, "archive"),
		runs: filepath.Join(root, "runs"), placed: map[string]placedFile{}, made: map[string]bool{}, variants: map[string]string{}}
	if err := os.MkdirAll(f.home, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(f.runs, 0o700); err != nil {
		return nil, err
	}
	run := filepath.Join(f.runs, "run1")
	os.MkdirAll(run, 0o700)
	os.WriteFile(filepath.Join(run, "video.mp4"), []byte("not really a video"), 0o600)
	os.WriteFile(filepath.Join(run, "script.json"), []byte(`{"scenes":[]}`), 0o600)

	serveArgs := []string{"--segment-size", "8192"}
	d, err := startDaemon(ctx, bin, f.home, []string{f.runs}, nil, serveArgs...)
	if err != nil {
		return nil, err
	}
	c := newClient(d)
	must := func(r reply, what string) error {
		if !r.ok() {
			return fmt.Errorf("fixture: %s: %s", what, r)
		}
		return nil
	}
	var errs []error
	for i := range posts {
		errs = append(errs, must(c.post(ctx, "/api/feedback", "fx-"+strconv.Itoa(i), map[string]any{
			"notes": strings.Repeat("fixture note ", 8) + strconv.Itoa(i), "sessionId": "lab_fixture"}), "POST /api/feedback"))
	}
	errs = append(errs, must(c.post(ctx, "/api/runs/import", "fx-import", map[string]any{"path": run, "topic": "fixture"}), "import"))
	errs = append(errs, must(c.post(ctx, "/api/pty/fx/exec_block", "", map[string]string{"cmd": "echo fixture; seq 1 50"}), "exec_block"))
	errs = append(errs, must(c.post(ctx, "/api/pty/fx/wait_prompt", "", map[string]any{"from_cursor": 0, "timeout_ms": 20000}), "wait_prompt"))
	if past {
		errs = append(errs, runPast(ctx, c))
	}
	var cfg struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(c.get(ctx, "/api/config").body, &cfg)
	// A mandate whose one step ran to completion (steps/steps.jsonl).
	errs = append(errs, must(c.post(ctx, "/api/steps/fx-m/plan", "", map[string]any{"steps": []map[string]string{
		{"step_id": "s1", "tool": "sh", "params_hash": hash64('1'), "idem_key": "fx-m-s1"}}}), "step plan"))
	errs = append(errs, must(c.post(ctx, "/api/steps/fx-m/executing", "", map[string]any{"step_id": "s1", "idem_key": "fx-m-s1", "observed_pre_hash": hash64('a')}), "step executing"))
	errs = append(errs, must(c.post(ctx, "/api/steps/fx-m/completed", "", map[string]any{"step_id": "s1", "post_hash": hash64('b'), "result_hash": hash64('c')}), "step completed"))
	errs = append(errs, must(c.post(ctx, "/api/export", "", map[string]any{"sessionId": cfg.SessionID}), "export"))
	if err := errors.Join(errs...); err != nil {
		d.kill()
		return nil, err
	}
	// Another program's malformed line, set aside by the next write.
	if fh, err := os.OpenFile(filepath.Join(f.home, "feedback", "feedback.jsonl"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fh.WriteString("{not a feedback entry\n")
		fh.Close()
	}
	if err := must(c.post(ctx, "/api/feedback", "fx-after-foreign", map[string]any{"notes": "after"}), "POST /api/feedback"); err != nil {
		d.kill()
		return nil, err
	}
	if err := d.stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("fixture: stop: %w\n%s", err, tail(d.log.String(), 2000))
	}
	// A mandate run by 'cmlab run' keeps its step's output in
	// state/step-output/<mandate>/<step>.out.
	mandate := filepath.Join(root, "mandate.json")
	os.WriteFile(mandate, []byte(`{"id":"fx-run","name":"fixture","steps":[{"id":"s1","argv":["sh","-c","echo step output"],"cwd":"."}]}`), 0o600)
	if out, err := exec.CommandContext(ctx, bin, "--home", f.home, "run", mandate).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fixture: cmlab run: %v\n%s", err, out)
	}

	// A daemon killed with SIGKILL leaves state/daemon.json behind.
	d, err = startDaemon(ctx, bin, f.home, []string{f.runs}, nil, serveArgs...)
	if err != nil {
		return nil, err
	}
	d.kill()
	dj := filepath.Join(f.home, "state", "daemon.json")
	if b, err := os.ReadFile(dj); err == nil {
		f.placed["daemon-info"] = placedFile{rel: "state/daemon.json", data: b}
		os.Remove(dj)
	}
	d, err = startDaemon(ctx, bin, f.home, []string{f.runs}, nil, serveArgs...)
	if err != nil {
		return nil, err
	}
	if past {
		if f.past, err = recordPast(ctx, newClient(d)); err != nil {
			d.kill()
			return nil, err
		}
	}
	if err := d.stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("fixture: stop: %w", err)
	}
	// Shipped before compaction, so that the archive keeps the ship key.
	if nats != "" {
		if err := shipCaught(ctx, bin, f.home, nats); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{
		{"compact", "--home", f.home, "--archive", f.archive, "--resume-window", "1ms"},
		{"wal", "verify", "--home", f.home},
		// A home made by replay --into: the past up to seq 20, with its
		// state/replayed.json; served read-only, it takes no write.
		{"replay", "--home", f.home, "--to", "20", "--into", filepath.Join(root, replayHomeName)},
	} {
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("fixture: cmlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if nats != "" { // and whatever compaction appended
		if err := shipCaught(ctx, bin, f.home, nats); err != nil {
			return nil, err
		}
	}
	if err := buildResumeHome(ctx, bin, root); err != nil {
		return nil, err
	}
	f.variants[home.MadeByResume] = resumeHomeName
	f.variants[home.MadeByReplay] = replayHomeName

	// Placed: the marker of a view swap a crash interrupted after its last
	// rename, and the flag a salvage leaves until the views are regenerated.
	f.placed["regen-marker"] = placedFile{rel: "state/regen.json", data: []byte(`{"version":1,"moves":[],"removes":[]}` + "\n")}
	f.placed["views-stale"] = placedFile{rel: "state/views-stale", data: []byte("salvage\n")}

	for _, k := range home.Kinds {
		if len(home.FilesOf(k, f.dirOf(k))) > 0 && (!k.Dir || dirExists(f.dirOf(k))) {
			f.made[k.Name] = true
		}
		if _, ok := f.placed[k.Name]; ok {
			f.made[k.Name] = true
		}
	}
	return f, nil
}

// replayHomeName is the directory, under the fixture's root, of the home
// made by cmlab replay --into.
const replayHomeName = "replayed"

// naKind says why the matrix cannot damage kind k (ok false: it can);
// nats: it has a NATS server.
func naKind(k home.Kind, nats bool) (string, bool) {
	if k.Made == home.MadeByShip && nats {
		return "", false
	}
	why, ok := naKinds[k.Made]
	return why, ok
}

// dirOf is the directory a kind's pattern is relative to.
func (f *fixture) dirOf(k home.Kind) string {
	if k.Root == home.RootArchive {
		return f.archive
	}
	if v, ok := f.variants[k.Made]; ok {
		return filepath.Join(f.root, v)
	}
	return f.home
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// copyTree copies the directory src to dst (files, directories and
// symlinks as they are), keeping modes.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case fi.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, fi.Mode().Perm())
		}
		return nil // sockets, FIFOs: not part of a home
	})
}
