package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/cmlab/cmlab/events"
)

// checkEventTypes refuses a --type that matches no event type (a typo
// would otherwise print nothing and exit 0), naming the types. match says
// whether a --type value selects one type name.
func checkEventTypes(given []string, match func(pattern, typ string) bool, patterns string) error {
	known := events.Types()
	for _, t := range given {
		ok := false
		for _, k := range known {
			if match(t, k) {
				ok = true
				break
			}
		}
		if !ok {
			return &usageError{fmt.Sprintf("--type %q matches no event type (%s); the types are: %s", t, patterns, strings.Join(known, ", "))}
		}
	}
	return nil
}

// walTypeMatch is wal dump's --type: a path.Match pattern.
func walTypeMatch(pattern, typ string) bool { ok, _ := path.Match(pattern, typ); return ok }

// replayTypeMatch is replay print's --type: an exact type, or a prefix
// ending in "." or "*".
func replayTypeMatch(t, typ string) bool {
	switch {
	case strings.HasSuffix(t, "*"):
		return strings.HasPrefix(typ, strings.TrimSuffix(t, "*"))
	case strings.HasSuffix(t, "."):
		return strings.HasPrefix(typ, t)
	}
	return t == typ
}
