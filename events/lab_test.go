package events

import (
	"encoding/json"
	"testing"
)

// The two JSON shapes of a LabExperiment record (see Sparse), byte for
// byte: the views and exports carry them, so neither may drift.
func TestLabExperimentJSONShapes(t *testing.T) {
	full := LabExperiment{SchemaVersion: 1, ExperimentID: "exp_1", SessionID: "lab_1", CreatedAt: "c", Name: "a<b",
		BaselineRunID: "run_1", Variants: []Variant{{VariantID: "baseline", Label: "B", RunID: "run_1"}},
		Status: "done", Winner: &Winner{VariantID: "baseline"}, Questions: []Question{{ID: "q", Prompt: "p", Type: "text"}},
		Answers: json.RawMessage(`{"q":"yes"}`), UpdatedAt: "u"}
	sparse := full
	sparse.Sparse = true
	for _, c := range []struct {
		name string
		x    LabExperiment
		want string
	}{
		{"empty", LabExperiment{},
			`{"schemaVersion":0,"experimentId":"","sessionId":"","createdAt":"","name":"","hypothesis":"","topic":"","baselineRunId":"","variants":null,"status":"","questions":null}`},
		{"full", full,
			`{"schemaVersion":1,"experimentId":"exp_1","sessionId":"lab_1","createdAt":"c","name":"a<b","hypothesis":"","topic":"","baselineRunId":"run_1",` +
				`"variants":[{"variantId":"baseline","label":"B","runId":"run_1"}],"status":"done","winner":{"variantId":"baseline","reason":""},` +
				`"questions":[{"id":"q","prompt":"p","type":"text"}],"answers":{"q":"yes"},"updatedAt":"u"}`},
		{"sparse empty", LabExperiment{Sparse: true},
			`{"schemaVersion":0,"experimentId":"","sessionId":"","createdAt":"","name":"","baselineRunId":"","variants":null,"status":""}`},
		{"sparse", sparse,
			`{"schemaVersion":1,"experimentId":"exp_1","sessionId":"lab_1","createdAt":"c","name":"a<b","baselineRunId":"run_1",` +
				`"variants":[{"variantId":"baseline","label":"B","runId":"run_1"}],"status":"done","winner":{"variantId":"baseline"},` +
				`"questions":[{"id":"q","prompt":"p","type":"text"}],"answers":{"q":"yes"},"updatedAt":"u"}`},
	} {
		got, err := c.x.MarshalJSON()
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.name, got, err, c.want)
		}
	}
}
