package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure NewServer.
type Options struct {
	// Version is reported to clients in the initialize handshake.
	Version string
	// Logger receives the SDK's and the tools' diagnostics; default discard.
	Logger *slog.Logger
}

// Instructions tell a client what the server is for and how its cursors work.
const Instructions = `cmlab's agent terminal and Lab feedback as tools.

Terminal: each conversation_id owns one bash. To run a command and know how it ended, call pty_exec_wait: it answers when the command has finished (done, exit_code, its output, resume_cursor after it). pty_exec starts a block and returns at once; pty_exec_interactive starts a program you drive with pty_send / pty_expect_send until it returns to the prompt (pty_wait_prompt). Output is an append-only spool addressed by byte cursors: every call that starts or feeds a command returns resume_cursor, the spool position just before its input; pass it as from_cursor to the next wait or read (it is the only cursor; it never goes backwards). A wait without from_cursor starts at the end of the spool, so it only sees output that comes after it. A prompt wait only ever answers the latest command's prompt. Reads show clean text (no internal marker lines; what you typed is shown where you typed it); raw:true shows the spool's bytes. Blocks are listed with blocks_since, read with blocks_get / blocks_read and searched with blocks_search. Commands run in the conversation's directory unless cwd is given; cwd applies to that command only.

Lab: lab_session names the current Lab session; lab_runs_list / lab_run_get / lab_experiments_list show runs and experiments; lab_feedback_add records feedback; lab_feedback_poll pages through human feedback with a byte cursor: since="0" first, then the nextCursor of the previous poll, which never repeats or skips an entry — with wait_seconds it waits for the next entry instead of answering empty.

Mutating tools take an optional request_id: a retry with the same request_id returns the first answer and does nothing again (pty_end_session and pty_reset are not deduplicated by the daemon). Errors carry the HTTP API's code and a fix.`

// NewServer returns an MCP server whose tools call d.
func NewServer(d *Daemon, opts Options) *sdk.Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "cmlab", Title: "cmlab agent terminal and Lab", Version: opts.Version},
		&sdk.ServerOptions{Instructions: Instructions, Logger: opts.Logger})
	registerTools(s, d, opts.Logger)
	return s
}

// ToolNames lists the tools NewServer registers, in registration order.
func ToolNames() []string {
	return []string{
		"pty_exec", "pty_exec_interactive", "pty_send", "pty_wait_for", "pty_wait_prompt",
		"pty_expect_send", "pty_read_spool", "pty_status", "pty_end_session", "pty_reset",
		"blocks_since", "blocks_get", "blocks_read", "blocks_search",
		"lab_feedback_poll", "lab_session",
		"pty_exec_wait", "pty_interrupt", "lab_runs_list", "lab_run_get", "lab_experiments_list", "lab_feedback_add",
	}
}

// kind says how a tool changes the world, for its annotations.
type kind int

const (
	readOnly kind = iota // reads; safe to repeat
	mutating             // acts; takes request_id
)

// spec is one tool: its name, what an agent should know to use it, the
// fields of its answer (documented in the output schema) and its kind.
type spec struct {
	name  string
	title string
	desc  string
	out   []field
	kind  kind
	// enums restricts string inputs to listed values in the input schema.
	enums map[string][]any
	// types widens an input's JSON types in the input schema.
	types map[string][]string
	// runs: the tool runs or types commands (openWorldHint: what they
	// touch is outside cmlab).
	runs bool
}

type field struct{ name, doc string }

