package events

// Terminal event types (SPEC §5, seed 001). Stream: the conversation id.
// Field names follow seed 001 (snake_case).
const (
	TypePtySessionStarted = "pty.session.started"
	TypePtyBlockBegin     = "pty.block.begin"
	TypePtyOutput         = "pty.output"
	TypePtyBlockEnd       = "pty.block.end"
	TypePtyPrompt         = "pty.prompt"
	TypePtyInput          = "pty.input"
	TypePtySessionReset   = "pty.session.reset"
	TypePtySessionEnded   = "pty.session.ended"
	TypePtyTruncated      = "pty.truncated"
)

// Block statuses (seed 001 §2.1).
const (
	BlockRunning     = "running"
	BlockCompleted   = "completed"
	BlockFailed      = "failed"
	BlockCancelled   = "cancelled"
	BlockInteractive = "interactive"
)

// Block is one line of pty/<conversationId>/blocks.jsonl; the last line per
// block_id wins. Begin and end events both carry the whole record so the
// projector needs no state.
type Block struct {
	BlockID    string `json:"block_id"`
	Seq        int    `json:"seq"`  // 1-based block number within the conversation
	Mode       string `json:"mode"` // "block" | "interactive"
	SessionID  string `json:"session_id,omitempty"`
	ShellID    string `json:"shell_id,omitempty"`
	Cmd        string `json:"cmd"`
	Cwd        string `json:"cwd"`
	TsBegin    int64  `json:"ts_begin"`
	TsEnd      int64  `json:"ts_end,omitempty"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Reason     string `json:"reason,omitempty"`
	OutputPath string `json:"output_path"`
	SpoolBegin int64  `json:"spool_begin"`
	SpoolEnd   int64  `json:"spool_end,omitempty"`
	// Dropped is the output the block produced past its cap (or the
	// conversation's) that was not stored: the sum of the Dropped of its
	// pty.truncated events, set on its END.
	Dropped int64 `json:"dropped_bytes,omitempty"`
}

// PtySessionStarted records a new shell for a conversation.
type PtySessionStarted struct {
	ConversationID string `json:"conversation_id"`
	ShellID        string `json:"shell_id"`
	Pid            int    `json:"pid"`
	Cols           int    `json:"cols"`
	Rows           int    `json:"rows"`
	Cwd            string `json:"cwd"`
}

// PtyBlockBegin opens a block (exactly one per block).
type PtyBlockBegin struct {
	Block Block `json:"block"`
}

// PtyOutput is terminal output, already normalised (\r\n and lone \r → \n)
// and stripped of raw marks. SpoolOffset is where Data starts in
// output.spool; BlockID names the block it belongs to, if any.
type PtyOutput struct {
	BlockID     string `json:"block_id,omitempty"`
	SpoolOffset int64  `json:"spool_offset"`
	Data        []byte `json:"data"`
}

// PtyBlockEnd closes a block (exactly one per block).
type PtyBlockEnd struct {
	Block Block `json:"block"`
}

// PtyPrompt is a prompt sentinel seen in the stream. Line is the canonical
// sentinel line ("__FWS_PROMPT__ ts=… cwd_b64=… exit=…\n") that the projector
// writes into the spool at SpoolOffset.
type PtyPrompt struct {
	PromptTS    int64  `json:"prompt_ts"`
	Cwd         string `json:"cwd"`
	ExitCode    *int   `json:"exit_code"`
	SpoolOffset int64  `json:"spool_offset"`
	Line        string `json:"line"`
	BlockID     string `json:"block_id,omitempty"`
}

// PtyInput is input typed into the terminal (send, expect_send, exec).
type PtyInput struct {
	Data    []byte `json:"data"`
	BlockID string `json:"block_id,omitempty"`
	Source  string `json:"source,omitempty"` // send | expect_send | exec | interrupt
}

// PtySessionReset records that the shell was replaced; old spool and blocks stay.
type PtySessionReset struct {
	OldShellID string `json:"old_shell_id,omitempty"`
	NewShellID string `json:"new_shell_id,omitempty"`
	Reason     string `json:"reason"`
}

// PtySessionEnded records that a conversation's shell exited or was torn down.
type PtySessionEnded struct {
	ShellID string `json:"shell_id"`
	Reason  string `json:"reason"` // exited | eio | end_session | shutdown | daemon_crashed
	Exit    *int   `json:"exit_code"`
}

// PtyTruncated records that terminal output past a cap was dropped (issue
// 16 §3): the block keeps running, its bytes past the cap are not stored.
// Line is a visible marker that the projector writes into the spool (and
// the block's output when BlockID is set) at SpoolOffset, like a prompt
// line; Dropped is the count of bytes dropped that this event accounts for
// (the first event of a block is written when the cap is crossed, a last
// one before the block's END carries the bytes dropped after it). Limit
// is the cap in bytes; Scope is "block", "conversation" or "total" (the
// cap over every conversation's spool together).
type PtyTruncated struct {
	BlockID     string `json:"block_id,omitempty"`
	SpoolOffset int64  `json:"spool_offset"`
	Line        string `json:"line"`
	Dropped     int64  `json:"dropped"`
	Limit       int64  `json:"limit"`
	Scope       string `json:"scope"`
}

// Scopes of a PtyTruncated.
const (
	TruncatedBlock        = "block"
	TruncatedConversation = "conversation"
	TruncatedTotal        = "total"
)
