package labapi

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/confine"
	"github.com/cmlab/cmlab/events"
)

// Artifact file names a run directory may hold (content-machine's layout).
const (
	fileVideo         = "video.mp4"
	fileScript        = "script.json"
	fileTimestamps    = "timestamps.json"
	fileVisuals       = "visuals.json"
	fileScore         = "score.json"
	fileSyncReport    = "sync-report.json"
	fileCaptionReport = "caption-report.json"
)

var attemptArtifactRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(sync-report|caption-report|caption-settings)-attempt[0-9]{1,6}\.json$`)
})

// artifactAllowed is the artifact allow-list of LAB-API.md.
func artifactAllowed(name string) bool {
	switch name {
	case fileScript, fileTimestamps, fileVisuals, fileScore, fileSyncReport, fileCaptionReport,
		"caption-quality.json", "caption-settings.json":
		return true
	}
	return attemptArtifactRE().MatchString(name)
}

// discovered is what a run directory holds now: the paths (under the
// artifacts directory as imported) of the artifacts that are regular files
// beneath its real path, reached through no symlink, or through a symlink
// whose target lies beneath the run's real path or an allowed root
// (package confine, OpenLinked; issue 28 A2).
type discovered struct {
	root                                                                 string   // the real path the files were found beneath
	roots                                                                []string // the allowed roots a symlink may point into
	video, script, timestamps, visuals, score, syncReport, captionReport string
	// refused names each artifact that is a symlink pointing outside the
	// run folder and the allowed roots, with why it was not taken.
	refused map[string]string
}

func (d discovered) any() bool {
	return d.video != "" || d.script != "" || d.timestamps != "" || d.visuals != "" ||
		d.score != "" || d.syncReport != "" || d.captionReport != ""
}

// discover finds a run directory's artifacts by content-machine's rules
// (src/lab/metrics/discover.ts): script, timestamps, visuals and score
// under their fixed names; the sync report is the first of
// sync-report.json, sync-report-attempt1.json and the caption report the
// first of caption-report.json, caption-report-attempt1.json,
// caption-quality.json present; the video is video.mp4, else the first
// file, by name, whose name ends in .mp4 in any case (content-machine
// takes any entry so named; a directory so named is skipped here).
// dir is the artifacts directory as imported, realDir its real path: the
// paths returned are under dir, but whether a file is there is decided by
// opening it beneath realDir through package confine (a regular file,
// reached through no symlink but a last one into realDir or roots), and
// reports are read the same way. A report is listed only if it can be
// opened so: never one the API would not serve.
func discover(dir, realDir string, roots []string) discovered {
	present, mp4s, _ := scanRunDir(realDir) // mp4s sorted by name, as Node's readdir (rundir.go)
	d := discovered{root: realDir, roots: roots}
	file := func(name string) string {
		_, err := confine.StatLinked(realDir, name, roots)
		if err == nil {
			return filepath.Join(dir, name)
		}
		if errors.Is(err, confine.ErrLinkOutside) {
			if d.refused == nil {
				d.refused = map[string]string{}
			}
			d.refused[name] = "symlink points outside the run folder and the allowed roots; not read or served (copy the file into the run folder, or restart the Lab with --allow-root naming its folder)"
		}
		return ""
	}
	first := func(names ...string) string {
		for _, n := range names {
			if present[n] {
				return file(n)
			}
		}
		return ""
	}
	d.script, d.timestamps, d.visuals, d.score = file(fileScript), file(fileTimestamps), file(fileVisuals), file(fileScore)
	d.syncReport = first(syncReportNames...)
	d.captionReport = first(captionReportNames...)
	d.video = file(fileVideo)
	for _, name := range mp4s {
		if d.video != "" {
			break
		}
		d.video = file(name)
	}
	return d
}

// isMP4 reports whether name ends in .mp4, in any case.
func isMP4(name string) bool {
	return len(name) >= 4 && strings.EqualFold(name[len(name)-4:], ".mp4")
}

// fileStat is the fingerprint of p, an artifact directly inside the run
// directory whose real path is realDir; nil when it is not a regular file
// reached through no symlink.
func fileStat(realDir, p string, roots []string) *events.FileStat {
	if p == "" {
		return nil
	}
	fi, err := confine.StatLinked(realDir, filepath.Base(p), roots)
	if err != nil {
		return nil
	}
	return &events.FileStat{Path: p, SizeBytes: fi.Size(), MtimeMs: fi.ModTime().UnixMilli(), MtimeNs: fi.ModTime().UnixNano()}
}

// sameStat compares as content-machine does (size and mtimeMs, which
// keeps the sub-millisecond part): at nanosecond precision when both
// records have it, else (a run recorded before it was kept) in whole
// milliseconds.
func sameStat(a, b *events.FileStat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.MtimeNs != 0 && b.MtimeNs != 0 {
		return a.SizeBytes == b.SizeBytes && a.NodeMtimeMs() == b.NodeMtimeMs()
	}
	return a.SizeBytes == b.SizeBytes && a.MtimeMs == b.MtimeMs
}

func sameFingerprint(a, b *events.RunFingerprint) bool {
	if a == nil {
		a = &events.RunFingerprint{}
	}
	if b == nil {
		b = &events.RunFingerprint{}
	}
	return sameStat(a.Video, b.Video) && sameStat(a.Script, b.Script)
}

// importTarget is a validated import path.
type importTarget struct {
	artifactsDir string // absolute, as given (symlinks kept)
	realDir      string // realpath of artifactsDir
	videoPath    string // the file given, when a file was given
}

// resolveImport applies seed 000's canonicalization and the allowed roots,
// in content-machine's order (src/lab/services/runs.ts): the path must
// exist, a file stands for its directory (and is the video when its name
// ends in .mp4), then the directory's real path must lie in a root.
func resolveImport(path string, roots []string) (*importTarget, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, NewError(CodeInvalidArgument, "Invalid path: "+err.Error(), "Send an absolute path.")
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, NewError(CodeFileNotFound, "Path not found: "+abs, "Paste an absolute path to an artifacts directory or a rendered .mp4 file.").With("path", abs)
		}
		return nil, NewError(CodeInvalidArgument, "Cannot read path: "+err.Error(), "Check the path's permissions.").With("path", abs)
	}
	t := &importTarget{artifactsDir: abs}
	if !fi.IsDir() {
		t.artifactsDir = filepath.Dir(abs)
		if isMP4(abs) {
			t.videoPath = abs
		}
	}
	real, err := filepath.EvalSymlinks(t.artifactsDir)
	if err != nil {
		return nil, NewError(CodeFileNotFound, "Path not found: "+abs, "Check the path.").With("path", abs)
	}
	t.realDir = real
	rfi, err := os.Stat(real)
	if err != nil || !rfi.IsDir() {
		return nil, NewError(CodeInvalidArgument, "Not a directory: "+t.artifactsDir, "Import an artifacts directory or a video file path inside an artifacts directory.")
	}
	if !insideAnyRoot(real, roots) {
		return nil, NewError(CodeForbidden, "Path is outside allowed roots: "+t.artifactsDir,
			"Restart the Lab with --allow-root "+t.artifactsDir+" (or a parent directory) to import from there.").With("path", t.artifactsDir).With("allowedRoots", roots)
	}
	return t, nil
}

// scriptTopic is the topic content-machine reads from script.json at
// import (src/lab/services/runs.ts): meta.topic (metadata.topic when meta
// is absent or null), else title; trimmed; "" when none.
func scriptTopic(d discovered) string {
	m, ok := readJSONMap(d, d.script)
	if !ok {
		return ""
	}
	meta := m["meta"]
	if meta == nil {
		meta = m["metadata"]
	}
	if o, ok := meta.(map[string]any); ok {
		if t, ok := o["topic"].(string); ok && strings.TrimSpace(t) != "" {
			return strings.TrimSpace(t)
		}
	}
	if t, ok := m["title"].(string); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func insideAnyRoot(real string, roots []string) bool {
	for _, root := range roots {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rr, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// autoMetrics reads a run's normalized metrics from its reports as
// content-machine does (src/lab/metrics/extract.ts): a report that is
// missing, unreadable or not of the expected shape yields nothing; a sync
// report {rating, ratingLabel?, metrics?{meanDriftMs?, maxDriftMs?}} yields
// syncRating (rounded, clamped to 0–100), syncLabel, meanDriftMs and
// maxDriftMs; a caption report {captionQuality?{overall?{score},
// coverage?{coverageRatio}, ocrConfidence?{mean}}} yields captionOverall
// (score 0..1 ×100), captionCoverageRatio and ocrConfidenceMean; a score.json
// of the score stage's shape yields proxyScoreOverall (overall ×100).
func autoMetrics(d discovered) *events.AutoMetricsSummary {
	s := &events.AutoMetricsSummary{Read: &events.MetricsRead{}}
	if m, ok := readJSONMap(d, d.syncReport); ok {
		var c reportShape
		rating, label, metrics := c.number(m, "rating"), c.optString(m, "ratingLabel"), c.optObject(m, "metrics")
		mean, max := c.optNumber(metrics, "meanDriftMs"), c.optNumber(metrics, "maxDriftMs")
		if !c.bad {
			s.Read.Sync = true
			s.SyncRating = round0to100(rating)
			s.SyncLabel = label
			s.MeanDriftMs, s.MaxDriftMs = mean, max
		}
	}
	if m, ok := readJSONMap(d, d.captionReport); ok {
		var c reportShape
		cq := c.optObject(m, "captionQuality")
		overall, coverage, ocr := c.optObject(cq, "overall"), c.optObject(cq, "coverage"), c.optObject(cq, "ocrConfidence")
		score, ratio, mean := c.numberIn(overall, "score"), c.numberIn(coverage, "coverageRatio"), c.numberIn(ocr, "mean")
		if !c.bad {
			s.Read.Caption = true
			if score != nil {
				s.CaptionOverall = round0to100(*score * 100)
			}
			s.CaptionCoverageRatio, s.OcrConfidenceMean = ratio, mean
		}
	}
	if m, ok := readJSONMap(d, d.score); ok {
		if overall, ok := scoreOverall(m); ok {
			s.ProxyScoreOverall = round0to100(overall * 100)
		}
	}
	return s
}

// readJSONMap reads a JSON object (at most 16 MiB) from the report p, a
// file directly inside the run directory d was discovered in, through
// package confine (OpenLinked).
func readJSONMap(d discovered, p string) (map[string]any, bool) {
	if p == "" {
		return nil, false
	}
	b, err := confine.ReadFileLinked(d.root, filepath.Base(p), d.roots, 16<<20, nil)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// reportShape reads a report's fields as content-machine's schema does
// (zod): each read returns the field, and marks the report bad when the
// field is not of its shape; a bad report yields none of its metrics.
type reportShape struct{ bad bool }

// number is m[key], which must be a number.
func (c *reportShape) number(m map[string]any, key string) float64 {
	f, ok := m[key].(float64)
	c.bad = c.bad || !ok
	return f
}

// optString: absent is "", a string is itself, anything else is bad.
func (c *reportShape) optString(m map[string]any, key string) string {
	v, present := m[key]
	if !present {
		return ""
	}
	s, ok := v.(string)
	c.bad = c.bad || !ok
	return s
}

// optObject: absent (or m nil) is nil, an object is itself, anything else
// (null included) is bad, as an optional zod object.
func (c *reportShape) optObject(m map[string]any, key string) map[string]any {
	v, present := m[key]
	if !present {
		return nil
	}
	o, ok := v.(map[string]any)
	c.bad = c.bad || !ok
	return o
}

// optNumber: absent (or m nil) is nil, a number is &it, anything else is
// bad.
func (c *reportShape) optNumber(m map[string]any, key string) *float64 {
	if _, present := m[key]; !present {
		return nil
	}
	return c.numberIn(m, key)
}

// numberIn: with m nil (its object absent) nil; else m[key] must be a
// number.
func (c *reportShape) numberIn(m map[string]any, key string) *float64 {
	if m == nil {
		return nil
	}
	f, ok := m[key].(float64)
	if !ok {
		c.bad = true
		return nil
	}
	return &f
}

// scoreOverall checks m against the score stage's output shape
// (content-machine's ScoreOutputSchema) and returns its overall.
func scoreOverall(m map[string]any) (float64, bool) {
	in, ok := m["input"].(map[string]any)
	if !ok {
		return 0, false
	}
	if _, ok := in["scriptPath"].(string); !ok {
		return 0, false
	}
	if v, present := in["packagePath"]; present {
		if _, ok := v.(string); !ok {
			return 0, false
		}
	}
	if v, present := m["schemaVersion"]; present {
		if _, ok := v.(string); !ok {
			return 0, false
		}
	}
	if _, ok := m["passed"].(bool); !ok {
		return 0, false
	}
	overall, ok := m["overall"].(float64)
	if !ok || overall < 0 || overall > 1 {
		return 0, false
	}
	dims, ok := m["dimensions"].(map[string]any)
	if !ok {
		return 0, false
	}
	for _, v := range dims {
		if f, ok := v.(float64); !ok || f < 0 || f > 1 {
			return 0, false
		}
	}
	checks, ok := m["checks"].([]any)
	if !ok {
		return 0, false
	}
	for _, c := range checks {
		o, ok := c.(map[string]any)
		if !ok {
			return 0, false
		}
		_, ok1 := o["checkId"].(string)
		_, ok2 := o["passed"].(bool)
		_, ok3 := o["message"].(string)
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		if sev, present := o["severity"]; present && sev != "error" && sev != "warning" && sev != "info" {
			return 0, false
		}
	}
	created, ok := m["createdAt"].(string)
	if !ok {
		return 0, false
	}
	if _, err := time.Parse(time.RFC3339Nano, created); err != nil {
		return 0, false
	}
	return overall, true
}

// round0to100 clamps x to 0–100 and rounds it (half up, as Math.round).
func round0to100(x float64) *int {
	n := int(math.Floor(math.Max(0, math.Min(100, x)) + 0.5))
	return &n
}
