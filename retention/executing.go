package retention

import (
	"cmp"
	"slices"

	"github.com/cmlab/cmlab/events"
)

// Executing lists the steps ("mandate/step") whose last transition is
// executing, in the order they were first recorded. With no daemon and no
// 'cmlab run' alive, these are steps a crash left mid-execution, which
// 'cmlab recover' classifies.
func (m *Model) Executing() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	type kv struct {
		k   string
		ord uint64
	}
	var ks []kv
	for k, v := range m.st.Keys {
		if v.Status == events.StatusExecuting {
			ks = append(ks, kv{k, v.Ord})
		}
	}
	slices.SortFunc(ks, func(a, b kv) int { return cmp.Compare(a.ord, b.ord) })
	out := make([]string, 0, len(ks))
	for _, x := range ks {
		out = append(out, x.k)
	}
	return out
}
