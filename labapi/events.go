package labapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cmlab/cmlab/events"
)

// sseBatch bounds how many events one client is sent between flushes; with
// the write deadline it bounds what a client can hold up: a client that
// cannot take a batch within SSEWriteTimeout is dropped.
const sseBatch = 256

func (s *Server) registerEventRoutes() {
	s.route("GET /api/events", authLabStream, s.handleEvents)
}

// StreamEvent is the JSON of one SSE data line: the envelope with its
// payload decoded (events.Streamed, one of the event's JSON views).
type StreamEvent = events.Streamed

// labStreamTypes are the events the Lab token may see on /api/events: the
// Lab's own records, which its routes serve anyway. Everything else —
// terminal input and output, steps, recovery, the log's own events and
// idempotency snapshots (which hold terminal answers) — needs the
// operator token. Seqs stay the log's, so a Lab stream has gaps and
// Last-Event-ID resumes it the same way.
var labStreamTypes = map[string]bool{
	events.TypeLabSessionStarted:   true,
	events.TypeFeedbackSubmitted:   true,
	events.TypeFeedbackIngested:    true,
	events.TypeRunImported:         true,
	events.TypeExperimentCreated:   true,
	events.TypeExperimentSubmitted: true,
	events.TypeExperimentUpdated:   true,
	events.TypeRunAdopted:          true,
	events.TypeExperimentAdopted:   true,
}

// handleEvents (a token required; the Lab token sees labStreamTypes only,
// the operator token everything; EventSource clients, which cannot set
// headers, may pass the Lab token as ?token=) streams the log as server-sent events: "id: <seq>", "event:
// <type>", "data: <StreamEvent JSON>". It starts after Last-Event-ID when
// the client resumes, else after ?since= (default: from the start). Each
// client reads the log itself, woken by Log().Changed(), so a slow client
// never holds up an append; one that stalls a write past SSEWriteTimeout
// is dropped and resumes with Last-Event-ID. Idle streams get a comment
// heartbeat.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	after := uint64(0)
	arg, argName := r.URL.Query().Get("since"), "since"
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		arg, argName = v, "Last-Event-ID"
	}
	if arg = strings.TrimSpace(arg); arg != "" {
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			return NewError(CodeInvalidCursor, "Invalid "+argName+": "+truncate(arg, 40), "Send the seq of the last event received (or since=0 for the whole log).")
		}
		after = n
	}
	kind := s.tokenKind(r)
	labOnly := kind != tokenOperator && kind != tokenSession
	lg := s.opts.Engine.Log()
	if last := lg.LastSeq(); after > last {
		return NewError(CodeInvalidCursor, fmt.Sprintf("%s %d is beyond the end of the log (%d)", argName, after, last), "Reset since=0.").With("walIndex", last)
	}
	if labOnly {
		// Lab streams have their own budget below the connection cap
		// (events_budget.go): the operator always gets through.
		release, err := s.holdLabStream(w)
		if err != nil {
			return err
		}
		defer release()
	}
	es := startEventStream(w, 32<<10, s.opts.SSEWriteTimeout)
	m := s.metrics
	m.sseClients.Add(1)
	defer m.sseClients.Add(-1)

	fmt.Fprintf(es, "retry: 1000\n: cmlab event stream after seq %d\n\n", after)
	if err := es.flush(); err != nil {
		return nil
	}
	heartbeat := time.NewTicker(s.opts.SSEHeartbeat)
	defer heartbeat.Stop()
	next := after + 1
	for {
		changed := lg.Changed() // taken before reading: no wake-up is missed
		last := lg.LastSeq()
		sent := 0
		for next <= last {
			// A client that is gone stops the reading (a Lab stream skips
			// most events and would otherwise write nothing that fails).
			if (next-after)%streamCheckEvery == 0 && s.streamGone(r) {
				return nil
			}
			s.streamReads.Add(1)
			ev, err := lg.Read(next)
			if err != nil {
				es.send("error", map[string]string{"error": err.Error()})
				return nil
			}
			next++
			if labOnly && !labStreamTypes[ev.Type] {
				continue
			}
			if sent%sseBatch == 0 {
				es.deadline()
			}
			if err := es.event(ev); err != nil {
				m.sseDropped.Add(1)
				return nil
			}
			sent++
			m.sseSent.Add(1)
			if sent%sseBatch == 0 {
				if err := es.flush(); err != nil {
					m.sseDropped.Add(1)
					return nil
				}
			}
		}
		if sent > 0 {
			if err := es.flush(); err != nil {
				m.sseDropped.Add(1)
				return nil
			}
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			es.WriteString(": heartbeat\n\n")
			if err := es.flush(); err != nil {
				m.sseDropped.Add(1)
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-s.closing.Done():
			return nil
		}
	}
}
