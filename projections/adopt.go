package projections

import (
	"bytes"

	"github.com/cmlab/cmlab/events"
)

// renderAdopted projects a line adopted from a content-machine home
// (events.RunAdopted, ExperimentAdopted, SessionAdopted): its raw bytes
// and a '\n', appended to the view it was read from, so the view is the
// file content-machine wrote. A session line whose session id cannot be a
// path component, or whose file is not a session view, projects nothing.
func renderAdopted(ev *events.Event, r *rendered) error {
	p, err := decodePayload(ev)
	if err != nil {
		return err
	}
	var raw []byte
	switch p := p.(type) {
	case *events.RunAdopted:
		raw = p.Raw
	case *events.ExperimentAdopted:
		raw = p.Raw
	case *events.SessionAdopted:
		raw = p.Raw
	}
	if bytes.IndexByte(raw, '\n') >= 0 {
		return nil // one line each: never more
	}
	switch p := p.(type) {
	case *events.RunAdopted:
		r.add(RunsView, r.keep(append(append(r.buf(), p.Raw...), '\n')))
	case *events.ExperimentAdopted:
		r.add(ExperimentsView, r.keep(append(append(r.buf(), p.Raw...), '\n')))
	case *events.SessionAdopted:
		if !validID(p.Session) || !events.IsSessionFile(p.File) {
			return nil
		}
		r.add("lab/sessions/"+p.Session+"/"+p.File, r.keep(append(append(r.buf(), p.Raw...), '\n')))
	}
	return nil
}

// LinesFor returns the bytes ev writes to view, one entry per write (a
// line of a JSONL view), none when it writes nothing there or cannot be
// rendered: what the projector will append for ev.
func LinesFor(ev *events.Event, view string) [][]byte {
	var r rendered
	if err := render(ev, &r); err != nil {
		return nil
	}
	var out [][]byte
	for _, w := range r.writes {
		if w.view == view {
			out = append(out, w.data)
		}
	}
	return out
}