// add registers one tool whose input In is turned into an HTTP request by
// build. The answer body becomes the structured content and its JSON the
// text content; an error answer becomes a tool error carrying the
// envelope. A panic in a tool is a tool error, never a dead server.
func add[In any](s *sdk.Server, d *Daemon, log *slog.Logger, sp spec, build func(In) (request, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %s: %v", sp.name, err))
	}
	// A tool of the terminal names its conversation in ConversationID
	// (conversation_id): its id is checked here, before build, for all.
	convField, hasConv := reflect.TypeFor[In]().FieldByName("ConversationID")
	for name, vals := range sp.enums {
		in.Properties[name].Enum = vals
	}
	for name, types := range sp.types {
		in.Properties[name].Type, in.Properties[name].Types = "", types
	}
	t := &sdk.Tool{
		InputSchema:  in,
		Name:         sp.name,
		Title:        sp.title,
		Description:  sp.desc,
		OutputSchema: outputSchema(sp.out),
		Annotations:  annotations(sp),
	}
	sdk.AddTool(s, t, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (res *sdk.CallToolResult, out any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("mcp tool panicked", "tool", sp.name, "panic", p, "stack", string(debug.Stack()))
				res, out, err = toolError(&CallError{Code: "INTERNAL", Message: fmt.Sprintf("tool %s failed: %v", sp.name, p),
					Context: map[string]any{"fix": "This is a bug in cmlab; the server keeps running. Retry, or use the HTTP API."}}), nil, nil
			}
		}()
		if hasConv {
			if err := validID("conversation_id", reflect.ValueOf(in).FieldByIndex(convField.Index).String()); err != nil {
				return toolError(err), nil, nil
			}
		}
		r, err := build(in)
		if err != nil {
			return toolError(err), nil, nil
		}
		body, err := d.call(ctx, r)
		if err != nil {
			if ctx.Err() != nil {
				return toolError(&CallError{Code: "CANCELLED", Message: sp.name + " was cancelled by the client: " + ctx.Err().Error(),
					Context: map[string]any{"fix": "Call again with the last resume_cursor you have."}}), nil, nil
			}
			return toolError(err), nil, nil
		}
		if body[0] != '{' { // structured content is an object; a route answering otherwise is wrapped
			return nil, map[string]json.RawMessage{"result": body}, nil
		}
		return nil, body, nil
	})
}

func annotations(sp spec) *sdk.ToolAnnotations {
	a := &sdk.ToolAnnotations{Title: sp.title}
	ow := sp.runs
	a.OpenWorldHint = &ow
	switch sp.kind {
	case readOnly:
		a.ReadOnlyHint, a.IdempotentHint = true, true
	case mutating:
		// Every terminal tool that acts can destroy: exec and send run
		// or type arbitrary commands, end and reset kill processes.
		d := strings.HasPrefix(sp.name, "pty_")
		a.DestructiveHint = &d
	}
	return a
}

// outputSchema documents the answer's fields without constraining their
// types: the answer is the HTTP route's body passed through unchanged, and
// a tool must never fail because a route added a field or sent a null.
func outputSchema(fields []field) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	for _, f := range fields {
		s.Properties[f.name] = &jsonschema.Schema{Description: f.doc}
	}
	return s
}

// toolError is the MCP tool error for err: text "CODE: message" plus the
// fix, and the HTTP envelope {"error":{code,message,context}} as
// structured content.
func toolError(err error) *sdk.CallToolResult {
	var ce *CallError
	if !errors.As(err, &ce) {
		fix := "Retry; if it persists, check the daemon log."
		if errors.Is(err, ErrUnreachable) {
			fix = "Start the daemon (cmlab serve) or restart cmlab mcp so it opens the home itself."
		}
		ce = &CallError{Code: "INTERNAL", Message: err.Error(), Context: map[string]any{"fix": fix}}
	}
	ctxMap := ce.Context
	if ctxMap == nil {
		ctxMap = map[string]any{}
	}
	text := ce.Code + ": " + ce.Message
	if fix := ce.Fix(); fix != "" {
		text += "\nfix: " + fix
	}
	env := map[string]any{"error": map[string]any{"code": ce.Code, "message": ce.Message, "context": ctxMap}}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: env}
	res.SetError(err)
	return res
}

