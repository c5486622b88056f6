// Package console owns the operator console's browser side (issue 30):
// its login (one-time codes exchanged for a session cookie, sessions.go),
// its embedded pages (static/: one HTML shell, one ES module per view, CSS;
// no third-party code, no build step; assets.go), and what the pages need
// that no other package keeps — the log's pages newest first, read from the
// segment files backwards within a time budget (logpage.go), the recent
// rate and latency of acknowledgements (rates.go), and terminal output
// rendered to HTML by terminal-to-html and a VT emulator (render.go,
// termcss.go). Its HTTP routes live in labapi (console*.go), which holds
// the engine; docs/console.md lists them.
//
// # Login
//
// The operator token (state/token) never travels to a browser. `cmlab
// open` asks the running daemon, with that token, for a one-time code
// (Sessions.NewCode): 32 random bytes (hex), valid CodeTTL, usable once,
// held only in this daemon's memory — so a code of an earlier daemon run
// is unknown to this one. GET /console/login?code= exchanges it
// (Sessions.Exchange) for a session: another 32 random bytes, set as the
// cookie CookieName (HttpOnly, SameSite=Strict, Path=/), ended by
// Sessions.Revoke (`cmlab open --revoke`), by IdleTTL without a request,
// and by the daemon's exit (nothing is written to disk). The maps hold the
// SHA-256 of codes and session ids, never the secrets, and are capped
// (MaxCodes, MaxSessions: the oldest goes first), so neither a flood of
// codes nor of logins grows the daemon.
//
// The server (labapi) treats a request carrying a live session cookie as
// the operator on the routes the console uses, and only there; a write
// so authenticated must also carry an Origin header equal to the daemon's
// own origin (a cookie is sent by the browser on its own; the Origin
// check is what makes it the console's page that asked).
//
// Browsers scope cookies by host, not port (RFC 6265 §8.5): a page served
// on another port of 127.0.0.1 by another local program receives the
// cookie. IdleTTL keeps such a window short, and `cmlab open --revoke`
// closes it; the codes and the operator token are never exposed that way.
package console
