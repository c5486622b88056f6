package labapi

import (
	"log/slog"
	"net/http"
)

// RequestLogMessage is the message of the request log's records (one per
// request), by which the daemon's log tells them from the rest: --quiet
// drops them, and stderr never shows them.
const RequestLogMessage = "request"

// requestLogLevel is the level of a request's log record: DEBUG for a
// health check answered 200 (every CLI command makes a few to find its
// daemon, which would otherwise be most of the log), INFO for the rest.
func requestLogLevel(route string, status int) slog.Level {
	if route == "GET /api/health" && status == http.StatusOK {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// WriteError writes err's error envelope, as the handlers do: for a
// handler that wraps the server's (labapi.DialOptions.WrapLocal).
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }
