package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Adoption event types (issue 28 A1): the lines of a content-machine Lab
// home that cmlab takes into its log the first time it opens the home
// (package engine, adopt.go). Each carries one line of their store byte
// for byte; the projector writes it back as it was, so the views are the
// files content-machine wrote. Feedback lines are adopted as
// feedback.ingested (FeedbackIngested), which already keeps raw bytes.
// Stream: AdoptStream.
const (
	TypeRunAdopted        = "run.adopted"
	TypeExperimentAdopted = "experiment.adopted"
	TypeSessionAdopted    = "session.adopted"
)

// AdoptStream is the stream of adoption events: not a Lab session, so
// adopting writes no lab/sessions/<s>/events.jsonl line of its own.
const AdoptStream = "adopt"

// RunAdopted is one line of a content-machine lab/runs.jsonl. Raw is the
// line without its '\n'; Offset is where it started in the file it was
// read from (the report names it; the projector appends).
type RunAdopted struct {
	Raw    []byte `json:"raw"`
	Offset int64  `json:"offset"`
}

// ExperimentAdopted is one line of a content-machine lab/experiments.jsonl
// (one record of an experiment: the last per experimentId wins).
type ExperimentAdopted struct {
	Raw    []byte `json:"raw"`
	Offset int64  `json:"offset"`
}

// SessionAdopted is one line of lab/sessions/<Session>/<File> (File is
// SessionFiles' one): content-machine's idempotency records and, where
// present, a session's events.
type SessionAdopted struct {
	Session string `json:"session"`
	File    string `json:"file"`
	Raw     []byte `json:"raw"`
	Offset  int64  `json:"offset"`
}

// SessionFiles are the files of a Lab session directory that adoption
// takes (the views cmlab writes there too).
var SessionFiles = []string{"events.jsonl", "idempotency.jsonl"}

// IsSessionFile reports whether name is one of SessionFiles.
func IsSessionFile(name string) bool {
	for _, f := range SessionFiles {
		if f == name {
			return true
		}
	}
	return false
}

// ErrNotARecord is wrapped by the errors of ParseRun and ParseExperiment:
// the line is not a record cmlab can read.
var ErrNotARecord = errors.New("events: not a Lab record")

// ParseRun reads a content-machine LabRun line (LAB-API.md) into a LabRun
// for the read model, leniently: every key their schema allows is taken,
// unknown keys are ignored. A fingerprint mtimeMs with a fraction (Node's
// fs.Stats.mtimeMs) is kept to the nanosecond in MtimeNs. It fails when
// the line is not a JSON object with a non-empty string runId.
func ParseRun(raw []byte) (LabRun, error) {
	var v struct {
		SchemaVersion        json.Number                            `json:"schemaVersion"`
		RunID                string                                 `json:"runId"`
		SessionID            string                                 `json:"sessionId"`
		CreatedAt            string                                 `json:"createdAt"`
		Topic                string                                 `json:"topic"`
		ArtifactsDir         string                                 `json:"artifactsDir"`
		ArtifactsDirRealpath string                                 `json:"artifactsDirRealpath"`
		Fingerprint          *struct{ Video, Script *fileStatJSON } `json:"fingerprint"`
		SupersedesRunID      string                                 `json:"supersedesRunId"`
		VideoPath            string                                 `json:"videoPath"`
		Reports              json.RawMessage                        `json:"reports"`
		AutoMetricsSummary   json.RawMessage                        `json:"autoMetricsSummary"`
	}
	if err := decodeObject(raw, &v); err != nil {
		return LabRun{}, err
	}
	if v.RunID == "" {
		return LabRun{}, fmt.Errorf("%w: no runId", ErrNotARecord)
	}
	run := LabRun{SchemaVersion: number(v.SchemaVersion), RunID: v.RunID, SessionID: v.SessionID, CreatedAt: v.CreatedAt,
		Topic: v.Topic, ArtifactsDir: v.ArtifactsDir, ArtifactsDirRealpath: v.ArtifactsDirRealpath,
		SupersedesRunID: v.SupersedesRunID, VideoPath: v.VideoPath}
	if fp := v.Fingerprint; fp != nil {
		run.Fingerprint = &RunFingerprint{Video: fp.Video.stat(), Script: fp.Script.stat()}
	}
	if len(v.Reports) > 0 && !bytes.Equal(v.Reports, []byte("null")) {
		var r RunReports
		if json.Unmarshal(v.Reports, &r) == nil {
			run.Reports = &r
		}
	}
	if len(v.AutoMetricsSummary) > 0 && !bytes.Equal(v.AutoMetricsSummary, []byte("null")) {
		// Best effort: a summary cmlab cannot read leaves the run without
		// metrics in the API; the view keeps their bytes either way.
		var keys map[string]json.RawMessage
		var s AutoMetricsSummary
		if json.Unmarshal(v.AutoMetricsSummary, &keys) == nil && json.Unmarshal(v.AutoMetricsSummary, &s) == nil {
			_, mean := keys["meanDriftMs"]
			_, maxd := keys["maxDriftMs"]
			_, label := keys["syncLabel"]
			_, cov := keys["captionCoverageRatio"]
			_, ocr := keys["ocrConfidenceMean"]
			s.Read = &MetricsRead{Sync: mean || maxd || label, Caption: cov || ocr}
			run.AutoMetricsSummary = &s
		}
	}
	return run, nil
}

