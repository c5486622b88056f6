package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/events"
)

// View paths relative to the home, with forward slashes. Per-session and
// per-conversation views are built by the functions below.
const (
	FeedbackView    = "feedback/feedback.jsonl"
	RunsView        = "lab/runs.jsonl"
	ExperimentsView = "lab/experiments.jsonl"
	StepsView       = "steps/steps.jsonl"
)

// SessionEventsView is lab/sessions/<sessionId>/events.jsonl.
func SessionEventsView(sessionID string) string {
	return "lab/sessions/" + sessionID + "/events.jsonl"
}

// SessionIdempotencyView is lab/sessions/<sessionId>/idempotency.jsonl.
func SessionIdempotencyView(sessionID string) string {
	return "lab/sessions/" + sessionID + "/idempotency.jsonl"
}

// PtyEventsView is pty/<conversationId>/events.jsonl.
func PtyEventsView(conv string) string { return "pty/" + conv + "/events.jsonl" }

// PtyBlocksView is pty/<conversationId>/blocks.jsonl.
func PtyBlocksView(conv string) string { return "pty/" + conv + "/blocks.jsonl" }

// PtySpoolView is pty/<conversationId>/output.spool.
func PtySpoolView(conv string) string { return "pty/" + conv + "/output.spool" }

// PtyBlockOutputView is pty/<conversationId>/blocks/<blockId>.out.
func PtyBlockOutputView(conv, blockID string) string {
	return "pty/" + conv + "/blocks/" + blockID + ".out"
}

// write is one append to one view.
type write struct {
	view string
	data []byte
}

// rendered is what one event produces: the appends, in order.
type rendered struct {
	writes []write
	a      *arena // where the lines live; nil: each line its own allocation
}

// arenaChunk is the size of the blocks an arena carves lines from.
const arenaChunk = 64 << 10

// arena holds the rendered lines of a batch of events in a few reused
// blocks instead of one allocation per line (Rebuild renders millions of
// them). It is used by one goroutine at a time and reset once the batch is
// written.
type arena struct {
	chunks [][]byte
	n      int    // chunks in use
	cur    []byte // the chunk being filled: lines kept so far

	// Per-event strings that repeat from event to event, kept across
	// batches: the views of a Lab session and the ISO form of a timestamp.
	sessViews map[string]*[2]string
	tsMs      int64
	tsISO     string
}

// sessionViews returns SessionEventsView and SessionIdempotencyView of
// stream without building the strings again for every event.
func (r *rendered) sessionViews(stream string) (events, idem string) {
	if r.a == nil {
		return SessionEventsView(stream), SessionIdempotencyView(stream)
	}
	v, ok := r.a.sessViews[stream]
	if !ok {
		if r.a.sessViews == nil || len(r.a.sessViews) >= 1024 {
			r.a.sessViews = map[string]*[2]string{}
		}
		v = &[2]string{SessionEventsView(stream), SessionIdempotencyView(stream)}
		r.a.sessViews[strings.Clone(stream)] = v
	}
	return v[0], v[1]
}

// iso is isoTime(ms), remembering the last one (a burst of events often
// shares its millisecond).
func (r *rendered) iso(ms int64) string {
	if r.a == nil {
		return isoTime(ms)
	}
	if r.a.tsISO == "" || r.a.tsMs != ms {
		r.a.tsMs, r.a.tsISO = ms, isoTime(ms)
	}
	return r.a.tsISO
}

// arenaRoom is the free space buf wants at the end of the current chunk;
// a longer line outgrows it and becomes its own allocation (see keep).
const arenaRoom = 4 << 10

// nextChunk makes a.cur an empty chunk.
func (a *arena) nextChunk() {
	if a.n < len(a.chunks) {
		a.cur = a.chunks[a.n][:0]
	} else {
		a.cur = make([]byte, 0, arenaChunk)
		a.chunks = append(a.chunks, a.cur)
	}
	a.n++
}

func (a *arena) reset() { a.n, a.cur = 0, nil }

// buf returns an empty buffer to encode one line into: the free end of the
// arena's current chunk, so that a line is written once, where it stays.
// keep then claims it.
func (r *rendered) buf() []byte {
	if r.a == nil {
		return make([]byte, 0, 512)
	}
	a := r.a
	if cap(a.cur)-len(a.cur) < arenaRoom {
		a.nextChunk()
	}
	return a.cur[len(a.cur):len(a.cur)]
}

