package labapi

import "testing"

// What the external tests (package labapi_test, which run a whole
// daemon) use of this package's test helpers.

// OperatorRoute is an operatorRoute's request.
type OperatorRoute struct{ Method, Path, Body string }

// OperatorRoutes is operatorRoutes' requests, in order.
func OperatorRoutes() []OperatorRoute {
	var out []OperatorRoute
	for _, r := range operatorRoutes() {
		out = append(out, OperatorRoute{Method: r.method, Path: r.path, Body: r.body})
	}
	return out
}

// PrivateTempDir is privateTempDir.
func PrivateTempDir(t *testing.T) string { return privateTempDir(t) }
