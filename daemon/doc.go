// Package daemon owns the running home: the composition root that builds,
// starts and stops everything over one home, in one order, for `cmlab
// serve`, `cmlab mcp`, the in-process path of CLI commands (Dial), the
// demo, the benchmarks and the tests alike (as etcd's embed/).
//
// Open builds, in this order:
//
//	engine           tail repair, views brought up to the log (engine.Open)
//	step journal     the one steps.Journal of the process
//	recovery         start-up decisions, recorded before anything is served
//	retention model  retention.Open; then the compaction policy (Options.Compaction)
//	terminal manager pty.NewManager
//	http server      labapi.New over all of the above
//
// Run adds the listener (connection cap, listener.go), Home.Start (resumed
// mandates, lab.session.started), state/daemon.json, the sidecar (the log
// shipper of `serve --ship`), Ready, and Home.Serving (verification of
// what the start trusted). Shutdown runs the other way: stop serving,
// stop the sidecar, remove state/daemon.json, then Home.Close: resumed
// mandates, the server, the terminals, the compaction and the
// verification log stop before the engine closes with its checkpoint.
// TestStartStopSequence holds the order (Options.Trace records it).
//
// Which steps run depends on the role: a read-only home (a replayed one)
// starts no recovery, terminal, compaction or session; a one-shot home
// (Options.OneShot, a CLI command's in-process server) only the engine,
// the journal, the read models and the server.
//
// ReadModels is the table of the read models a daemon restarts from a
// snapshot; it is passed to compaction as a value (compact.Options.ReadModels).
//
// Files it owns: state/daemon.json (package labapi writes and reads it),
// state/daemon.log (daemonlog.go, rotated).
//
// The package's tests also hold the repository's layering (layers_test.go):
// every package imports only packages of a lower layer.
package daemon