// ErrorOf decodes the envelope a tool error carries (for clients and tests):
// ok is false when res is not an error.
func ErrorOf(res *sdk.CallToolResult) (code, message, fix string, ok bool) {
	if res == nil || !res.IsError {
		return "", "", "", false
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", "", "", true
	}
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Context map[string]any `json:"context"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil {
		fix, _ = env.Error.Context["fix"].(string)
		return env.Error.Code, env.Error.Message, fix, true
	}
	return "", "", "", true
}

func invalid(msg, fix string) error {
	return &CallError{Status: http.StatusBadRequest, Code: "INVALID_ARGUMENT", Message: msg, Context: map[string]any{"fix": fix}}
}

func ptyPath(conv string, op ...string) string {
	return "/api/pty/" + url.PathEscape(conv) + "/" + strings.Join(op, "/")
}

func setInt(q url.Values, name string, v *int64) {
	if v != nil {
		q.Set(name, strconv.FormatInt(*v, 10))
	}
}

// body is a JSON object with the fields the route takes; nil pointers are
// left out so the route applies its default.
type body map[string]any

func (b body) opt(name string, v *int64) body {
	if v != nil {
		b[name] = *v
	}
	return b
}

func (b body) optBool(name string, v bool) body {
	if v {
		b[name] = true
	}
	return b
}

func (b body) optString(name, v string) body {
	if v != "" {
		b[name] = v
	}
	return b
}

var (
	cursorOut = field{"resume_cursor", "the spool byte offset to pass as from_cursor next time; the only cursor, never decreasing"}
	okOut     = field{"ok", "true when the operation succeeded"}
)

func registerTools(s *sdk.Server, d *Daemon, log *slog.Logger) {
	// exec builds pty_exec and pty_exec_interactive: route op, fix for an empty cmd.
	exec := func(op, fix string) func(execIn) (request, error) {
		return func(in execIn) (request, error) {
			if strings.TrimSpace(in.Cmd) == "" {
				return request{}, invalid("cmd is empty", fix)
			}
			return request{method: "POST", path: ptyPath(in.ConversationID, op), reqID: in.RequestID,
				body: body{"cmd": in.Cmd}.optString("cwd", in.Cwd)}, nil
		}
	}

	add(s, d, log, spec{name: "pty_exec", title: "Start a command as a block", kind: mutating, runs: true,
		desc: "Start one shell command in the conversation's terminal as a block (BEGIN…END) and return at once, while it runs; " +
			"to run a command and get its exit code and output in one call, use pty_exec_wait instead. Returns block_id and " +
			"resume_cursor (the spool position before the command): pass it as from_cursor to pty_wait_prompt, which returns when " +
			"this command has finished (exit code in extra), or to pty_wait_for / pty_read_spool. cwd runs this command in that " +
			"directory without changing the conversation's. " +
			"Refused with BUSY while a block runs and while an interactive session is open (end it with pty_wait_prompt or pty_end_session).",
		out: []field{okOut, {"block_id", "id of the new block"}, {"seq", "the block's sequence number in this conversation"}, {"ts", "start time"}, cursorOut}},
		exec("exec_block", "Pass the command line to run in cmd."))

	add(s, d, log, spec{name: "pty_exec_interactive", title: "Start an interactive program", kind: mutating, runs: true,
		desc: "Start a program you will drive by hand (installer, REPL, prompt-asking tool) as an interactive session. " +
			"Returns session_id, block_id and resume_cursor (the spool size now): pass that resume_cursor to pty_wait_for / " +
			"pty_expect_send, answer with pty_send, and finish with pty_wait_prompt, which returns once the shell prompt is back " +
			"and the session is idle. While it runs, pty_exec is refused.",
		out: []field{okOut, {"session_id", "id of the interactive session"}, {"block_id", "id of its block"}, {"ts_begin", "start time"}, cursorOut}},
		exec("exec_interactive", "Pass the program to start in cmd."))

	add(s, d, log, spec{name: "pty_send", title: "Type into the terminal", kind: mutating, runs: true,
		desc: "Type data into the conversation's terminal (an answer to an interactive program: end it with \\r for Enter; " +
			"\\u0003 is Ctrl+C). Returns resume_cursor, the spool position before the input: wait for the program's reaction " +
			"with pty_wait_for from it.",
		out: []field{okOut, cursorOut}},
		func(in sendIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "send"), reqID: in.RequestID, body: body{"data": in.Data}}, nil
		})

	add(s, d, log, spec{name: "pty_wait_for", title: "Wait for output", kind: readOnly,
		enums: map[string][]any{"match_type": {"substring", "regex", "prompt"}},
		desc: "Wait until the spool, scanned from from_cursor (omitted: the end of the spool now, so only new output matches), contains match (match_type substring, regex, or prompt for the " +
			"next prompt sentinel), or timeout_ms passes. On a match: matched=true, match_text, match_span {start,end} and " +
			"resume_cursor = match_span.end. On timeout: ok=false, error \"timeout\", resume_cursor = the spool size. " +
			"Always pass the returned resume_cursor as the next from_cursor; it never skips a match in the scanned range. " +
			"Cancelling the call stops the wait.",
		out: []field{okOut, {"matched", "whether match was found"}, {"match_text", "the matched text"}, {"match_cursor", "where the match starts"},
			{"match_span", "{start, end} byte offsets of the match"}, cursorOut, {"error", "\"timeout\" when nothing matched in time"}, {"extra", "prompt details for match_type prompt"}}},
		func(in waitForIn) (request, error) {
			mt := in.MatchType
			if mt == "" {
				mt = "substring"
			}
			switch mt {
			case "substring", "regex", "prompt":
			default:
				return request{}, invalid("match_type "+strconv.Quote(mt)+" is not substring, regex or prompt", "Use match_type substring, regex or prompt.")
			}
			if mt != "prompt" && in.Match == "" {
				return request{}, invalid("match is empty", "Pass the text to wait for in match, or use match_type prompt.")
			}
			return request{method: "POST", path: ptyPath(in.ConversationID, "wait_for"),
				body: body{"match": in.Match, "match_type": mt}.opt("from_cursor", in.FromCursor).opt("timeout_ms", in.TimeoutMs).optBool("raw", in.Raw)}, nil
		})

	add(s, d, log, spec{name: "pty_wait_prompt", title: "Wait for the shell prompt", kind: readOnly,
		desc: "Wait, from from_cursor (omitted: the end of the spool now), until the shell prints its prompt sentinel again AND the terminal is idle (an interactive " +
			"session is then finished, with its exit code). Returns resume_cursor for the next call; on timeout ok=false, " +
			"error \"timeout\" (pty_status shows what still runs; pty_end_session interrupts it).",
		out: []field{okOut, {"matched", "whether the prompt came back"}, cursorOut, {"error", "\"timeout\" when it did not"}, {"exit_code", "exit status of the finished command, when known"}}},
		func(in waitPromptIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "wait_prompt"),
				body: body{}.opt("from_cursor", in.FromCursor).opt("timeout_ms", in.TimeoutMs).optBool("raw", in.Raw)}, nil
		})

	add(s, d, log, spec{name: "pty_expect_send", title: "Wait for text, then type", kind: mutating, runs: true,
		enums: map[string][]any{"match_type": {"substring", "regex"}},
		desc: "Atomically wait for expect (from from_cursor; omitted: the end of the spool now) and, the moment it matches, type send — no other input can slip in " +
			"between. Answers like pty_wait_for (match_span, resume_cursor = match end); on timeout nothing is typed.",
		out: []field{okOut, {"matched", "whether expect was found (and send typed)"}, {"match_text", "the matched text"},
			{"match_span", "{start, end} byte offsets of the match"}, cursorOut, {"error", "\"timeout\" when nothing matched in time"}}},
		func(in expectSendIn) (request, error) {
			if in.Expect == "" {
				return request{}, invalid("expect is empty", "Pass the text to wait for in expect.")
			}
			return request{method: "POST", path: ptyPath(in.ConversationID, "expect_send"), reqID: in.RequestID,
				body: body{"expect": in.Expect, "send": in.Send}.opt("from_cursor", in.FromCursor).optString("match_type", in.MatchType).opt("timeout_ms", in.TimeoutMs).optBool("raw", in.Raw)}, nil
		})

	add(s, d, log, spec{name: "pty_read_spool", title: "Read terminal output", kind: readOnly,
		desc: "Read up to max_bytes of the conversation's output spool from from_cursor. Returns data, cursor (where data starts) " +
			"and resume_cursor (where to read next). data is clean text: no internal marker lines, and what was typed with " +
			"pty_send shown where it was typed; raw=true returns the spool's bytes as they are (cursors are spool offsets either way).",
		out: []field{okOut, {"data", "the output (newlines normalised to \\n)"}, {"cursor", "byte offset of data"}, cursorOut}},
		func(in readSpoolIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "read_spool"),
				body: body{"from_cursor": in.FromCursor}.opt("max_bytes", in.MaxBytes).optBool("raw", in.Raw)}, nil
		})

	add(s, d, log, spec{name: "pty_status", title: "Terminal status", kind: readOnly,
		desc: "The conversation's terminal state: mode (idle, block_running, interactive), the active session and block, and " +
			"resume_cursor = the spool size now (a good from_cursor before pty_exec).",
		out: []field{okOut, {"mode", "idle | block_running | interactive"}, {"active_session_id", "the open interactive session"},
			{"active_block_id", "the running block"}, {"shell_id", "the shell's id"}, cursorOut,
			{"shell_alive", "whether the shell process runs"}, {"foreground", "the command in the foreground, when not the shell"}, {"blocks", "number of blocks so far"},
			{"block_output_cap", "bytes of output stored per block (negative: no cap); past it output is dropped and counted"},
			{"conversation_output_cap", "bytes of output stored per conversation (negative: no cap)"},
			{"total_output_cap", "bytes of output stored across all conversations (negative: no cap)"},
			{"total_stored_bytes", "bytes of output all conversations store now"},
			{"dropped_bytes", "output dropped past the caps in this conversation"},
			{"active_block_bytes", "output stored for the running block"}, {"active_block_dropped_bytes", "output the running block dropped past a cap"}}},
		func(in convIn) (request, error) {
			return request{method: "GET", path: ptyPath(in.ConversationID, "status")}, nil
		})

	add(s, d, log, spec{name: "pty_end_session", title: "End what runs in the terminal", kind: mutating,
		desc: "End what runs in the conversation's terminal: Ctrl+C first, then force after grace_ms. The running block or " +
			"interactive session ends and the terminal returns to idle (mode in the answer); ended / forced / reset say how.",
		out: []field{okOut, {"mode", "the terminal's mode afterwards (idle)"}, {"block_id", "the block that was ended"},
			{"ended", "whether something was running and ended"}, {"forced", "whether Ctrl+C was not enough"}, {"reset", "whether the shell had to be restarted"}}},
		func(in endSessionIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "end_session"), reqID: in.RequestID, body: body{}.opt("grace_ms", in.GraceMs)}, nil
		})

	add(s, d, log, spec{name: "pty_reset", title: "Restart the shell", kind: mutating,
		desc: "Kill the conversation's shell and start a new one (use when it is wedged). The old spool and blocks stay and " +
			"cursors keep counting: continue from the returned resume_cursor.",
		out: []field{okOut, {"shell_id", "the new shell"}, {"old_shell_id", "the shell that was killed"}, cursorOut}},
		func(in resetIn) (request, error) {
			return request{method: "POST", path: ptyPath(in.ConversationID, "reset"), reqID: in.RequestID, body: body{}.optString("reason", in.Reason)}, nil
		})

	add(s, d, log, spec{name: "blocks_since", title: "List blocks", kind: readOnly,
		desc: "List the conversation's blocks, oldest first: block_id, seq, cmd, cwd, ts_begin, ts_end, status (running, " +
			"completed, failed, cancelled, interactive), exit_code, output_path. Page with since = the largest seq you got.",
		out: []field{okOut, {"blocks", "the block records, oldest first"}}},
		func(in blocksSinceIn) (request, error) {
			q := url.Values{}
			setInt(q, "since", in.Since)
			setInt(q, "limit", in.Limit)
			return request{method: "GET", path: ptyPath(in.ConversationID, "blocks"), query: q}, nil
		})

	add(s, d, log, spec{name: "blocks_get", title: "Get one block", kind: readOnly,
		desc: "One block's record: cmd, cwd, ts_begin, ts_end, status (running, completed, failed, cancelled, interactive), exit_code.",
		out:  []field{okOut, {"block", "the block record"}}},
		func(in blockIn) (request, error) {
			if err := validID("block_id", in.BlockID); err != nil {
				return request{}, err
			}
			return request{method: "GET", path: ptyPath(in.ConversationID, "blocks", url.PathEscape(in.BlockID))}, nil
		})

	add(s, d, log, spec{name: "blocks_read", title: "Read a block's output", kind: readOnly,
		desc: "Read a block's own output (blocks/<block_id>.out) from offset, at most max_bytes. Continue with offset = the " +
			"returned resume_cursor until complete is true (the block ended and everything was read).",
		out: []field{okOut, {"block_id", "the block"}, {"data", "the output bytes"}, {"cursor", "byte offset of data in the block's output"},
			{"resume_cursor", "the offset to read from next"}, {"size", "the block output's size now"}, {"complete", "true when the block ended and data reaches its end"}}},
		func(in blocksReadIn) (request, error) {
			if err := validID("block_id", in.BlockID); err != nil {
				return request{}, err
			}
			q := url.Values{}
			setInt(q, "offset", in.Offset)
			setInt(q, "max_bytes", in.MaxBytes)
			if in.Raw {
				q.Set("raw", "true")
			}
			return request{method: "GET", path: ptyPath(in.ConversationID, "blocks", url.PathEscape(in.BlockID), "output"), query: q}, nil
		})

	add(s, d, log, spec{name: "blocks_search", title: "Search terminal output", kind: readOnly,
		desc: "Search the conversation's output for q (optionally within one block_id). Each hit names its block and spool offset.",
		out:  []field{okOut, {"matches", "the hits: block_id, match_cursor (spool offset), line, line_cursor"}, {"truncated", "true when there were more hits than returned"}}},
		func(in blocksSearchIn) (request, error) {
			if in.Q == "" {
				return request{}, invalid("q is empty", "Pass the text to search for in q.")
			}
			q := url.Values{"q": {in.Q}}
			if in.BlockID != "" {
				if err := validID("block_id", in.BlockID); err != nil {
					return request{}, err
				}
				q.Set("block_id", in.BlockID)
			}
			return request{method: "GET", path: ptyPath(in.ConversationID, "search"), query: q}, nil
		})

	add(s, d, log, spec{name: "lab_feedback_poll", title: "Poll human feedback", kind: readOnly,
		types: map[string][]string{"since": {"string", "integer"}},
		desc: "New human feedback from the Lab, oldest first. since is a byte cursor: \"0\" the first time, then the nextCursor " +
			"of the previous poll — you get every entry exactly once, with no gap. sessionId filters to one Lab session (the " +
			"cursor still advances past others); limit caps the items (max 500), the rest come on the next poll. An empty items " +
			"list means nothing new yet: poll again later with the same nextCursor — or pass wait_seconds to wait for the next entry " +
			"in this call (a long poll: it answers as soon as a human adds feedback).",
		out: []field{{"items", "feedback entries (id, createdAt, sessionId, runId, experimentId, variantId, ratings, notes, tags, …)"},
			{"nextCursor", "the cursor to pass as since next time"}}},
		func(in feedbackPollIn) (request, error) {
			q := url.Values{}
			since := string(in.Since)
			if since == "" {
				since = "0"
			}
			q.Set("since", since)
			if in.SessionID != "" {
				q.Set("sessionId", in.SessionID)
			}
			if in.Limit != nil {
				q.Set("limit", strconv.Itoa(*in.Limit))
			}
			if in.WaitSec != nil {
				if *in.WaitSec < 0 || *in.WaitSec > 600 {
					return request{}, invalid("wait_seconds must be 0–600", "Pass wait_seconds between 0 and 600, or omit it.")
				}
				q.Set("wait", strconv.FormatFloat(*in.WaitSec, 'f', -1, 64)+"s")
			}
			return request{method: "GET", path: "/api/feedback", query: q}, nil
		})

	add(s, d, log, spec{name: "lab_session", title: "Current Lab session", kind: readOnly,
		desc: "The daemon's current Lab session: sessionId (pass it to lab_feedback_poll to see only this session's feedback), " +
			"startedAt and walIndex.",
		out: []field{{"sessionId", "the Lab session id (lab_…)"}, {"startedAt", "when it started"}, {"walIndex", "the log's last sequence"}}},
		func(emptyIn) (request, error) {
			return request{method: "GET", path: "/api/session"}, nil
		})

	registerAgentTools(s, d, log) // tools_agent.go
}
