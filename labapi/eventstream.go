package labapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/cmlab/cmlab/events"
)

// eventStream is one text/event-stream answer (GET /api/events and the
// console's playback): the headers sent, the request's read deadline
// lifted, and a buffered writer whose every flush must reach the client
// within the write timeout, or the client is dropped.
//
// The framing is the server-sent events one: fields "id:", "event:",
// "data:" and ":" comments, one per line, a blank line after each event.
type eventStream struct {
	*bufio.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

// startEventStream sends the headers of an event stream and returns it,
// buffering size bytes between flushes.
func startEventStream(w http.ResponseWriter, size int, writeTimeout time.Duration) *eventStream {
	rc := http.NewResponseController(w)
	// A stream outlives the server's ReadTimeout: lift the read deadline,
	// or the connection's background read would cancel the request.
	rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventStream{Writer: bufio.NewWriterSize(w, size), rc: rc, timeout: writeTimeout}
}

// deadline gives the writes from now on the write timeout to complete.
func (es *eventStream) deadline() {
	es.rc.SetWriteDeadline(time.Now().Add(es.timeout))
}

// flush sends what is buffered to the client, within the write timeout.
func (es *eventStream) flush() error {
	es.deadline()
	if err := es.Flush(); err != nil {
		return err
	}
	return es.rc.Flush()
}

// send writes one event of the given name whose data is v as JSON, and
// flushes it.
func (es *eventStream) send(event string, v any) error {
	es.deadline()
	fmt.Fprintf(es, "event: %s\ndata: %s\n\n", event, mustJSON(v))
	return es.flush()
}

// event writes one log event: its seq as the id, its type as the event
// name, its StreamEvent JSON as the data. It is not flushed.
func (es *eventStream) event(ev *events.Event) error {
	b, err := json.Marshal(events.Stream(ev))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(es, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
	return err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}
