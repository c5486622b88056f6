// Package cmhome builds, for tests, a home the way content-machine's Lab
// server leaves it (45ck/content-machine: lab/runs.jsonl,
// lab/experiments.jsonl, lab/sessions/<s>/idempotency.jsonl and
// feedback/feedback.jsonl, in their record shapes: LAB-API.md and seed
// 003), and reads one back the way their server does (Read: every line
// through their strict schemas). Adoption (engine/adopt.go) is tested
// against both.
package cmhome

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Ids of the records Write makes.
const (
	Session  = "lab_6f1c2a9e-4b7d-4e0a-9c3b-2d8f1e7a5b60"
	RunFull  = "run_0b5e8f3a-1c2d-4e6f-8a9b-0c1d2e3f4a5b"
	RunMin   = "run_1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c7d"
	RunBig   = "run_9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	ExpMin   = "exp_2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
	ExpFull  = "exp_3d4e5f6a-7b8c-4d9e-8f0a-2b3c4d5e6f7a"
	VarB     = "var_4e5f6a7b-8c9d-4e0f-9a1b-3c4d5e6f7a8b"
	VarC     = "var_5f6a7b8c-9d0e-4f1a-8b2c-4d5e6f7a8b9c"
	FbFull   = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
	FbMin    = "8b9c0d1e-2f3a-4b4c-9d5e-6f7a8b9c0d1e"
	FbLegacy = "9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
)

