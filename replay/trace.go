package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// ErrNotTraced is returned when no event mentions the id.
var ErrNotTraced = errors.New("replay: no event mentions this id")

// Hit is one event of a trace and where the traced ids appear in it.
type Hit struct {
	Event *events.Event `json:"-"`
	// Via are the places the ids were found: "req", "stream", "resp.feedbackIds[0]",
	// "data.experiment.experimentId", each followed by "=" and the id.
	Via []string `json:"via"`
}

// TraceResult is the chain of events about an id.
type TraceResult struct {
	ID string `json:"id"`
	// Related are ids the traced request created or named in its response
	// (feedback, experiment, run, block ids); their events are part of the chain.
	Related []string `json:"related,omitempty"`
	Hits    []Hit    `json:"hits"`
}

// entityPrefixes are the id prefixes a request's response may hand out; a
// trace of the request follows them.
var entityPrefixes = []string{"fb_", "run_", "exp_", "blk_", "lab_"}

// Trace finds every event that mentions id — as its request id, its stream,
// or any string in its payload or response snapshot — in log order. When id
// is a request id, the entity ids in that request's response snapshot
// (feedbackIds, experimentId, runId, block_id …) are traced too, so the
// trace of a submit lists the submit, the feedback it wrote and every later
// update of the experiment. "MANDATE/STEP" traces one step of one mandate.
func Trace(ctx context.Context, log *Log, id string) (*TraceResult, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errors.New("replay: empty id")
	}
	res := &TraceResult{ID: id}
	if m, st, ok := strings.Cut(id, "/"); ok && m != "" && st != "" && !strings.Contains(st, "/") {
		return traceStep(ctx, log, res, m, st)
	}
	want := map[string]bool{id: true}
	// Pass 1: responses of the request named id.
	for ev, err := range log.Events(ctx, 1, 0) {
		if err != nil {
			return nil, err
		}
		if ev.Req != id || len(ev.Resp) == 0 {
			continue
		}
		var v any
		if json.Unmarshal(ev.Resp, &v) != nil {
			continue
		}
		walk(v, "resp", func(_ string, s string) {
			for _, p := range entityPrefixes {
				if strings.HasPrefix(s, p) && !want[s] {
					want[s] = true
					res.Related = append(res.Related, s)
				}
			}
		})
	}
	sort.Strings(res.Related)
	// Pass 2: every event mentioning any wanted id.
	for ev, err := range log.Events(ctx, 1, 0) {
		if err != nil {
			return nil, err
		}
		if via := mentions(ev, want); len(via) > 0 {
			res.Hits = append(res.Hits, Hit{Event: ev, Via: via})
		}
	}
	if len(res.Hits) == 0 {
		return res, fmt.Errorf("%w: %s", ErrNotTraced, id)
	}
	return res, nil
}

// traceStep lists the events of mandate m that name step st (its plan
// entry and its transitions): "MANDATE/STEP" in Trace, because a step id is
// only unique within its mandate.
func traceStep(ctx context.Context, log *Log, res *TraceResult, m, st string) (*TraceResult, error) {
	for ev, err := range log.Events(ctx, 1, 0) {
		if err != nil {
			return nil, err
		}
		inMandate := ev.Stream == m
		var via []string
		visit := func(path, s string) {
			switch {
			case s == m && strings.HasSuffix(path, "mandate_id"):
				inMandate = true
			case s == st && strings.HasSuffix(path, "step_id"):
				via = append(via, path+"="+s)
			}
		}
		if p, err := ev.Decode(); err == nil {
			if b, err := json.Marshal(p); err == nil {
				var v any
				if json.Unmarshal(b, &v) == nil {
					walk(v, "data", visit)
				}
			}
		}
		if inMandate && len(via) > 0 {
			res.Hits = append(res.Hits, Hit{Event: ev, Via: via})
		}
	}
	if len(res.Hits) == 0 {
		return res, fmt.Errorf("%w: step %s of mandate %s", ErrNotTraced, st, m)
	}
	return res, nil
}

// mentions lists where ids of want appear in ev.
func mentions(ev *events.Event, want map[string]bool) []string {
	var via []string
	if want[ev.Req] {
		via = append(via, "req="+ev.Req)
	}
	if want[ev.Stream] {
		via = append(via, "stream="+ev.Stream)
	}
	visit := func(path, s string) {
		if want[s] {
			via = append(via, path+"="+s)
		}
	}
	if len(ev.Resp) > 0 {
		var v any
		if json.Unmarshal(ev.Resp, &v) == nil {
			walk(v, "resp", visit)
		}
	}
	if p, err := ev.Decode(); err == nil {
		if b, err := json.Marshal(p); err == nil {
			var v any
			if json.Unmarshal(b, &v) == nil {
				walk(v, "data", visit)
			}
		}
	}
	return via
}

// walk calls visit for every string in v with its JSON path.
func walk(v any, path string, visit func(path, s string)) {
	switch v := v.(type) {
	case string:
		visit(path, v)
	case []any:
		for i, x := range v {
			walk(x, fmt.Sprintf("%s[%d]", path, i), visit)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(v[k], path+"."+k, visit)
		}
	}
}
