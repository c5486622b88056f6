package home

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Kinds is every kind of file a home can hold, in one place. The damage
// matrix (cmlab torture --damage, package fuzz/torture) damages every
// kind listed here in every way, runs every command that opens a home on
// the result and checks its invariants; a test there fails when a file of
// a made home matches no kind. A new file is not done until it is listed
// here (with how one comes to exist) and the matrix passes on it.
//
// Pattern is a path.Match glob relative to the home, forward slashes;
// the kinds of RootArchive are relative to the compaction archive
// directory (outside the home: wal/MANIFEST names it). Made says which
// step of building a home makes one exist (the Made* constants).
var Kinds = []Kind{
	{Name: "segment", Pattern: "wal/[0-9]*", Made: MadeByWrites, Doc: "a log segment (package wal)"},
	{Name: "manifest", Pattern: "wal/MANIFEST", Made: MadeByCompact, Doc: "the log's compaction manifest: removed ranges and where they went"},
	{Name: "verified", Pattern: "wal/VERIFIED", Made: MadeByVerify, Doc: "the sealed segments the last verification read whole"},
	{Name: "wal-lock", Pattern: "wal/LOCK", Made: MadeByWrites, Doc: "the log's lock file"},
	{Name: "archive-record", Pattern: "ARCHIVE", Root: RootArchive, Made: MadeByCompact, Doc: "which home an archive belongs to and which segments it holds (package wal)"},
	{Name: "archive-ship-key", Pattern: "ship-key", Root: RootArchive, Made: MadeByShip, Doc: "the archive's copy of state/ship-key, for cmlab restore --key-from-archive"},
	{Name: "archive-dir", Pattern: ".", Root: RootArchive, Dir: true, Made: MadeByCompact, Doc: "the compaction archive directory"},
	{Name: "archive-segment", Pattern: "[0-9]*", Root: RootArchive, Made: MadeByCompact, Doc: "a segment moved to the archive"},
	{Name: "snapshot", Pattern: "state/snapshots/*.msgpack", Made: MadeByStop, Doc: "a read model's snapshot (steps, retention, pty)"},
	{Name: "labstore", Pattern: "state/labstore.db", Made: MadeByWrites, Doc: "the Lab store: runs, experiments and sessions (bbolt, package labapi; rebuilt from the log when untrusted)"},
	{Name: "reqindex", Pattern: "state/reqindex.db", Made: MadeByWrites, Doc: "the request-id index (bbolt)"},
	{Name: "checkpoint", Pattern: "state/checkpoint.json", Made: MadeByWrites, Doc: "the views' checkpoint"},
	{Name: "sealed-views", Pattern: "state/sealed-views.jsonl", Made: MadeByWrites, Doc: "the sealed terminal block views' records, vouched for by the checkpoint (package projections)"},
	{Name: "token", Pattern: "state/token", Made: MadeByWrites, Doc: "the operator token"},
	{Name: "daemon-info", Pattern: "state/daemon.json", Made: MadeByKill, Doc: "the running daemon's pid, address and nonce (stale after a kill)"},
	{Name: "daemon-log", Pattern: "state/daemon.log*", Made: MadeByWrites, Doc: "the daemon's log"},
	{Name: "daemon-lock", Pattern: "state/daemon.lock", Made: MadeByWrites, Doc: "locked by the running daemon for its life: what makes state/daemon.json live (package discovery)"},
	{Name: "daemon-socket", Pattern: "state/daemon.sock", Made: MadeByLiveDaemon, Doc: "the daemon's Unix socket, which the CLI dials (package discovery)"},
	{Name: "regen-marker", Pattern: "state/regen.json", Made: MadeByInterruptedSwap, Doc: "a view swap in progress (projections.Regenerate)"},
	{Name: "views-stale", Pattern: "state/views-stale", Made: MadeBySalvage, Doc: "the views wait for a regeneration after a salvage"},
	{Name: "resume-log", Pattern: "state/resume/*.log", Made: MadeByResume, Doc: "output of a step resumed at start-up"},
	{Name: "step-output", Pattern: "state/step-output/*/*.out", Made: MadeByRun, Doc: "a step's output kept by cmlab run for its reviewer (package steps)"},
	{Name: "adopted-report", Pattern: "state/adopted.json", Made: MadeByAdopt, Doc: "what the first open took from a content-machine home (engine/adopt.go); a report, nothing reads it to decide"},
	{Name: "replayed-marker", Pattern: "state/replayed.json", Made: MadeByReplay, Doc: "marks a home made by cmlab replay --into"},
	{Name: "ship-cursor", Pattern: "state/ship.json", Made: MadeByShip, Doc: "how far the log is shipped to JetStream"},
	{Name: "home-id", Pattern: "state/home-id", Made: MadeByCompact, Doc: "the home's id, recorded by archives and carried by shipped events"},
	{Name: "ship-lock", Pattern: "state/ship.lock", Made: MadeByShip, Doc: "held (flock) by the one cmlab ship of the home"},
	{Name: "ship-key", Pattern: "state/ship-key", Made: MadeByShip, Doc: "the secret shipped events are signed with (package ship)"},
	{Name: "view-feedback", Pattern: "feedback/feedback.jsonl", Made: MadeByWrites, Doc: "the feedback view (other programs append too)"},
	{Name: "view-lab", Pattern: "lab/*.jsonl", Made: MadeByWrites, Doc: "runs and experiments views"},
	{Name: "view-session", Pattern: "lab/sessions/*/*.jsonl", Made: MadeByWrites, Doc: "a Lab session's events and idempotency views"},
	{Name: "view-steps", Pattern: "steps/steps.jsonl", Made: MadeByWrites, Doc: "the steps view"},
	{Name: "export", Pattern: "lab/exports/*", Made: MadeByExport, Doc: "a session export"},
	{Name: "view-pty", Pattern: "pty/*/*.jsonl", Made: MadeByPty, Doc: "a conversation's events and blocks views"},
	{Name: "spool", Pattern: "pty/*/output.spool", Made: MadeByPty, Doc: "a conversation's terminal spool"},
	{Name: "block-file", Pattern: "pty/*/blocks/*.out", Made: MadeByPty, Doc: "one terminal block's output"},
	{Name: "quarantine", Pattern: "quarantine/*", Made: MadeByForeignLine, Doc: "bytes set aside by repair, salvage or foreign-line set-aside"},

	// The home's directories (CheckDirs): a directory replaced by a link
	// must never be written through.
	{Name: "dir-wal", Pattern: "wal", Dir: true, Made: MadeByWrites, Doc: "the log's directory"},
	{Name: "dir-state", Pattern: "state", Dir: true, Made: MadeByWrites, Doc: "the state directory"},
	{Name: "dir-snapshots", Pattern: "state/snapshots", Dir: true, Made: MadeByStop, Doc: "the read models' snapshots"},
	{Name: "dir-resume", Pattern: "state/resume", Dir: true, Made: MadeByResume, Doc: "output of steps resumed at start-up"},
	{Name: "dir-step-outputs", Pattern: "state/step-output", Dir: true, Made: MadeByRun, Doc: "the steps' outputs"},
	{Name: "dir-step-output", Pattern: "state/step-output/*", Dir: true, Made: MadeByRun, Doc: "one mandate's step outputs"},
	{Name: "dir-quarantine", Pattern: "quarantine", Dir: true, Made: MadeByWrites, Doc: "bytes set aside"},
	{Name: "dir-feedback", Pattern: "feedback", Dir: true, Made: MadeByWrites, Doc: "the feedback view's directory"},
	{Name: "dir-lab", Pattern: "lab", Dir: true, Made: MadeByWrites, Doc: "the Lab's views, sessions and exports"},
	{Name: "dir-sessions", Pattern: "lab/sessions", Dir: true, Made: MadeByWrites, Doc: "the Lab sessions' directories"},
	{Name: "dir-session", Pattern: "lab/sessions/*", Dir: true, Made: MadeByWrites, Doc: "one Lab session's views"},
	{Name: "dir-exports", Pattern: "lab/exports", Dir: true, Made: MadeByWrites, Doc: "the session exports"},
	{Name: "dir-steps", Pattern: "steps", Dir: true, Made: MadeByWrites, Doc: "the steps view's directory"},
	{Name: "dir-pty", Pattern: "pty", Dir: true, Made: MadeByWrites, Doc: "the terminal's conversations"},
	{Name: "dir-conversation", Pattern: "pty/*", Dir: true, Made: MadeByPty, Doc: "one conversation's spool and views"},
	{Name: "dir-blocks", Pattern: "pty/*/blocks", Dir: true, Made: MadeByPty, Doc: "one conversation's block files"},
}

