package labapi

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

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

var attemptArtifactRE = regexp.MustCompile(`^(sync-report|caption-report|caption-settings)-attempt[0-9]{1,6}\.json$`)

// artifactAllowed is the artifact allow-list of LAB-API.md.
func artifactAllowed(name string) bool {
	switch name {
	case fileScript, fileTimestamps, fileVisuals, fileScore, fileSyncReport, fileCaptionReport,
		"caption-quality.json", "caption-settings.json":
		return true
	}
	return attemptArtifactRE.MatchString(name)
}

// discovered is what a run directory holds now.
type discovered struct {
	video, script, timestamps, visuals, score, syncReport, captionReport string
}

func (d discovered) any() bool {
	return d.video != "" || d.script != "" || d.timestamps != "" || d.visuals != "" ||
		d.score != "" || d.syncReport != "" || d.captionReport != ""
}

func discover(dir string) discovered {
	at := func(name string) string {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
		return ""
	}
	return discovered{video: at(fileVideo), script: at(fileScript), timestamps: at(fileTimestamps),
		visuals: at(fileVisuals), score: at(fileScore), syncReport: at(fileSyncReport), captionReport: at(fileCaptionReport)}
}

func fileStat(p string) *events.FileStat {
	if p == "" {
		return nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	return &events.FileStat{Path: p, SizeBytes: fi.Size(), MtimeMs: fi.ModTime().UnixMilli()}
}

func sameStat(a, b *events.FileStat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
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

// resolveImport applies seed 000's canonicalization and the allowed roots.
func resolveImport(path string, roots []string) (*importTarget, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, NewError(CodeInvalidArgument, "Invalid path: "+err.Error(), "Send an absolute path.")
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, NewError(CodeFileNotFound, "File not found: "+path, "Check the path; import a run's artifacts directory or its video file.").With("path", path)
		}
		return nil, NewError(CodeInvalidArgument, "Cannot read path: "+err.Error(), "Check the path's permissions.").With("path", path)
	}
	t := &importTarget{artifactsDir: abs}
	if !fi.IsDir() {
		t.artifactsDir = filepath.Dir(abs)
		t.videoPath = abs
	}
	real, err := filepath.EvalSymlinks(t.artifactsDir)
	if err != nil {
		return nil, NewError(CodeFileNotFound, "File not found: "+path, "Check the path.").With("path", path)
	}
	t.realDir = real
	if !insideAnyRoot(real, roots) {
		return nil, NewError(CodeForbidden, "Path is outside the allowed roots: "+path,
			"Restart the Lab with --allow-root "+t.artifactsDir+" (or a parent directory) to import from there.").With("allowedRoots", roots)
	}
	rfi, err := os.Stat(real)
	if err != nil || !rfi.IsDir() {
		return nil, NewError(CodeInvalidArgument, "Not a directory: "+t.artifactsDir, "Import an artifacts directory or a video file inside one.")
	}
	return t, nil
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

// insideDir reports whether p's real path lies inside dirReal.
func insideDir(p, dirReal string) (string, bool) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(dirReal, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return real, true
}

// autoMetrics reads a run's normalized metrics from its reports, best
// effort: a report that is missing or unreadable leaves its fields null.
func autoMetrics(d discovered) *events.AutoMetricsSummary {
	s := &events.AutoMetricsSummary{}
	if m := readJSONMap(d.syncReport); m != nil {
		s.SyncRating = score100(m, "rating", "syncRating", "score")
		if l, ok := m["label"].(string); ok {
			s.SyncLabel = l
		} else if l, ok := m["ratingLabel"].(string); ok {
			s.SyncLabel = l
		}
		s.MeanDriftMs = num(m, "meanDriftMs")
		s.MaxDriftMs = num(m, "maxDriftMs")
	}
	if m := readJSONMap(d.captionReport); m != nil {
		s.CaptionOverall = score100(m, "overall", "overallScore", "score")
		s.CaptionCoverageRatio = num(m, "coverageRatio", "captionCoverageRatio")
		s.OcrConfidenceMean = num(m, "ocrConfidenceMean")
	}
	if m := readJSONMap(d.score); m != nil {
		s.ProxyScoreOverall = score100(m, "overall", "overallScore", "score")
	}
	return s
}

func readJSONMap(p string) map[string]any {
	if p == "" {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 16<<20 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func num(m map[string]any, keys ...string) *float64 {
	for _, k := range keys {
		v := m[k]
		if o, ok := v.(map[string]any); ok {
			v = o["score"]
		}
		if f, ok := v.(float64); ok && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return &f
		}
	}
	return nil
}

// score100 normalizes a score to an integer 0–100 (a 0–1 fraction is scaled).
func score100(m map[string]any, keys ...string) *int {
	f := num(m, keys...)
	if f == nil {
		return nil
	}
	v := *f
	if v > 0 && v <= 1 && v != math.Trunc(v) {
		v *= 100
	}
	n := int(math.Round(v))
	if n < 0 || n > 100 {
		return nil
	}
	return &n
}
