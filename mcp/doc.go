// Package mcp is cmlab's Model Context Protocol face (SPEC §6, issue 9):
// the agent terminal, its blocks and the Lab feedback cursor as MCP tools,
// on github.com/modelcontextprotocol/go-sdk.
//
// The tools own no state and touch no file. Each one is a thin mapping from
// a tool call to one request against the daemon's HTTP API through a
// Daemon backend — an http.Handler in this process (the /mcp route of
// `cmlab serve`, or `cmlab mcp` with an engine of its own) or a running
// daemon over loopback (`cmlab mcp` while `cmlab serve` runs; Resolving
// finds a restarted daemon again after a refused connection) — so the
// daemon stays the single writer and a tool validates, dedupes and fails
// exactly like the route it calls. This package must not import labapi
// (labapi imports it to serve /mcp); the request headers, the in-process
// exchange and the error bodies it shares with labapi's client come from
// labapi/wire.
//
// Files: daemon.go (the backend and the error envelope), tools.go (tool
// inputs), server.go (tool definitions, results and errors), transport.go
// (stdio with its line guard, streamable HTTP).
//
// Contract:
//   - Tool names use underscores (pty_exec, pty_wait_for, blocks_since,
//     lab_feedback_poll, …; ToolNames lists them). Inputs use the seeds'
//     field names (conversation_id, cmd, from_cursor, match_type,
//     timeout_ms, resume_cursor; since, sessionId, limit, nextCursor).
//   - A successful answer is the route's JSON body, unchanged, as structured
//     content and as text.
//   - An error answer is a tool error (isError) whose text is "CODE:
//     message" plus the fix and whose structured content is the HTTP
//     envelope {"error":{"code","message","context":{"fix",…}}}.
//   - Reads and waits answer the daemon's clean view (no sentinel lines,
//     no command wrapper; typed input shown where it was typed); raw:true
//     asks for the spool's bytes. pty_exec_wait answers when its command
//     ended; every tool that starts or feeds a command answers the
//     resume_cursor taken before its input (issue 25).
//   - Tools that run or type commands say openWorldHint true.
//   - Mutating tools take request_id, sent as X-CM-LAB-REQUEST-ID, so a
//     retried call gets the first answer and acts once.
//   - Cancelling a call cancels its HTTP request: a long pty_wait_for ends
//     promptly and leaves the terminal usable.
//   - Nothing a client sends kills the server: a panicking tool is a tool
//     error, and on stdio a line that is not a JSON-RPC message (or is over
//     MaxLine) is answered with a JSON-RPC error and skipped (ServeStdio).
//   - At the end of stdin every request already read is answered before
//     the server ends.
package mcp
