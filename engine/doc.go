// Package engine owns one home's log and projectors: open → repair → catch
// up → serve appends. Every mutation of cmlab goes through Engine.Append;
// the committer applies the projections and the in-memory observers after
// the fsync and before acknowledging, so a client always reads its own write.
package engine
