package main

import (
	"github.com/cmlab/cmlab/pty"
	"github.com/spf13/pflag"
)

// addPtyServeFlags adds the flags of serve that are not in serve.go: the
// terminal's.
func addPtyServeFlags(f *pflag.FlagSet, o *serveOpts) {
	f.DurationVar(&o.ptyIdle, "pty-idle", pty.DefaultIdleTimeout, "end a conversation's shell after it has been idle this long (0: never)")
	f.IntVar(&o.ptyMaxShells, "pty-max-shells", 64, "most conversations with a running shell at once")
	f.Int64Var(&o.ptyBlockCap, "pty-block-cap", pty.DefaultBlockOutputCap, "bytes of output stored per terminal block; past it the block runs on and its output is dropped and counted (pty.truncated); -1: no cap")
	f.Int64Var(&o.ptyConvCap, "pty-conversation-cap", pty.DefaultConversationOutputCap, "bytes of output stored per terminal conversation (its whole spool); -1: no cap")
	f.Int64Var(&o.ptyTotalCap, "pty-total-cap", pty.DefaultTotalOutputCap, "bytes of output stored across all terminal conversations together (each byte lands in the spool, the block file and the log); past it output is dropped and counted; -1: no cap")
}

// ptyOptions are the terminal manager's options from serve's flags.
func ptyOptions(o *serveOpts) pty.Options {
	idle := o.ptyIdle
	if idle == 0 {
		idle = -1 // the flag's 0 means never; pty's 0 means the default
	}
	return pty.Options{IdleTimeout: idle, MaxShells: o.ptyMaxShells,
		BlockOutputCap: capOption(o.ptyBlockCap), ConversationOutputCap: capOption(o.ptyConvCap),
		TotalOutputCap: capOption(o.ptyTotalCap)}
}

// capOption maps a cap flag to its option: a negative flag means no cap
// (pty's negative); 0 would store nothing, so it is taken as 1 byte.
func capOption(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v == 0:
		return 1
	}
	return v
}
