package events

// Events the log and recovery write about themselves. Stream: "wal" or
// "recovery".
const (
	TypeWalRepaired     = "wal.repaired"
	TypeWalSalvaged     = "wal.salvaged"
	TypeRecoveryApplied = "recovery.applied"
)

// WalRepaired records a torn tail cut from the last segment at open.
type WalRepaired struct {
	Segment    string `json:"segment"`    // segment file name
	Offset     int64  `json:"offset"`     // byte offset of the cut in that file
	Length     int64  `json:"length"`     // bytes cut
	Quarantine string `json:"quarantine"` // file under quarantine/ holding them
	Reason     string `json:"reason"`     // incomplete frame | bad crc | zero fill | undecodable envelope
	FirstSeq   uint64 `json:"first_seq"`  // sequence the first cut entry would have had
}

// WalSalvaged is the placeholder written by `recover --salvage` at the
// sequence of an entry that was lost to corruption.
type WalSalvaged struct {
	LostSeq    uint64 `json:"lost_seq"`
	Segment    string `json:"segment"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"`
	Quarantine string `json:"quarantine"`
	Reason     string `json:"reason"`
	// What the lost entry probably was, from its neighbours or the views.
	Guess string `json:"guess,omitempty"`
}

// RecoveryDecision is one line of a recovery plan.
type RecoveryDecision struct {
	MandateID string    `json:"mandate_id,omitempty"`
	StepID    string    `json:"step_id,omitempty"`
	Status    string    `json:"status,omitempty"`
	Verdict   string    `json:"verdict,omitempty"`
	Evidence  *Evidence `json:"evidence,omitempty"`
	Action    string    `json:"action"`
	// Reason says why an automatic decision (auto-resume or waiting for
	// the operator) was taken, e.g. "outside_lookback".
	Reason string `json:"reason,omitempty"`
}

// RecoveryApplied records that a recovery plan was applied.
type RecoveryApplied struct {
	Decisions []RecoveryDecision `json:"decisions"`
	Auto      bool               `json:"auto,omitempty"` // applied by daemon start, not the operator
}