// Where a kind's pattern is rooted.
const (
	RootHome    = ""        // the home directory
	RootArchive = "archive" // the compaction archive directory
)

// How a file of a kind comes to exist (Kind.Made): the step of building
// a home that makes one.
const (
	MadeByWrites          = "writes"           // serve and any write through it
	MadeByStop            = "stop"             // a daemon stopped cleanly (final checkpoint)
	MadeByPty             = "pty"              // a terminal block run through the daemon
	MadeByExport          = "export"           // POST /api/export
	MadeByForeignLine     = "foreign-line"     // another program's malformed line in feedback.jsonl
	MadeByCompact         = "compact"          // cmlab compact --archive DIR
	MadeByVerify          = "verify"           // cmlab wal verify
	MadeByKill            = "kill"             // a daemon killed with SIGKILL
	MadeByInterruptedSwap = "interrupted-swap" // a crash inside a view regeneration's swap
	MadeBySalvage         = "salvage"          // a salvage that changed the log, before the views are regenerated
	MadeByResume          = "resume"           // a mandate resumed at daemon start-up
	MadeByReplay          = "replay"           // cmlab replay --into
	MadeByShip            = "ship"             // cmlab ship to a JetStream stream
	MadeByLiveDaemon      = "live-daemon"      // exists while a daemon runs (and after a SIGKILL)
	MadeByAdopt           = "adopt"            // the first open of a home content-machine's Lab wrote
	MadeByRun             = "run"              // a mandate run by cmlab run
)

