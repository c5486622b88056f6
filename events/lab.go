package events

import (
	"encoding/json"
	"strconv"
)

// Lab event types (SPEC §5). Their payloads carry the records of
// content-machine's Lab data model (seed 003, LAB-API.md) with the exact JSON
// field names, so the projectors can write them to the JSONL views as they are.
const (
	TypeLabSessionStarted   = "lab.session.started"
	TypeFeedbackSubmitted   = "feedback.submitted"
	TypeFeedbackIngested    = "feedback.ingested"
	TypeRunImported         = "run.imported"
	TypeExperimentCreated   = "experiment.created"
	TypeExperimentSubmitted = "experiment.submitted"
	TypeExperimentUpdated   = "experiment.updated"
	TypeIdempotencyRecorded = "idempotency.recorded"
)

// LabSessionStarted marks the start of a Lab session (one daemon run).
// Stream: the session id.
type LabSessionStarted struct {
	SessionID string `json:"sessionId"`
	Version   string `json:"version"`
	Pid       int    `json:"pid"`
	Listen    string `json:"listen,omitempty"`
}

// Ratings are integers 0–100; absent dimensions are nil.
type Ratings struct {
	Overall  *int `json:"overall,omitempty"`
	Hook     *int `json:"hook,omitempty"`
	Pacing   *int `json:"pacing,omitempty"`
	Script   *int `json:"script,omitempty"`
	Visuals  *int `json:"visuals,omitempty"`
	Motion   *int `json:"motion,omitempty"`
	Captions *int `json:"captions,omitempty"`
	Sync     *int `json:"sync,omitempty"`
}

// MetricsRead says which reports a metrics record was computed from. It
// decides which keys the record's JSON carries (content-machine's rule,
// src/lab/metrics/extract.ts: a report that was read yields its keys, null
// where it lacks the value; one that was not read yields none). It is
// recorded in the event, never shown in the JSON.
type MetricsRead struct {
	Sync    bool `json:"sync,omitempty"`
	Caption bool `json:"caption,omitempty"`
}

// AutoMetricsSnapshot is a run's normalized metrics as computed at rating
// time, recorded in the event so a replay writes the same line.
//
// JSON keys: syncRating, captionOverall and proxyScoreOverall always (null
// when unknown). With Read set (producers since content-machine parity),
// meanDriftMs and maxDriftMs are present when the sync report was read and
// captionCoverageRatio and ocrConfidenceMean when the caption report was,
// null where the report lacks them, absent otherwise. Entries recorded
// before Read existed carry all seven keys, as they were written then.
type AutoMetricsSnapshot struct {
	SyncRating           *int         `json:"syncRating"`
	CaptionOverall       *int         `json:"captionOverall"`
	ProxyScoreOverall    *int         `json:"proxyScoreOverall"`
	MeanDriftMs          *float64     `json:"meanDriftMs"`
	MaxDriftMs           *float64     `json:"maxDriftMs"`
	CaptionCoverageRatio *float64     `json:"captionCoverageRatio"`
	OcrConfidenceMean    *float64     `json:"ocrConfidenceMean"`
	Read                 *MetricsRead `json:"read,omitempty"`
}

// MarshalJSON writes the snapshot's keys by the rule above; Read itself is
// not part of the JSON.
func (m AutoMetricsSnapshot) MarshalJSON() ([]byte, error) {
	all := m.Read == nil
	var w jsonObj
	w.num("syncRating", intNum(m.SyncRating), true)
	w.num("captionOverall", intNum(m.CaptionOverall), true)
	w.num("proxyScoreOverall", intNum(m.ProxyScoreOverall), true)
	sync := all || m.Read.Sync
	caption := all || m.Read.Caption
	w.num("meanDriftMs", floatNum(m.MeanDriftMs), sync)
	w.num("maxDriftMs", floatNum(m.MaxDriftMs), sync)
	w.num("captionCoverageRatio", floatNum(m.CaptionCoverageRatio), caption)
	w.num("ocrConfidenceMean", floatNum(m.OcrConfidenceMean), caption)
	return w.end()
}

// FeedbackReports are report paths discovered for traceability.
type FeedbackReports struct {
	SyncReportPath    string `json:"syncReportPath,omitempty"`
	CaptionReportPath string `json:"captionReportPath,omitempty"`
	ScorePath         string `json:"scorePath,omitempty"`
}