// ParseExperiment reads a content-machine LabExperiment line into a
// LabExperiment (Sparse: their schema's shape). It fails when the line is
// not a JSON object with a non-empty string experimentId.
func ParseExperiment(raw []byte) (LabExperiment, error) {
	var x LabExperiment
	var v struct {
		SchemaVersion json.Number `json:"schemaVersion"`
	}
	if err := decodeObject(raw, &v); err != nil {
		return x, err
	}
	if err := json.Unmarshal(bytes.TrimSpace(raw), &struct {
		*LabExperiment
		SchemaVersion json.Number `json:"schemaVersion"`
		Sparse        *struct{}   `json:"sparse"`
	}{LabExperiment: &x}); err != nil {
		return LabExperiment{}, fmt.Errorf("%w: %v", ErrNotARecord, err)
	}
	if x.ExperimentID == "" {
		return LabExperiment{}, fmt.Errorf("%w: no experimentId", ErrNotARecord)
	}
	x.SchemaVersion, x.Sparse = number(v.SchemaVersion), true
	return x, nil
}

// decodeObject unmarshals raw, which must be one JSON object, into v.
func decodeObject(raw []byte, v any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("%w: not a JSON object", ErrNotARecord)
	}
	if err := json.Unmarshal(t, v); err != nil {
		return fmt.Errorf("%w: %v", ErrNotARecord, err)
	}
	return nil
}

// fileStatJSON is a fingerprint entry as content-machine writes it.
type fileStatJSON struct {
	Path      string      `json:"path"`
	SizeBytes json.Number `json:"sizeBytes"`
	MtimeMs   json.Number `json:"mtimeMs"`
}

func (f *fileStatJSON) stat() *FileStat {
	if f == nil {
		return nil
	}
	s := &FileStat{Path: f.Path, SizeBytes: int64(number(f.SizeBytes))}
	s.MtimeMs, s.MtimeNs = mtime(string(f.MtimeMs))
	return s
}

// number is n as an int (0 when it is none; a fraction is dropped).
func number(n json.Number) int {
	if i, err := n.Int64(); err == nil {
		return int(i)
	}
	f, _ := n.Float64()
	return int(f)
}

// mtime reads Node's mtimeMs (a decimal, maybe with a fraction) into
// whole milliseconds and, when it has a fraction, nanoseconds since the
// epoch (the digits past the sixth are dropped).
func mtime(s string) (ms, ns int64) {
	if s == "" {
		return 0, 0
	}
	whole, frac, ok := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") || strings.HasPrefix(s, "-") {
		f, _ := strconv.ParseFloat(s, 64)
		if f >= math.MaxInt64 || f <= math.MinInt64 || f != f {
			return 0, 0 // not a time cmlab can hold; the view keeps their bytes
		}
		return int64(f), 0
	}
	ms, _ = strconv.ParseInt(whole, 10, 64)
	if !ok || strings.Trim(frac, "0") == "" {
		return ms, 0
	}
	frac = (frac + "000000")[:6]
	sub, _ := strconv.ParseInt(frac, 10, 64)
	return ms, ms*1e6 + sub
}