// Kind is one kind of file of a home (see Kinds).
type Kind struct {
	Name    string
	Pattern string
	Root    string // RootHome or RootArchive
	Dir     bool   // the pattern names a directory
	Made    string
	Doc     string
}

// Match reports whether rel (relative to the kind's root, forward
// slashes) is a file of the kind.
func (k Kind) Match(rel string) bool {
	ok, err := path.Match(k.Pattern, rel)
	return err == nil && ok
}

// KindOf is the first kind of root whose pattern rel matches ("" for
// none).
func KindOf(root, rel string) string {
	for _, k := range Kinds {
		if k.Root == root && !k.Dir && k.Match(rel) {
			return k.Name
		}
	}
	return ""
}

// FilesOf lists the files of kind k under dir (the home, or the archive
// for RootArchive), relative to dir with forward slashes, sorted; for a
// directory kind, the directories (not links) its pattern matches.
func FilesOf(k Kind, dir string) []string {
	if k.Dir && k.Pattern == "." {
		return []string{k.Pattern}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(k.Pattern)))
	var out []string
	for _, m := range matches {
		if fi, err := os.Lstat(m); k.Dir && (err != nil || !fi.IsDir()) {
			continue
		}
		rel, err := filepath.Rel(dir, m)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		out = append(out, filepath.ToSlash(rel))
	}
	sort.Strings(out)
	return out
}