// Lines are the lines Write writes, by home-relative file, each as
// content-machine's JSON.stringify writes it (no spaces, keys in their
// schemas' order, non-ASCII unescaped). Every optional field of their
// schemas is present in one record and absent from another.
func Lines(base string) map[string][]string {
	a := base + "/renders/α-run"
	return map[string][]string{
		"lab/runs.jsonl": {
			`{"schemaVersion":1,"runId":"` + RunFull + `","sessionId":"` + Session + `","createdAt":"2026-02-06T10:00:00.123Z","topic":"Café ☕ — 日本語 \"quoted\" \\ back","artifactsDir":"` + a + `","artifactsDirRealpath":"` + a + `","fingerprint":{"video":{"path":"` + a + `/video.mp4","sizeBytes":123456789,"mtimeMs":1700000000123.4568},"script":{"path":"` + a + `/script.json","sizeBytes":2048,"mtimeMs":1700000000000}},"supersedesRunId":"` + RunMin + `","videoPath":"` + a + `/video.mp4","provenance":{"cmVersion":"0.9.1","gitCommit":"97ddffe3caa9ac28b185bbb589e14c12c8650e2a","cwd":"` + base + `","argv":["cm","generate","--topic","café"]},"reports":{"syncReportPath":"` + a + `/sync-report.json","captionReportPath":"` + a + `/caption-report.json","scorePath":"` + a + `/score.json"},"autoMetricsSummary":{"syncRating":88,"syncLabel":"good","meanDriftMs":12.25,"maxDriftMs":40,"captionOverall":90,"captionCoverageRatio":0.8,"ocrConfidenceMean":0.95,"proxyScoreOverall":71}}`,
			`{"schemaVersion":1,"runId":"` + RunMin + `","sessionId":"` + Session + `","createdAt":"2026-02-05T09:00:00.000Z","artifactsDir":"` + base + `/renders/min","artifactsDirRealpath":"` + base + `/renders/min"}`,
			`{"schemaVersion":1,"runId":"` + RunBig + `","sessionId":"` + Session + `","createdAt":"2026-02-07T23:59:59.999Z","topic":"🎬 big numbers","artifactsDir":"` + base + `/renders/big","artifactsDirRealpath":"` + base + `/renders/big","fingerprint":{"video":{"path":"` + base + `/renders/big/video.mp4","sizeBytes":9007199254740991,"mtimeMs":1.7e+21}},"videoPath":"` + base + `/renders/big/video.mp4","reports":{},"autoMetricsSummary":{"syncRating":null,"syncLabel":null,"meanDriftMs":null,"maxDriftMs":null,"captionOverall":null,"proxyScoreOverall":null}}`,
		},
		"lab/experiments.jsonl": {
			`{"schemaVersion":1,"experimentId":"` + ExpMin + `","sessionId":"` + Session + `","createdAt":"2026-02-06T11:00:00.000Z","name":"Min compare","baselineRunId":"` + RunMin + `","variants":[{"variantId":"` + VarB + `","label":"B","runId":"` + RunFull + `"}],"status":"queued"}`,
			`{"schemaVersion":1,"experimentId":"` + ExpFull + `","sessionId":"` + Session + `","createdAt":"2026-02-06T12:00:00.000Z","name":"Ünïcödé 比較","hypothesis":"B hooks faster","topic":"cats","baselineRunId":"` + RunMin + `","variants":[{"variantId":"` + VarB + `","label":"B","runId":"` + RunFull + `"},{"variantId":"` + VarC + `","label":"C","runId":"` + RunBig + `"}],"status":"queued","questions":[{"id":"q1","prompt":"Clearer?","type":"yes_no_unsure"},{"id":"q2","prompt":"Why?","type":"text"}]}`,
			`{"schemaVersion":1,"experimentId":"` + ExpMin + `","sessionId":"` + Session + `","createdAt":"2026-02-06T11:00:00.000Z","name":"Min compare","baselineRunId":"` + RunMin + `","variants":[{"variantId":"` + VarB + `","label":"B","runId":"` + RunFull + `"}],"status":"done","winner":{"variantId":"baseline"},"updatedAt":"2026-02-06T11:30:00.000Z"}`,
			`{"schemaVersion":1,"experimentId":"` + ExpFull + `","sessionId":"` + Session + `","createdAt":"2026-02-06T12:00:00.000Z","name":"Ünïcödé 比較","hypothesis":"B hooks faster","topic":"cats","baselineRunId":"` + RunMin + `","variants":[{"variantId":"` + VarB + `","label":"B","runId":"` + RunFull + `"},{"variantId":"` + VarC + `","label":"C","runId":"` + RunBig + `"}],"status":"done","winner":{"variantId":"` + VarB + `","reason":"B looks better — clearly"},"questions":[{"id":"q1","prompt":"Clearer?","type":"yes_no_unsure"},{"id":"q2","prompt":"Why?","type":"text"}],"answers":{"q1":"yes","q2":"the hook"},"updatedAt":"2026-02-06T12:30:00.000Z"}`,
		},
		"lab/sessions/" + Session + "/idempotency.jsonl": {
			`{"schemaVersion":1,"requestId":"req-feedback-1","type":"feedback","response":{"feedbackId":"` + FbFull + `"},"createdAt":"2026-02-06T10:05:00.000Z"}`,
			`{"schemaVersion":1,"requestId":"req-submit-1","type":"experiment_submit","response":{"experimentId":"` + ExpFull + `","feedbackIds":["` + FbMin + `"]},"createdAt":"2026-02-06T12:30:00.000Z"}`,
		},
		"feedback/feedback.jsonl": {
			`{"schemaVersion":1,"id":"` + FbFull + `","createdAt":"2026-02-06T10:05:00.000Z","sessionId":"` + Session + `","runId":"` + RunFull + `","experimentId":"` + ExpFull + `","variantId":"` + VarB + `","topic":"Café ☕","videoPath":"` + a + `/video.mp4","artifactsDir":"` + a + `","ratings":{"overall":100,"hook":0,"pacing":50,"script":61,"visuals":72,"motion":83,"captions":94,"sync":5},"notes":"line one\nline two — ✓ \"ok\"","tags":["fast","日本"],"autoMetricsSnapshot":{"syncRating":88,"captionOverall":null,"proxyScoreOverall":71,"meanDriftMs":12.25,"maxDriftMs":null,"captionCoverageRatio":0.8,"ocrConfidenceMean":null},"answers":{"q1":"unsure"},"reports":{"syncReportPath":"` + a + `/sync-report.json","captionReportPath":"` + a + `/caption-report.json","scorePath":"` + a + `/score.json"},"extra":{"client":"cm-cli","nested":[1,2.5,{"deep":true}],"big":12345678901234567890}}`,
			`{"schemaVersion":1,"id":"` + FbMin + `","createdAt":"2026-02-06T12:30:00.000Z"}`,
			`{"schemaVersion":1,"id":"` + FbLegacy + `","createdAt":"2026-01-30T08:00:00.000Z","topic":"legacy cm feedback","ratings":{"script":40},"notes":"from cm feedback add"}`,
		},
	}
}

// Write makes a content-machine home at dir (base names the directory its
// runs' paths point into) and returns its files' bytes by home-relative
// path.
func Write(dir, base string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for f, lines := range Lines(base) {
		b := []byte(strings.Join(lines, "\n") + "\n")
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		out[f] = b
	}
	return out, nil
}