// FeedbackEntry is one line of feedback/feedback.jsonl (schema version 1).
// CreatedAt is left empty by producers: the projector sets it from the
// event's ts, so the line depends on the event alone.
type FeedbackEntry struct {
	SchemaVersion       int                  `json:"schemaVersion"`
	ID                  string               `json:"id"`
	CreatedAt           string               `json:"createdAt"`
	SessionID           string               `json:"sessionId,omitempty"`
	RunID               string               `json:"runId,omitempty"`
	ExperimentID        string               `json:"experimentId,omitempty"`
	VariantID           string               `json:"variantId,omitempty"`
	Topic               string               `json:"topic,omitempty"`
	VideoPath           string               `json:"videoPath,omitempty"`
	ArtifactsDir        string               `json:"artifactsDir,omitempty"`
	Ratings             *Ratings             `json:"ratings,omitempty"`
	Notes               string               `json:"notes,omitempty"`
	Tags                []string             `json:"tags,omitempty"`
	AutoMetricsSnapshot *AutoMetricsSnapshot `json:"autoMetricsSnapshot,omitempty"`
	Answers             json.RawMessage      `json:"answers,omitempty"`
	Reports             *FeedbackReports     `json:"reports,omitempty"`
	Extra               json.RawMessage      `json:"extra,omitempty"`
}

// FeedbackSubmitted appends one entry to feedback.jsonl. Stream: session id.
type FeedbackSubmitted struct {
	Entry FeedbackEntry `json:"entry"`
}

// FeedbackIngested records a complete line that another program appended to
// feedback.jsonl. Raw is the line without its final '\n'; Offset is where it
// started in the file. The projector writes Raw+"\n" back at Offset, so a
// rebuild reproduces foreign lines byte for byte. Stream: "feedback".
//
// A line the log may not take as an entry (not a JSON object with a string
// id, or an id the log holds) is set aside: its bytes are copied to
// Quarantine (a path relative to the home) and blanked in place (spaces,
// same length, so no cursor a poll handed out moves), and the blanked line
// is ingested with SetAside naming why.
type FeedbackIngested struct {
	Raw        []byte `json:"raw"`
	Offset     int64  `json:"offset"`
	SetAside   string `json:"setAside,omitempty"`
	Quarantine string `json:"quarantine,omitempty"`
}

// FileStat fingerprints one file of a run's artifacts directory.
// MtimeMs is the modification time in whole milliseconds; MtimeNs, when
// not zero, the same time in nanoseconds since the epoch, from which the
// view writes content-machine's mtimeMs (Node's sec*1e3 + nsec/1e6, a
// double with its sub-millisecond part: their server compares it with
// !==, issue 28 A3). Events written before MtimeNs existed lack it and
// project as they did.
type FileStat struct {
	Path      string `json:"path,omitempty"`
	SizeBytes int64  `json:"sizeBytes"`
	MtimeMs   int64  `json:"mtimeMs"`
	MtimeNs   int64  `json:"mtimeNs,omitempty"`
}

// MarshalJSON writes f as the runs.jsonl view and content-machine do:
// mtimeNs is not a field of theirs, it becomes mtimeMs's fraction (so an
// export or any JSON of a run carries the view's bytes). The log's msgpack
// encoding does not use it and keeps both fields.
func (f FileStat) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	if f.Path != "" {
		p, err := json.Marshal(f.Path)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, `"path":`...), p...), ',')
	}
	b = strconv.AppendInt(append(b, `"sizeBytes":`...), f.SizeBytes, 10)
	b = append(b, `,"mtimeMs":`...)
	if f.MtimeNs != 0 {
		b = strconv.AppendFloat(b, f.NodeMtimeMs(), 'f', -1, 64)
	} else {
		b = strconv.AppendInt(b, f.MtimeMs, 10)
	}
	return append(b, '}'), nil
}

// NodeMtimeMs is f's modification time as Node's fs.Stats.mtimeMs
// computes it: seconds*1e3 + nanoseconds/1e6, in float64 arithmetic.
func (f *FileStat) NodeMtimeMs() float64 {
	if f.MtimeNs == 0 {
		return float64(f.MtimeMs)
	}
	sec, nsec := f.MtimeNs/1e9, f.MtimeNs%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return float64(sec)*1e3 + float64(nsec)/1e6
}

// RunFingerprint is the lightweight fingerprint of seed 000.
type RunFingerprint struct {
	Video  *FileStat `json:"video,omitempty"`
	Script *FileStat `json:"script,omitempty"`
}

// RunReports are the known report paths of a run. Producers set the
// content-machine keys (syncReportPath, captionReportPath, scorePath, as
// its LabRun schema names them); Sync, Caption and Score are the keys runs
// imported by earlier cmlab versions were recorded with, kept so their
// events still project as they did.
type RunReports struct {
	SyncReportPath    string `json:"syncReportPath,omitempty"`
	CaptionReportPath string `json:"captionReportPath,omitempty"`
	ScorePath         string `json:"scorePath,omitempty"`
	Sync              string `json:"sync,omitempty"`
	Caption           string `json:"caption,omitempty"`
	Score             string `json:"score,omitempty"`
}

