// Package bench holds cmlab's benchmarks that need more than Go's
// benchmark harness: `cmlab bench api` (BenchAPI: a daemon over a fresh
// home under concurrent POST /api/feedback and polls at the end of large
// stores) and its peer mode (BenchPeer: the same load against another
// Lab server, such as content-machine's). No production package imports
// it.
package bench