// keep returns b, a line built by appending to buf(), where it lasts until
// the batch is written: in place when it fit the chunk (the chunk's used
// part grows over it), else the allocation append made for it.
func (r *rendered) keep(b []byte) []byte {
	if r.a == nil || len(b) == 0 {
		return b
	}
	a := r.a
	free := a.cur[len(a.cur):cap(a.cur)]
	if len(free) >= len(b) && &free[0] == &b[0] {
		a.cur = a.cur[:len(a.cur)+len(b)]
	}
	return b[:len(b):len(b)]
}

func (r *rendered) add(view string, data []byte) {
	r.writes = append(r.writes, write{view: view, data: data})
}

// isLabSession reports whether stream names a Lab session usable as a path
// component.
func isLabSession(stream string) bool {
	return strings.HasPrefix(stream, "lab_") && validID(stream)
}

// validID is home.ValidateID as a predicate, without the regexp (it runs
// several times per event in a rebuild); TestValidIDMatchesHome holds the
// two together.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// jsonLine encodes v as one JSON line ending in '\n'. HTML characters are
// not escaped, as JSON.stringify does not escape them either.
func jsonLine(v any) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// IdempotencyLine is one line of lab/sessions/<sessionId>/idempotency.jsonl.
type IdempotencyLine struct {
	RequestID string          `json:"requestId"`
	Type      string          `json:"type"`
	EntityID  string          `json:"entityId"`
	CreatedAt string          `json:"createdAt"`
	Response  json.RawMessage `json:"response,omitempty"`
}

// SessionEventLine is one line of lab/sessions/<sessionId>/events.jsonl.
type SessionEventLine struct {
	Seq       uint64          `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"createdAt"`
	RequestID string          `json:"requestId,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// StepRecord is one line of steps/steps.jsonl: one record per transition.
// Only the fields of that transition are set; the last record per
// (mandate_id, step_id) holds the step's current status.
type StepRecord struct {
	Seq              uint64           `json:"seq"`
	At               string           `json:"at"`
	Event            string           `json:"event"`
	MandateID        string           `json:"mandate_id"`
	StepID           string           `json:"step_id"`
	Status           string           `json:"status"`
	Tool             string           `json:"tool,omitempty"`
	ParamsHash       string           `json:"params_hash,omitempty"`
	PreHash          string           `json:"pre_hash,omitempty"`
	ExpectedPostHash string           `json:"expected_post_hash,omitempty"`
	IdemKey          string           `json:"idem_key,omitempty"`
	World            []string         `json:"world,omitempty"`
	ObservedPreHash  string           `json:"observed_pre_hash,omitempty"`
	PostHash         string           `json:"post_hash,omitempty"`
	ResultHash       string           `json:"result_hash,omitempty"`
	ExitCode         *int             `json:"exit_code,omitempty"`
	OutputDigest     string           `json:"output_digest,omitempty"`
	Recovered        bool             `json:"recovered,omitempty"`
	ErrorClass       string           `json:"error_class,omitempty"`
	ErrorMsg         string           `json:"error_msg,omitempty"`
	Reason           string           `json:"reason,omitempty"`
	Evidence         *events.Evidence `json:"evidence,omitempty"`
}

// PtyEventLine is one line of pty/<conversationId>/events.jsonl, the
// agent_block_* stream. Output bytes are not repeated here: a delta names
// its block, spool offset and length; the bytes are in output.spool.
type PtyEventLine struct {
	Seq         uint64        `json:"seq"`
	TS          int64         `json:"ts"`
	Type        string        `json:"type"`
	RequestID   string        `json:"request_id,omitempty"`
	BlockID     string        `json:"block_id,omitempty"`
	Block       *events.Block `json:"block,omitempty"`
	SpoolOffset *int64        `json:"spool_offset,omitempty"`
	Len         *int          `json:"len,omitempty"`
	Data        string        `json:"data,omitempty"`
	Source      string        `json:"source,omitempty"`
	Line        string        `json:"line,omitempty"`
	Cwd         string        `json:"cwd,omitempty"`
	ExitCode    *int          `json:"exit_code,omitempty"`
	ShellID     string        `json:"shell_id,omitempty"`
	Pid         int           `json:"pid,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Dropped     *int64        `json:"dropped,omitempty"`
}

