package labapi

// Version is the version reported by /api/config and lab.session.started.
const Version = "0.1.0"

// NewSecret is a fresh random secret of 256 bits in hex: a token the
// server draws, or the daemon's nonce of state/daemon.json.
func NewSecret() string { return newSecret() }
