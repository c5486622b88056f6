package mcp

import (
	"encoding/json"
	"net/http"

	"github.com/cmlab/cmlab/home"
)

// Tool inputs. Field names are the seed's (001 §5 for the terminal, 000
// for the feedback cursor); conversation_id and block_id go into the route
// path, request_id into X-CM-LAB-REQUEST-ID, everything else into the body
// or query exactly as the HTTP route takes it.

// commandIn is the command line of pty_exec, pty_exec_interactive and
// pty_exec_wait: embedded, its fields are theirs, first, in their schemas.
type commandIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to use; any id of [A-Za-z0-9_.-]{1,128}; a new id starts a new shell"`
	Cmd            string `json:"cmd" jsonschema:"the shell command line to run"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"optional directory to run this command in; the conversation's directory is unchanged for later commands (default: the conversation's)"`
}

type execIn struct {
	commandIn
	RequestID string `json:"request_id,omitempty" jsonschema:"optional idempotency key: a retry with the same request_id returns the first response and does not act again; reuse it only for the very same call"`
}

type sendIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to use"`
	Data           string `json:"data" jsonschema:"bytes to type into the terminal; end a line with \\r (Enter)"`
	RequestID      string `json:"request_id,omitempty" jsonschema:"optional idempotency key: a retry with the same request_id returns the first response and does not type again"`
}

type waitForIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose spool to watch"`
	Match          string `json:"match,omitempty" jsonschema:"text to wait for (substring or regular expression); ignored for match_type prompt"`
	MatchType      string `json:"match_type,omitempty" jsonschema:"substring (default), regex, or prompt (the next prompt sentinel)"`
	FromCursor     *int64 `json:"from_cursor,omitempty" jsonschema:"byte offset in the spool to scan from: the resume_cursor of the previous call (or pty_exec_interactive's); omitted, the end of the spool now, so output already there never matches"`
	TimeoutMs      *int64 `json:"timeout_ms,omitempty" jsonschema:"how long to wait in milliseconds (the daemon's default when omitted)"`
	Raw            bool   `json:"raw,omitempty" jsonschema:"true: the spool's bytes as they are, internal prompt marker lines included (default false: clean text)"`
}

type waitPromptIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to wait on"`
	FromCursor     *int64 `json:"from_cursor,omitempty" jsonschema:"byte offset in the spool to scan from: the resume_cursor of the previous call; omitted, the end of the spool now, so only a prompt printed after the call counts"`
	TimeoutMs      *int64 `json:"timeout_ms,omitempty" jsonschema:"how long to wait in milliseconds (the daemon's default when omitted)"`
	Raw            bool   `json:"raw,omitempty" jsonschema:"true: the spool's bytes as they are, internal prompt marker lines included (default false: clean text)"`
}

type expectSendIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to use"`
	Expect         string `json:"expect" jsonschema:"text to wait for before sending"`
	MatchType      string `json:"match_type,omitempty" jsonschema:"how expect matches: substring (default) or regex"`
	Send           string `json:"send" jsonschema:"bytes to type as soon as expect matched, under the terminal's lock (end a line with \\r)"`
	FromCursor     *int64 `json:"from_cursor,omitempty" jsonschema:"byte offset in the spool to scan from: the resume_cursor of the previous call; omitted, the end of the spool now"`
	TimeoutMs      *int64 `json:"timeout_ms,omitempty" jsonschema:"how long to wait in milliseconds (the daemon's default when omitted)"`
	RequestID      string `json:"request_id,omitempty" jsonschema:"optional idempotency key: a retry with the same request_id returns the first response and does not type again"`
	Raw            bool   `json:"raw,omitempty" jsonschema:"true: the spool's bytes as they are, internal prompt marker lines included (default false: clean text)"`
}

type readSpoolIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose spool to read"`
	FromCursor     int64  `json:"from_cursor" jsonschema:"byte offset to read from: 0 at first, then the resume_cursor of the previous call"`
	MaxBytes       *int64 `json:"max_bytes,omitempty" jsonschema:"most bytes to return (the daemon's default when omitted)"`
	Raw            bool   `json:"raw,omitempty" jsonschema:"true: the spool's bytes as they are, internal prompt marker lines included (default false: clean text)"`
}

type convIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to use"`
}

type blocksSinceIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose blocks to list"`
	Since          *int64 `json:"since,omitempty" jsonschema:"list the blocks whose seq is greater than this: omit or 0 for all, then the largest seq you have seen"`
	Limit          *int64 `json:"limit,omitempty" jsonschema:"at most this many blocks (default and cap 500)"`
}

type endSessionIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose terminal to use"`
	GraceMs        *int64 `json:"grace_ms,omitempty" jsonschema:"how long to wait after Ctrl+C before forcing (the daemon's default when omitted)"`
	RequestID      string `json:"request_id,omitempty" jsonschema:"optional request id, sent as X-CM-LAB-REQUEST-ID; the daemon logs it but does not dedupe this route, and a repeated end is harmless (it finds nothing running)"`
}

type resetIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose shell to restart"`
	Reason         string `json:"reason,omitempty" jsonschema:"why, recorded in the transcript's pty.session.reset event"`
	RequestID      string `json:"request_id,omitempty" jsonschema:"optional request id, sent as X-CM-LAB-REQUEST-ID; the daemon does not dedupe this route, so a repeated reset restarts the shell again: check pty_status first"`
}

type blockIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation the block belongs to"`
	BlockID        string `json:"block_id" jsonschema:"the block id (blk_…) from pty_exec, pty_exec_interactive or blocks_since"`
}

type blocksReadIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation the block belongs to"`
	BlockID        string `json:"block_id" jsonschema:"the block id (blk_…) whose raw output to read"`
	Offset         *int64 `json:"offset,omitempty" jsonschema:"byte offset into the block's output (0 when omitted)"`
	MaxBytes       *int64 `json:"max_bytes,omitempty" jsonschema:"most bytes to return (the daemon's default when omitted)"`
	Raw            bool   `json:"raw,omitempty" jsonschema:"true: the output's bytes as they are (default false: an echoed command line is hidden)"`
}

type blocksSearchIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation to search"`
	Q              string `json:"q" jsonschema:"text to search for in the output"`
	BlockID        string `json:"block_id,omitempty" jsonschema:"optional: search only this block's output"`
}

type feedbackPollIn struct {
	Since     cursorArg `json:"since,omitempty" jsonschema:"byte cursor into the feedback store: \"0\" (default) at first, then the nextCursor of the previous poll (a string; a number is accepted too)"`
	SessionID string    `json:"sessionId,omitempty" jsonschema:"optional: only feedback of this Lab session (the sessionId of lab_session); the cursor still advances past other sessions' entries"`
	Limit     *int      `json:"limit,omitempty" jsonschema:"optional: at most this many items (capped at 500); poll again from nextCursor for the rest"`
	WaitSec   *float64  `json:"wait_seconds,omitempty" jsonschema:"optional: when nothing is new after since, wait up to this many seconds (at most 600) for the next entry instead of answering empty"`
}

type emptyIn struct{}

// validID checks an id before it goes into a path, so that a bad id is a
// clear INVALID_ARGUMENT rather than a confusing 404.
func validID(name, id string) error {
	if err := home.ValidateID(id); err != nil {
		return &CallError{Status: http.StatusBadRequest, Code: "INVALID_ARGUMENT", Message: name + ": " + err.Error(),
			Context: map[string]any{"fix": "Use an id of 1–128 characters of [A-Za-z0-9_.-]."}}
	}
	return nil
}

// cursorArg is the feedback cursor: a string per seed 000, but a number an
// agent copied without quotes means the same offset.
type cursorArg string

func (c *cursorArg) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = cursorArg(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*c = cursorArg(n.String())
	return nil
}