// pty event line types.
var ptyLineType = map[string]string{
	events.TypePtySessionStarted: "agent_session_started",
	events.TypePtyBlockBegin:     "agent_block_begin",
	events.TypePtyOutput:         "agent_block_delta",
	events.TypePtyBlockEnd:       "agent_block_end",
	events.TypePtyPrompt:         "agent_prompt",
	events.TypePtyInput:          "agent_input",
	events.TypePtySessionReset:   "agent_session_reset",
	events.TypePtySessionEnded:   "agent_session_ended",
	events.TypePtyTruncated:      "agent_output_truncated",
}

// render computes the appends ev causes. It is a pure function of ev.
// An event whose payload cannot be decoded, or whose ids cannot be path
// components, produces nothing for the views it cannot address (see doc.go).
func render(ev *events.Event, r *rendered) (err error) {
	r.writes = r.writes[:0]
	defer func() {
		// No payload may take the committer or a rebuild down: a panic
		// while decoding or encoding makes the event unprojectable, which
		// every projection of the log treats alike.
		if p := recover(); p != nil {
			r.writes = r.writes[:0]
			err = fmt.Errorf("projections: seq %d (%s): panic while rendering: %v", ev.Seq, ev.Type, p)
		}
	}()
	if strings.HasPrefix(ev.Type, "pty.") {
		return renderPty(ev, r)
	}
	if strings.HasPrefix(ev.Type, "step.") {
		return renderStep(ev, r)
	}
	switch ev.Type {
	case events.TypeLabSessionStarted, events.TypeFeedbackSubmitted, events.TypeFeedbackIngested,
		events.TypeRunImported, events.TypeExperimentCreated, events.TypeExperimentSubmitted,
		events.TypeExperimentUpdated, events.TypeIdempotencyRecorded:
		return renderLab(ev, r)
	case events.TypeRunAdopted, events.TypeExperimentAdopted, events.TypeSessionAdopted:
		return renderAdopted(ev, r) // adopt.go
	}
	// wal.*, recovery.* and unknown types have no view; they may still
	// carry a request (recorded below for Lab sessions).
	return renderIdempotency(ev, "", "", "", r)
}

func renderLab(ev *events.Event, r *rendered) error {
	p, err := decodePayload(ev)
	if err != nil {
		return err
	}
	ts := r.iso(ev.TS)
	entity, kind := "", ""
	// data is the payload as the session's events.jsonl shows it: the
	// records as projected (createdAt/updatedAt filled in). A payload of
	// one record leaves it in line, encoded into r.buf(), for view under
	// key.
	var data, line []byte
	view, key := "", ""
	switch p := p.(type) {
	case *events.FeedbackSubmitted:
		e := p.Entry
		fillTimes(ts, &e.CreatedAt)
		entity, view, key = e.ID, FeedbackView, "entry"
		line, err = appendFeedbackEntry(r.buf(), &e)
	case *events.FeedbackIngested:
		r.add(FeedbackView, r.keep(append(append(r.buf(), p.Raw...), '\n')))
	case *events.RunImported:
		run := p.Run
		fillTimes(ts, &run.CreatedAt)
		entity, view, key = run.RunID, RunsView, "run"
		line, err = appendLabRun(r.buf(), &run)
	case *events.ExperimentCreated:
		x := p.Experiment
		fillTimes(ts, &x.CreatedAt)
		entity, view, key = x.ExperimentID, ExperimentsView, "experiment"
		line, err = appendLabExperiment(r.buf(), &x)
	case *events.ExperimentSubmitted:
		first := len(r.writes)
		for i := range p.Feedback {
			e := p.Feedback[i]
			fillTimes(ts, &e.CreatedAt)
			line, err := appendFeedbackEntry(r.buf(), &e)
			if err != nil {
				return err
			}
			r.add(FeedbackView, r.keep(line))
		}
		x := p.Experiment
		fillTimes(ts, &x.CreatedAt, &x.UpdatedAt)
		if line, err = appendLabExperiment(r.buf(), &x); err != nil {
			return err
		}
		line = r.keep(line)
		r.add(ExperimentsView, line)
		entity = x.ExperimentID
		d := wrap1(r.buf(), "experiment", line)
		d = append(d[:len(d)-1], `,"feedback":[`...)
		for i, w := range r.writes[first : first+len(p.Feedback)] {
			if i > 0 {
				d = append(d, ',')
			}
			d = append(d, w.data[:len(w.data)-1]...)
		}
		data = r.keep(append(d, "]}"...))
	case *events.ExperimentUpdated:
		x := p.Experiment
		fillTimes(ts, &x.CreatedAt, &x.UpdatedAt)
		entity, view, key = x.ExperimentID, ExperimentsView, "experiment"
		line, err = appendLabExperiment(r.buf(), &x)
	case *events.IdempotencyRecorded:
		entity, kind = p.EntityID, p.Kind
	}
	if err != nil {
		return err
	}
	if view != "" {
		data = r.addRecord(view, key, line)
	}
	if isLabSession(ev.Stream) {
		if data == nil {
			line, err := jsonLine(p)
			if err != nil {
				return err
			}
			data = line[:len(line)-1]
		}
		view, _ := r.sessionViews(ev.Stream)
		r.add(view, r.keep(appendSessionEventLine(r.buf(),
			&SessionEventLine{Seq: ev.Seq, ID: ev.ID, Type: ev.Type, CreatedAt: ts, RequestID: ev.Req, Data: data})))
	}
	return renderIdempotency(ev, entity, kind, ts, r)
}