// AutoMetricsSummary holds a run's normalized metrics.
//
// JSON keys: syncRating, captionOverall and proxyScoreOverall always (null
// when unknown); syncLabel, meanDriftMs and maxDriftMs when the sync report
// was read (Read.Sync), captionCoverageRatio and ocrConfidenceMean when the
// caption report was (Read.Caption), null where the report lacks them
// (content-machine, src/lab/metrics/extract.ts). Without Read (summaries
// recorded before it existed) a key is present when it has a value.
type AutoMetricsSummary struct {
	SyncRating           *int         `json:"syncRating"`
	SyncLabel            string       `json:"syncLabel,omitempty"`
	MeanDriftMs          *float64     `json:"meanDriftMs,omitempty"`
	MaxDriftMs           *float64     `json:"maxDriftMs,omitempty"`
	CaptionOverall       *int         `json:"captionOverall"`
	CaptionCoverageRatio *float64     `json:"captionCoverageRatio,omitempty"`
	OcrConfidenceMean    *float64     `json:"ocrConfidenceMean,omitempty"`
	ProxyScoreOverall    *int         `json:"proxyScoreOverall"`
	Read                 *MetricsRead `json:"read,omitempty"`
}

// MarshalJSON writes the summary's keys by the rule above.
func (m AutoMetricsSummary) MarshalJSON() ([]byte, error) {
	var r MetricsRead
	if m.Read != nil {
		r = *m.Read
	}
	var w jsonObj
	w.num("syncRating", intNum(m.SyncRating), true)
	switch {
	case m.SyncLabel != "":
		w.str("syncLabel", m.SyncLabel)
	case r.Sync:
		w.num("syncLabel", nil, true)
	}
	w.num("meanDriftMs", floatNum(m.MeanDriftMs), r.Sync)
	w.num("maxDriftMs", floatNum(m.MaxDriftMs), r.Sync)
	w.num("captionOverall", intNum(m.CaptionOverall), true)
	w.num("captionCoverageRatio", floatNum(m.CaptionCoverageRatio), r.Caption)
	w.num("ocrConfidenceMean", floatNum(m.OcrConfidenceMean), r.Caption)
	w.num("proxyScoreOverall", intNum(m.ProxyScoreOverall), true)
	return w.end()
}

// SnapshotOf is the feedback snapshot of summary s (content-machine's
// buildAutoMetricsSnapshotFromSummary): the same values and key rule.
func SnapshotOf(s *AutoMetricsSummary) *AutoMetricsSnapshot {
	if s == nil {
		return nil
	}
	read := MetricsRead{}
	if s.Read != nil {
		read = *s.Read
	}
	return &AutoMetricsSnapshot{SyncRating: s.SyncRating, CaptionOverall: s.CaptionOverall,
		ProxyScoreOverall: s.ProxyScoreOverall, MeanDriftMs: s.MeanDriftMs, MaxDriftMs: s.MaxDriftMs,
		CaptionCoverageRatio: s.CaptionCoverageRatio, OcrConfidenceMean: s.OcrConfidenceMean, Read: &read}
}

// LabRun is one line of lab/runs.jsonl. CreatedAt is set by the projector
// from the event's ts when empty.
type LabRun struct {
	SchemaVersion        int                 `json:"schemaVersion"`
	RunID                string              `json:"runId"`
	SessionID            string              `json:"sessionId"`
	CreatedAt            string              `json:"createdAt"`
	Topic                string              `json:"topic,omitempty"`
	ArtifactsDir         string              `json:"artifactsDir"`
	ArtifactsDirRealpath string              `json:"artifactsDirRealpath"`
	Fingerprint          *RunFingerprint     `json:"fingerprint,omitempty"`
	SupersedesRunID      string              `json:"supersedesRunId,omitempty"`
	VideoPath            string              `json:"videoPath,omitempty"`
	Reports              *RunReports         `json:"reports,omitempty"`
	AutoMetricsSummary   *AutoMetricsSummary `json:"autoMetricsSummary,omitempty"`
}

// RunImported appends a run record. Stream: session id.
type RunImported struct {
	Run LabRun `json:"run"`
}

// Variant is one arm of an experiment.
type Variant struct {
	VariantID string `json:"variantId"`
	Label     string `json:"label"`
	RunID     string `json:"runId"`
}

// Question is an agent-authored question shown in the compare UI.
type Question struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	Type   string `json:"type"` // "yes_no_unsure" | "text"
}

