package retention

import "github.com/cmlab/cmlab/events"

// Executing lists the steps ("mandate/step") whose last transition is
// executing, in the order they were first recorded. With no daemon and no
// 'cmlab run' alive, these are steps a crash left mid-execution, which
// 'cmlab recover' classifies.
func (m *Model) Executing() []string { return m.stepsIn(events.StatusExecuting) }
