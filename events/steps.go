package events

// Durable step event types (SPEC §8, seed 002). Stream: the mandate id.
const (
	TypeStepPlanned     = "step.planned"
	TypeStepExecuting   = "step.executing"
	TypeStepCompleted   = "step.completed"
	TypeStepFailed      = "step.failed"
	TypeStepNeedsReview = "step.needs_review"
	TypeStepReset       = "step.reset"
	// TypeMandateCancelled marks a mandate cancelled by its operator: no
	// step of it starts executing again, and start-up auto-resume skips it.
	TypeMandateCancelled = "mandate.cancelled"
)

// Step statuses.
const (
	StatusPending     = "pending"
	StatusExecuting   = "executing"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusNeedsReview = "needs_review"
)

// PlannedStep is one step of a committed plan. Hashes are "sha256-" + hex.
type PlannedStep struct {
	StepID           string   `json:"step_id"`
	Tool             string   `json:"tool"`
	ParamsHash       string   `json:"params_hash"`
	PreHash          string   `json:"pre_hash,omitempty"`
	ExpectedPostHash string   `json:"expected_post_hash,omitempty"`
	IdemKey          string   `json:"idem_key"`
	World            []string `json:"world,omitempty"`
	// Dir is the absolute directory relative World paths resolve against
	// (the step's working directory when `cmlab run` planned it).
	Dir string `json:"dir,omitempty"`
}

// Evidence explains a recovery verdict or a manual-review request.
type Evidence struct {
	Reason          string `json:"reason"`
	Status          string `json:"status,omitempty"`
	ObservedPreHash string `json:"observed_pre_hash,omitempty"`
	ExpectedPreHash string `json:"expected_pre_hash,omitempty"`
	CurrentPreHash  string `json:"current_pre_hash,omitempty"`
	CurrentPostHash string `json:"current_post_hash,omitempty"`
	PostHash        string `json:"post_hash,omitempty"`
	ResultHash      string `json:"result_hash,omitempty"`
	Detail          string `json:"detail,omitempty"`
	// Pid is the step's process still running (verdict in_flight).
	Pid int `json:"pid,omitempty"`
}

// StepPlanned commits a mandate's plan. Spec is the mandate file's bytes
// (compacted JSON) when the plan came from `cmlab run`, so a resume can run
// the same commands.
type StepPlanned struct {
	MandateID string        `json:"mandate_id"`
	Name      string        `json:"name,omitempty"`
	Steps     []PlannedStep `json:"steps"`
	Spec      []byte        `json:"spec,omitempty"`
}

// StepExecuting records that a step is about to produce its side effect.
// When a runner executes the step as a process (`cmlab run`, auto-resume),
// the event names that process: Pid, PidStart (its start time, field 22 of
// /proc/PID/stat, in clock ticks after boot: a reused pid has another) and
// BootID (/proc/sys/kernel/random/boot_id: after a reboot no recorded
// process is alive). The runner starts the process held at a gate and
// opens it only once this event is durable, so a step never acts without
// its process on record (steps/doc.go). RunnerPid and RunnerStart name the
// runner itself (`cmlab run`, or the daemon resuming the mandate): while it
// runs, the step is its runner's, not a crash's.
type StepExecuting struct {
	MandateID       string `json:"mandate_id"`
	StepID          string `json:"step_id"`
	IdemKey         string `json:"idem_key"`
	ObservedPreHash string `json:"observed_pre_hash"`
	Pid             int    `json:"pid,omitempty"`
	PidStart        uint64 `json:"pid_start,omitempty"`
	BootID          string `json:"boot_id,omitempty"`
	RunnerPid       int    `json:"runner_pid,omitempty"`
	RunnerStart     uint64 `json:"runner_start,omitempty"`
}

// StepCompleted records a finished step. ExitCode and OutputDigest are the
// recorded result a resumed mandate reads instead of re-running the step.
type StepCompleted struct {
	MandateID    string    `json:"mandate_id"`
	StepID       string    `json:"step_id"`
	PostHash     string    `json:"post_hash"`
	ResultHash   string    `json:"result_hash"`
	ExitCode     *int      `json:"exit_code,omitempty"`
	OutputDigest string    `json:"output_digest,omitempty"`
	Recovered    bool      `json:"recovered,omitempty"`
	Evidence     *Evidence `json:"evidence,omitempty"`
}

// StepFailed records a failed step; ErrorMsg is at most 500 characters.
type StepFailed struct {
	MandateID  string `json:"mandate_id"`
	StepID     string `json:"step_id"`
	ErrorClass string `json:"error_class"`
	ErrorMsg   string `json:"error_msg"`
	ExitCode   *int   `json:"exit_code,omitempty"`
}

// StepNeedsReview parks a step for a human; its mandate is paused.
type StepNeedsReview struct {
	MandateID string    `json:"mandate_id"`
	StepID    string    `json:"step_id"`
	Reason    string    `json:"reason"`
	Evidence  *Evidence `json:"evidence,omitempty"`
}

// StepReset moves a step back to pending (recovery: executing → pending),
// keeping its idem_key.
type StepReset struct {
	MandateID string    `json:"mandate_id"`
	StepID    string    `json:"step_id"`
	IdemKey   string    `json:"idem_key"`
	Reason    string    `json:"reason"`
	Evidence  *Evidence `json:"evidence,omitempty"`
}

// MandateCancelled cancels a mandate (`cmlab run cancel`): its steps may
// still finish what they are doing, none starts executing again, and
// start-up auto-resume skips the mandate. Stream: the mandate id.
type MandateCancelled struct {
	MandateID string `json:"mandate_id"`
	Reason    string `json:"reason,omitempty"`
}
