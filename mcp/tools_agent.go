package mcp

import (
	"log/slog"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of issue 25: a command run to its end in one call, Ctrl+C, and
// the Lab's runs, experiments and feedback.

type execWaitIn struct {
	commandIn
	TimeoutMs *int64 `json:"timeout_ms,omitempty" jsonschema:"how long to wait for the command to finish, in milliseconds (default 30000, at most 600000); past it the answer says done=false and the command keeps running"`
	MaxBytes  *int64 `json:"max_bytes,omitempty" jsonschema:"most bytes of output to return (default 65536); the rest is read with blocks_read from output_next_offset"`
	Raw       bool   `json:"raw,omitempty" jsonschema:"true: the output's bytes as they are (default false: an echoed command line is hidden)"`
	RequestID string `json:"request_id,omitempty" jsonschema:"optional idempotency key: a retry with the same request_id does not run the command again, it waits for the same block"`
}

type interruptIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose running command to interrupt"`
	RequestID      string `json:"request_id,omitempty" jsonschema:"optional idempotency key: a retry with the same request_id does not type Ctrl+C again"`
}

type runGetIn struct {
	RunID string `json:"run_id" jsonschema:"the run id (run_…) from lab_runs_list"`
}

type feedbackAddIn struct {
	RunID        string         `json:"runId,omitempty" jsonschema:"the run the feedback is about (run_…)"`
	ExperimentID string         `json:"experimentId,omitempty" jsonschema:"the experiment (exp_…)"`
	VariantID    string         `json:"variantId,omitempty" jsonschema:"the variant (\"baseline\" or var_…)"`
	Topic        string         `json:"topic,omitempty" jsonschema:"the topic, when no run is given"`
	Ratings      map[string]int `json:"ratings,omitempty" jsonschema:"integer ratings 0–100 by dimension: overall, hook, pacing, script, visuals, motion, captions, sync"`
	Notes        string         `json:"notes,omitempty" jsonschema:"free-text notes"`
	Tags         []string       `json:"tags,omitempty" jsonschema:"tags"`
	RequestID    string         `json:"request_id,omitempty" jsonschema:"required idempotency key (a UUID): a retry with the same request_id returns the first feedbackId and records nothing more"`
}

func registerAgentTools(s *sdk.Server, d *Daemon, log *slog.Logger) {
	add(s, d, log, spec{name: "pty_exec_wait", title: "Run a command and wait for it", kind: mutating, runs: true,
		desc: "Run one shell command in the conversation's terminal and answer when it has finished: done=true, status " +
			"(completed, failed, cancelled), exit_code, output (its clean output, at most max_bytes; output_truncated and " +
			"output_next_offset say where blocks_read continues) and resume_cursor, the spool position after it. If timeout_ms " +
			"passes first, done=false and status \"running\": the command goes on; pty_wait_prompt from resume_cursor returns when " +
			"it ends (or pty_interrupt stops it). cwd runs it in that directory without changing the conversation's. " +
			"Refused with BUSY while another command or an interactive session runs.",
		out: []field{okOut, {"block_id", "id of the block"}, {"seq", "the block's number in this conversation"},
			{"done", "true when the command has finished"}, {"status", "completed | failed | cancelled | running"},
			{"exit_code", "the command's exit status (null while running)"}, {"reason", "why a block failed or was cancelled without an exit code"},
			{"output", "the command's output, clean, at most max_bytes"}, {"output_bytes", "the size of its whole output"},
			{"output_truncated", "true when output is not all of it"}, {"output_next_offset", "offset for blocks_read to continue the output"},
			{"resume_cursor", "the spool position after the command (done) or now (not done): the from_cursor for the next wait"}}},
		func(in execWaitIn) (request, error) {
			if strings.TrimSpace(in.Cmd) == "" {
				return request{}, invalid("cmd is empty", "Pass the command line to run in cmd.")
			}
			return request{method: "POST", path: ptyPath(in.ConversationID, "exec_wait"), reqID: in.RequestID,
				body: body{"cmd": in.Cmd}.optString("cwd", in.Cwd).opt("timeout_ms", in.TimeoutMs).opt("max_bytes", in.MaxBytes).optBool("raw", in.Raw)}, nil
		})

	add(s, d, log, spec{name: "pty_interrupt", title: "Press Ctrl+C", kind: mutating, runs: true,
		desc: "Type Ctrl+C for the conversation's running command or interactive program and return at once (the shell stays). " +
			"Returns interrupted (false when nothing ran) and resume_cursor, the spool position before the Ctrl+C: " +
			"pty_wait_prompt from it returns when the command has ended (status cancelled).",
		out: []field{okOut, {"block_id", "the block interrupted"}, {"interrupted", "whether something was running"}, cursorOut}},
		func(in interruptIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "interrupt"), reqID: in.RequestID, body: body{}}, nil
		})

	add(s, d, log, spec{name: "lab_runs_list", title: "List Lab runs", kind: readOnly,
		desc: "The runs imported into the Lab, as GET /api/runs answers: items with runId, sessionId, createdAt, topic, " +
			"artifactsDir, videoPath and autoMetricsSummary. Pass a runId to lab_run_get, or with lab_feedback_add.",
		out: []field{{"items", "the run records"}, {"nextCursor", "null: the list is whole"}}},
		func(emptyIn) (request, error) {
			return request{method: "GET", path: "/api/runs"}, nil
		})

	add(s, d, log, spec{name: "lab_run_get", title: "Get one Lab run", kind: readOnly,
		desc: "One run's record, as GET /api/runs/{runId} answers (its artifacts and metrics included).",
		out:  []field{{"runId", "the run id"}}},
		func(in runGetIn) (request, error) {
			if err := validID("run_id", in.RunID); err != nil {
				return request{}, err
			}
			return request{method: "GET", path: "/api/runs/" + url.PathEscape(in.RunID)}, nil
		})

	add(s, d, log, spec{name: "lab_experiments_list", title: "List Lab experiments", kind: readOnly,
		desc: "The Lab's experiments, as GET /api/experiments answers: items with experimentId, name, variants and status.",
		out:  []field{{"items", "the experiment records"}, {"nextCursor", "null: the list is whole"}}},
		func(emptyIn) (request, error) {
			return request{method: "GET", path: "/api/experiments"}, nil
		})

	add(s, d, log, spec{name: "lab_feedback_add", title: "Record feedback", kind: mutating,
		desc: "Append one feedback entry to the Lab (POST /api/feedback): about a run (runId) or a topic, with integer " +
			"ratings 0–100, notes and tags. request_id is required: a retry with the same one returns the first feedbackId " +
			"and appends nothing.",
		out: []field{{"feedbackId", "the id of the entry recorded"}}},
		func(in feedbackAddIn) (request, error) {
			if strings.TrimSpace(in.RequestID) == "" {
				return request{}, invalid("request_id is required", "Pass a fresh UUID as request_id, and the same one when you retry.")
			}
			b := body{}.optString("runId", in.RunID).optString("experimentId", in.ExperimentID).optString("variantId", in.VariantID).
				optString("topic", in.Topic).optString("notes", in.Notes)
			if len(in.Ratings) > 0 {
				b["ratings"] = in.Ratings
			}
			if len(in.Tags) > 0 {
				b["tags"] = in.Tags
			}
			return request{method: "POST", path: "/api/feedback", reqID: in.RequestID, body: b}, nil
		})
}