// Snapshot returns the bytes of the files of want found in dir (nil for
// a missing one).
func Snapshot(dir string, want map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for f := range want {
		b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		out[f] = b
	}
	return out
}

// Their schemas (LAB-API.md, seed 003, their src/lab/schema): strict, so
// a key they do not know fails the read as their zod .strict() does.
type fileStat struct {
	Path      *string      `json:"path"`
	SizeBytes *json.Number `json:"sizeBytes"`
	MtimeMs   *json.Number `json:"mtimeMs"`
}

type labRun struct {
	SchemaVersion        *int    `json:"schemaVersion"`
	RunID                *string `json:"runId"`
	SessionID            *string `json:"sessionId"`
	CreatedAt            *string `json:"createdAt"`
	Topic                *string `json:"topic"`
	ArtifactsDir         *string `json:"artifactsDir"`
	ArtifactsDirRealpath *string `json:"artifactsDirRealpath"`
	Fingerprint          *struct {
		Video  *fileStat `json:"video"`
		Script *fileStat `json:"script"`
	} `json:"fingerprint"`
	SupersedesRunID *string `json:"supersedesRunId"`
	VideoPath       *string `json:"videoPath"`
	Provenance      *struct {
		CmVersion *string  `json:"cmVersion"`
		GitCommit *string  `json:"gitCommit"`
		Cwd       *string  `json:"cwd"`
		Argv      []string `json:"argv"`
	} `json:"provenance"`
	Reports *struct {
		SyncReportPath    *string `json:"syncReportPath"`
		CaptionReportPath *string `json:"captionReportPath"`
		ScorePath         *string `json:"scorePath"`
	} `json:"reports"`
	AutoMetricsSummary *struct {
		SyncRating           *json.Number `json:"syncRating"`
		SyncLabel            *string      `json:"syncLabel"`
		MeanDriftMs          *json.Number `json:"meanDriftMs"`
		MaxDriftMs           *json.Number `json:"maxDriftMs"`
		CaptionOverall       *json.Number `json:"captionOverall"`
		CaptionCoverageRatio *json.Number `json:"captionCoverageRatio"`
		OcrConfidenceMean    *json.Number `json:"ocrConfidenceMean"`
		ProxyScoreOverall    *json.Number `json:"proxyScoreOverall"`
	} `json:"autoMetricsSummary"`
}

type variant struct {
	VariantID *string `json:"variantId"`
	Label     *string `json:"label"`
	RunID     *string `json:"runId"`
}

type labExperiment struct {
	SchemaVersion *int      `json:"schemaVersion"`
	ExperimentID  *string   `json:"experimentId"`
	SessionID     *string   `json:"sessionId"`
	CreatedAt     *string   `json:"createdAt"`
	Name          *string   `json:"name"`
	Hypothesis    *string   `json:"hypothesis"`
	Topic         *string   `json:"topic"`
	BaselineRunID *string   `json:"baselineRunId"`
	Variants      []variant `json:"variants"`
	Status        *string   `json:"status"`
	Winner        *struct {
		VariantID *string `json:"variantId"`
		Reason    *string `json:"reason"`
	} `json:"winner"`
	Questions []struct {
		ID     *string `json:"id"`
		Prompt *string `json:"prompt"`
		Type   *string `json:"type"`
	} `json:"questions"`
	Answers   map[string]any `json:"answers"`
	UpdatedAt *string        `json:"updatedAt"`
}

type feedbackEntry struct {
	SchemaVersion       *int           `json:"schemaVersion"`
	ID                  *string        `json:"id"`
	CreatedAt           *string        `json:"createdAt"`
	SessionID           *string        `json:"sessionId"`
	RunID               *string        `json:"runId"`
	ExperimentID        *string        `json:"experimentId"`
	VariantID           *string        `json:"variantId"`
	Topic               *string        `json:"topic"`
	VideoPath           *string        `json:"videoPath"`
	ArtifactsDir        *string        `json:"artifactsDir"`
	Ratings             map[string]int `json:"ratings"`
	Notes               *string        `json:"notes"`
	Tags                []string       `json:"tags"`
	AutoMetricsSnapshot map[string]any `json:"autoMetricsSnapshot"`
	Answers             map[string]any `json:"answers"`
	Reports             *struct {
		SyncReportPath    *string `json:"syncReportPath"`
		CaptionReportPath *string `json:"captionReportPath"`
		ScorePath         *string `json:"scorePath"`
	} `json:"reports"`
	Extra map[string]any `json:"extra"`
}

