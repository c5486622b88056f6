// Package wire is the Lab API as its two clients speak it: labapi.Client
// (the CLI, over the daemon's socket or to a server in this process) and
// mcp.Daemon (the MCP tools, over loopback or in process). It builds a
// request with the token and request-id headers, answers it in this
// process as the daemon's HTTP server would, and reads the two error
// bodies the API answers with: the envelope
// {"error":{"code","message","context"}} and the terminal's refusal
// {"ok":false,"error","message"} (seed 001 §5.1). Each client keeps its
// own error type, limits and retries; the envelope is written by
// labapi's one error table (labapi/errors.go).
package wire