// fillTimes sets each of times that a record left empty to ts.
func fillTimes(ts string, times ...*string) {
	for _, t := range times {
		if *t == "" {
			*t = ts
		}
	}
}

// addRecord appends line, a record encoded into r.buf(), to view and
// returns it as the session's events.jsonl shows it: {"key":record}.
func (r *rendered) addRecord(view, key string, line []byte) []byte {
	line = r.keep(line)
	r.add(view, line)
	return r.keep(wrap1(r.buf(), key, line))
}

// wrap1 appends {"key":line} to dst for a rendered line (its '\n' dropped).
func wrap1(dst []byte, key string, line []byte) []byte {
	dst = append(dst, '{', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	dst = append(dst, line[:len(line)-1]...)
	return append(dst, '}')
}

// idempotencyType names the kind of request an event answers, as the
// content-machine idempotency map does ("feedback", "submit", "import").
func idempotencyType(ev *events.Event) string {
	switch ev.Type {
	case events.TypeFeedbackSubmitted:
		return "feedback"
	case events.TypeExperimentSubmitted:
		return "submit"
	case events.TypeRunImported:
		return "import"
	case events.TypeExperimentCreated:
		return "experiment"
	case events.TypeExperimentUpdated:
		return "experiment.update"
	}
	return ev.Type
}

// renderIdempotency writes the request record of ev, if it carries one.
// kind overrides the type derived from the event type; ts is ev's ISO
// time when the caller has it already.
func renderIdempotency(ev *events.Event, entity, kind, ts string, r *rendered) error {
	if ev.Req == "" || !isLabSession(ev.Stream) {
		return nil
	}
	typ := kind
	if typ == "" {
		typ = idempotencyType(ev)
	}
	if ts == "" {
		ts = r.iso(ev.TS)
	}
	l := IdempotencyLine{RequestID: ev.Req, Type: typ, EntityID: entity, CreatedAt: ts, Response: ev.Resp}
	line, err := appendIdempotencyLine(r.buf(), &l)
	if err != nil {
		// A response snapshot that is not JSON is left out of the record.
		l.Response = nil
		if line, err = appendIdempotencyLine(r.buf(), &l); err != nil {
			return err
		}
	}
	_, view := r.sessionViews(ev.Stream)
	r.add(view, r.keep(line))
	return nil
}

func renderStep(ev *events.Event, r *rendered) error {
	p, err := ev.Decode()
	if err != nil {
		return err
	}
	at := isoTime(ev.TS)
	base := StepRecord{Seq: ev.Seq, At: at, Event: ev.Type}
	var recs []StepRecord
	// record adds the record of one step's transition, to be filled
	// before the next is added.
	record := func(mandate, step, status string) *StepRecord {
		recs = append(recs, base)
		rec := &recs[len(recs)-1]
		rec.MandateID, rec.StepID, rec.Status = mandate, step, status
		return rec
	}
	switch p := p.(type) {
	case *events.StepPlanned:
		for _, s := range p.Steps {
			rec := record(p.MandateID, s.StepID, events.StatusPending)
			rec.Tool, rec.ParamsHash, rec.PreHash, rec.ExpectedPostHash = s.Tool, s.ParamsHash, s.PreHash, s.ExpectedPostHash
			rec.IdemKey, rec.World = s.IdemKey, s.World
		}
	case *events.StepExecuting:
		rec := record(p.MandateID, p.StepID, events.StatusExecuting)
		rec.IdemKey, rec.ObservedPreHash = p.IdemKey, p.ObservedPreHash
	case *events.StepCompleted:
		rec := record(p.MandateID, p.StepID, events.StatusCompleted)
		rec.PostHash, rec.ResultHash, rec.ExitCode, rec.OutputDigest = p.PostHash, p.ResultHash, p.ExitCode, p.OutputDigest
		rec.Recovered, rec.Evidence = p.Recovered, p.Evidence
	case *events.StepFailed:
		rec := record(p.MandateID, p.StepID, events.StatusFailed)
		rec.ErrorClass, rec.ErrorMsg, rec.ExitCode = p.ErrorClass, p.ErrorMsg, p.ExitCode
	case *events.StepNeedsReview:
		rec := record(p.MandateID, p.StepID, events.StatusNeedsReview)
		rec.Reason, rec.Evidence = p.Reason, p.Evidence
	case *events.StepReset:
		rec := record(p.MandateID, p.StepID, events.StatusPending)
		rec.IdemKey, rec.Reason, rec.Evidence = p.IdemKey, p.Reason, p.Evidence
	}
	for i := range recs {
		line, err := jsonLine(&recs[i])
		if err != nil {
			return err
		}
		r.add(StepsView, line)
	}
	return renderIdempotency(ev, "", "", at, r)
}

func renderPty(ev *events.Event, r *rendered) error {
	conv := ev.Stream
	if !validID(conv) {
		return nil // no path for this conversation: skipped (doc.go)
	}
	p, err := ev.Decode()
	if err != nil {
		return err
	}
	typ, ok := ptyLineType[ev.Type]
	if !ok {
		typ = ev.Type
	}
	line := PtyEventLine{Seq: ev.Seq, TS: ev.TS, Type: typ, RequestID: ev.Req}
	switch p := p.(type) {
	case *events.PtySessionStarted:
		line.ShellID, line.Pid, line.Cwd = p.ShellID, p.Pid, p.Cwd
	case *events.PtyBlockBegin:
		if err := r.addBlock(conv, &line, p.Block); err != nil {
			return err
		}
	case *events.PtyBlockEnd:
		if err := r.addBlock(conv, &line, p.Block); err != nil {
			return err
		}
	case *events.PtyOutput:
		off, n := p.SpoolOffset, len(p.Data)
		line.BlockID, line.SpoolOffset, line.Len = p.BlockID, &off, &n
		if n > 0 {
			r.add(PtySpoolView(conv), p.Data)
			if p.BlockID != "" && validID(p.BlockID) {
				r.add(PtyBlockOutputView(conv, p.BlockID), p.Data)
			}
		}
	case *events.PtyPrompt:
		off := p.SpoolOffset
		line.BlockID, line.SpoolOffset, line.Line, line.Cwd, line.ExitCode = p.BlockID, &off, p.Line, p.Cwd, p.ExitCode
		if p.Line != "" {
			r.add(PtySpoolView(conv), []byte(p.Line))
		}
	case *events.PtyTruncated:
		// The marker goes where the dropped bytes would have gone: the
		// spool and the block's output, so readers of either see it.
		off, n := p.SpoolOffset, len(p.Line)
		line.BlockID, line.SpoolOffset, line.Len, line.Line, line.Reason = p.BlockID, &off, &n, p.Line, p.Scope
		line.Dropped = &p.Dropped
		if p.Line != "" {
			r.add(PtySpoolView(conv), []byte(p.Line))
			if p.BlockID != "" && validID(p.BlockID) {
				r.add(PtyBlockOutputView(conv, p.BlockID), []byte(p.Line))
			}
		}
	case *events.PtyInput:
		line.BlockID, line.Data, line.Source = p.BlockID, string(p.Data), p.Source
	case *events.PtySessionReset:
		line.ShellID, line.Reason = p.NewShellID, p.Reason
	case *events.PtySessionEnded:
		line.ShellID, line.Reason, line.ExitCode = p.ShellID, p.Reason, p.Exit
	default:
		return fmt.Errorf("projections: no pty view for %s", ev.Type)
	}
	b, err := jsonLine(&line)
	if err != nil {
		return err
	}
	r.add(PtyEventsView(conv), b)
	return nil
}

// addBlock writes b, as its begin or end left it, to the conversation's
// blocks view and names it in line.
func (r *rendered) addBlock(conv string, line *PtyEventLine, b events.Block) error {
	line.BlockID, line.Block = b.BlockID, &b
	rec, err := jsonLine(&b)
	if err != nil {
		return err
	}
	r.add(PtyBlocksView(conv), rec)
	return nil
}
