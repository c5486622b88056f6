package recovery

import "github.com/cmlab/cmlab/events"

// NeedsAttention returns a copy of p without the steps that need nothing:
// completed, with no action to take. Hidden counts them. A plan of a home
// that has run many mandates is mostly such steps; 'cmlab recover' shows
// the rest unless --all.
func (p *Plan) NeedsAttention() *Plan {
	out := *p
	out.Steps = make([]PlanStep, 0, len(p.Steps))
	for _, s := range p.Steps {
		if s.Status == events.StatusCompleted && (s.Action == "" || s.Action == ActionNone) && s.Verdict != InFlight {
			out.Hidden++
			continue
		}
		out.Steps = append(out.Steps, s)
	}
	return &out
}