type idempotencyRecord struct {
	SchemaVersion *int           `json:"schemaVersion"`
	RequestID     *string        `json:"requestId"`
	Type          *string        `json:"type"`
	Response      map[string]any `json:"response"`
	CreatedAt     *string        `json:"createdAt"`
}

// Contents is what Read found: ids by file, in file order.
type Contents struct {
	Runs        []string
	Experiments []string // one per record (an id repeats per update)
	Feedback    []string
	Idempotency []string // request ids
}

// Read reads the home at dir the way content-machine's server does: every
// non-blank line of each store must pass its strict schema (required
// fields present, no unknown key, ratings whole numbers 0–100). It fails
// naming the first line that does not.
func Read(dir string) (*Contents, error) {
	var c Contents
	each := func(file string, v func() any, ok func(any) (string, error), into *[]string) error {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			x := v()
			d := json.NewDecoder(bytes.NewReader(line))
			d.DisallowUnknownFields()
			d.UseNumber()
			if err := d.Decode(x); err != nil {
				return fmt.Errorf("%s line %d: %v", file, i+1, err)
			}
			id, err := ok(x)
			if err != nil {
				return fmt.Errorf("%s line %d: %v", file, i+1, err)
			}
			*into = append(*into, id)
		}
		return nil
	}
	need := func(fields map[string]bool) error {
		for k, present := range fields {
			if !present {
				return fmt.Errorf("missing %s", k)
			}
		}
		return nil
	}
	if err := each("lab/runs.jsonl", func() any { return &labRun{} }, func(x any) (string, error) {
		r := x.(*labRun)
		return deref(r.RunID), need(map[string]bool{"schemaVersion": r.SchemaVersion != nil, "runId": r.RunID != nil, "sessionId": r.SessionID != nil,
			"createdAt": r.CreatedAt != nil, "artifactsDir": r.ArtifactsDir != nil, "artifactsDirRealpath": r.ArtifactsDirRealpath != nil})
	}, &c.Runs); err != nil {
		return nil, err
	}
	if err := each("lab/experiments.jsonl", func() any { return &labExperiment{} }, func(x any) (string, error) {
		e := x.(*labExperiment)
		if e.Status != nil && !strings.Contains(" queued running done failed ", " "+*e.Status+" ") {
			return "", fmt.Errorf("status %q", *e.Status)
		}
		return deref(e.ExperimentID), need(map[string]bool{"schemaVersion": e.SchemaVersion != nil, "experimentId": e.ExperimentID != nil,
			"sessionId": e.SessionID != nil, "createdAt": e.CreatedAt != nil, "name": e.Name != nil, "baselineRunId": e.BaselineRunID != nil,
			"variants": e.Variants != nil, "status": e.Status != nil})
	}, &c.Experiments); err != nil {
		return nil, err
	}
	if err := each("feedback/feedback.jsonl", func() any { return &feedbackEntry{} }, func(x any) (string, error) {
		f := x.(*feedbackEntry)
		for k, r := range f.Ratings {
			if !strings.Contains(" overall hook pacing script visuals motion captions sync ", " "+k+" ") || r < 0 || r > 100 {
				return "", fmt.Errorf("rating %s=%d", k, r)
			}
		}
		return deref(f.ID), need(map[string]bool{"schemaVersion": f.SchemaVersion != nil, "id": f.ID != nil, "createdAt": f.CreatedAt != nil})
	}, &c.Feedback); err != nil {
		return nil, err
	}
	sessions, _ := filepath.Glob(filepath.Join(dir, "lab", "sessions", "*", "idempotency.jsonl"))
	for _, s := range sessions {
		rel, _ := filepath.Rel(dir, s)
		if err := each(filepath.ToSlash(rel), func() any { return &idempotencyRecord{} }, func(x any) (string, error) {
			r := x.(*idempotencyRecord)
			if r.Type != nil && *r.Type != "feedback" && *r.Type != "experiment_submit" {
				return "", fmt.Errorf("type %q", *r.Type)
			}
			return deref(r.RequestID), need(map[string]bool{"requestId": r.RequestID != nil, "type": r.Type != nil, "response": r.Response != nil, "createdAt": r.CreatedAt != nil})
		}, &c.Idempotency); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
