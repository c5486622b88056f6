// Package discovery is how a command finds its home's daemon and knows it
// is that daemon, not a program that took over what a dead one left.
//
// A daemon that dies uncleanly (SIGKILL, OOM, power cut) leaves
// state/daemon.json behind. Its pid and TCP port may then be held by any
// local process — a fork storm takes a given pid in seconds — so neither
// names the daemon. What only the daemon can hold lives in state/, a
// directory of mode 0700 that only the home's owner can enter:
//
//   - state/daemon.lock: the daemon holds an open-file-description lock
//     (fcntl F_OFD_SETLK, write) on it for its whole life. The kernel drops
//     it when the daemon dies, however it dies. A client asks with
//     F_OFD_GETLK, which takes nothing (so it never races a daemon
//     starting), and works within one process too (OFD locks conflict
//     between two opens of the file, unlike POSIX record locks).
//   - state/daemon.sock: the daemon's Unix socket. The CLI and `cmlab mcp`
//     talk to their daemon only over it, never over TCP, and check the
//     listener's credentials (SO_PEERCRED: the uid must be the client's
//     own or the home owner's, the pid the one daemon.json records). The
//     daemon checks every connection's credentials the same way and
//     accepts only its own uid and root (root can read state/token and
//     trace the daemon anyway: refusing it protects nothing and would stop
//     an administrator's `cmlab status`).
//
// Liveness of a recorded daemon is the lock held, plus the recorded pid
// running with the recorded start time (field 22 of /proc/PID/stat) in
// the recorded boot (steps.Process): never a pid alone, never EPERM from
// kill(2).
//
// The operator token is still sent on the socket (the daemon's auth code
// is the same for every listener), but only to a peer whose uid the kernel
// vouched for, through a file only the owner can reach.
package discovery