// Winner is the decision of a submitted experiment.
type Winner struct {
	VariantID string `json:"variantId"`
	Reason    string `json:"reason"`
}

// LabExperiment is one line of lab/experiments.jsonl; the last line per
// experimentId wins. CreatedAt (on creation) and UpdatedAt (on updates) are
// set by producers from values they already hold or left empty for the
// projector to fill from the event's ts.
//
// Sparse records (producers since content-machine parity) have the JSON
// shape content-machine's strict LabExperiment schema accepts
// (src/lab/schema/experiment.ts): hypothesis, topic and winner.reason are
// omitted when empty (the schema wants them non-empty when present) and
// questions when the creator sent none. Records recorded before Sparse
// existed keep the shape they were written with (every key present).
// Sparse itself is not part of the JSON.
type LabExperiment struct {
	SchemaVersion int             `json:"schemaVersion"`
	ExperimentID  string          `json:"experimentId"`
	SessionID     string          `json:"sessionId"`
	CreatedAt     string          `json:"createdAt"`
	Name          string          `json:"name"`
	Hypothesis    string          `json:"hypothesis"`
	Topic         string          `json:"topic"`
	BaselineRunID string          `json:"baselineRunId"`
	Variants      []Variant       `json:"variants"`
	Status        string          `json:"status"` // queued | running | done | failed
	Winner        *Winner         `json:"winner,omitempty"`
	Questions     []Question      `json:"questions"`
	Answers       json.RawMessage `json:"answers,omitempty"`
	UpdatedAt     string          `json:"updatedAt,omitempty"`
	Sparse        bool            `json:"sparse,omitempty"`
}

// MarshalJSON writes the record in its shape (see Sparse).
func (x LabExperiment) MarshalJSON() ([]byte, error) {
	type winner struct {
		VariantID string `json:"variantId"`
		Reason    string `json:"reason,omitempty"`
	}
	type sparse struct {
		SchemaVersion int             `json:"schemaVersion"`
		ExperimentID  string          `json:"experimentId"`
		SessionID     string          `json:"sessionId"`
		CreatedAt     string          `json:"createdAt"`
		Name          string          `json:"name"`
		Hypothesis    string          `json:"hypothesis,omitempty"`
		Topic         string          `json:"topic,omitempty"`
		BaselineRunID string          `json:"baselineRunId"`
		Variants      []Variant       `json:"variants"`
		Status        string          `json:"status"`
		Winner        *winner         `json:"winner,omitempty"`
		Questions     *[]Question     `json:"questions,omitempty"`
		Answers       json.RawMessage `json:"answers,omitempty"`
		UpdatedAt     string          `json:"updatedAt,omitempty"`
	}
	if !x.Sparse {
		// Every key, by the struct's own tags: plain has its fields but
		// not this method, and Sparse, false, is omitted.
		type plain LabExperiment
		return marshalNoEscape(plain(x))
	}
	v := sparse{SchemaVersion: x.SchemaVersion, ExperimentID: x.ExperimentID, SessionID: x.SessionID, CreatedAt: x.CreatedAt,
		Name: x.Name, Hypothesis: x.Hypothesis, Topic: x.Topic, BaselineRunID: x.BaselineRunID, Variants: x.Variants,
		Status: x.Status, Answers: x.Answers, UpdatedAt: x.UpdatedAt}
	if x.Winner != nil {
		v.Winner = &winner{x.Winner.VariantID, x.Winner.Reason}
	}
	if x.Questions != nil {
		v.Questions = &x.Questions
	}
	return marshalNoEscape(v)
}

// ExperimentCreated appends the first record of an experiment. Stream: session id.
type ExperimentCreated struct {
	Experiment LabExperiment `json:"experiment"`
}

// ExperimentSubmitted is one compare submission: the per-run feedback
// entries and the experiment's new full record (status done, winner,
// answers) in one event, so a crash can never keep one without the other.
// The projector writes every entry to feedback.jsonl, then the record to
// experiments.jsonl. Stream: session id.
type ExperimentSubmitted struct {
	Experiment LabExperiment   `json:"experiment"`
	Feedback   []FeedbackEntry `json:"feedback"`
}

// ExperimentUpdated appends a new full record of an experiment (status change).
type ExperimentUpdated struct {
	Experiment LabExperiment `json:"experiment"`
}

// IdempotencyRecorded records a request id for a request that appended no
// other event (a re-import of an unchanged run, for one). The request id,
// hash and response snapshot live in the envelope as for every event.
type IdempotencyRecorded struct {
	Kind     string `json:"kind"` // feedback | submit | import | pty.exec | …
	EntityID string `json:"entityId"`
}
