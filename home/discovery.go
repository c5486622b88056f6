package home

// Files by which the CLI finds and authenticates the home's daemon
// (package discovery).

// DaemonLockFile is state/daemon.lock, locked by the daemon for its life.
func (h Home) DaemonLockFile() string { return h.path("state", "daemon.lock") }

// DaemonSocket is state/daemon.sock, the daemon's Unix socket.
func (h Home) DaemonSocket() string { return h.path("state", "daemon.sock") }
