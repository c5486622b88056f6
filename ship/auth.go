package ship

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cmlab/cmlab/home"
	"github.com/nats-io/nats.go"
)

// Authenticating the stream. Headers say which home and seq a message
// claims to be, but anyone who may publish to the stream can write them.
// So each message also carries
//
//	Cmlab-Mac: hex(HMAC-SHA256(key, "cmlab-ship-v1" 0x00 home-id 0x00 seq(8, BE) entry))
//
// keyed by the home's ship key, state/ship-key (32 random bytes, hex, mode
// 0600, created with the home's first shipment; compaction keeps a copy
// as ship-key in its archive). It binds the entry bytes to the home and
// to its seq: an event copied from another home, or this home's event
// published again at another seq (a duplicate), fails it. Restore checks
// every message with the key it is given (--key FILE) and refuses the
// first that fails (ErrForged), naming its seq; without a key it refuses
// an authenticated stream (ErrNeedKey) unless told to restore
// unauthenticated. Messages shipped before keys existed carry no MAC:
// accepted (counted) until the first message that does; after it, a
// message without one is forged.

// HeaderMAC is the header holding a message's MAC.
const HeaderMAC = "Cmlab-Mac"

// ErrForged: a message carries no valid MAC of this home's key: not
// shipped by this home (forged, another home's, or moved to another seq).
var ErrForged = errors.New("ship: message not shipped by this home")

// ErrNeedKey: the stream's messages are authenticated and no key was given.
var ErrNeedKey = errors.New("ship: the stream is authenticated: its home's ship key is needed")

// KeyFile is state/ship-key of h.
func KeyFile(h home.Home) string { return h.ShipKeyFile() }

// ReadKey reads a ship key file (64 hex digits).
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("ship: %s is not a ship key (64 hex digits)", path)
	}
	return k, nil
}

// EnsureKey returns h's ship key, creating state/ship-key the first time.
func EnsureKey(h home.Home) ([]byte, error) {
	k, err := ReadKey(KeyFile(h))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	k = make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, WriteKey(h, k)
}

// WriteKey sets h's ship key (restore gives the new home the key it
// restored with, so its stream stays verifiable).
func WriteKey(h home.Home, k []byte) error {
	if err := home.MkdirAllSync(h.StateDir()); err != nil {
		return err
	}
	return home.WriteFileAtomic(KeyFile(h), []byte(hex.EncodeToString(k)+"\n"))
}

// eventMAC is the MAC of entry, the log entry bytes of seq of homeID.
func eventMAC(key []byte, homeID string, seq uint64, entry []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("cmlab-ship-v1\x00"))
	m.Write([]byte(homeID))
	m.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	m.Write(b[:])
	m.Write(entry)
	return hex.EncodeToString(m.Sum(nil))
}

// authenticator checks the MACs of the messages a Source reads, in order.
type authenticator struct {
	key    []byte
	unauth bool // restore without checking (no key at hand)
	// sawMAC: a message with a MAC was read; from then on one without is forged.
	sawMAC bool
	// Legacy counts messages read without a MAC before the first with one.
	Legacy uint64
}

// check checks the MAC of the message seq of homeID in stream.
func (a *authenticator) check(h nats.Header, stream, homeID string, seq uint64, data []byte) error {
	mac := h.Get(HeaderMAC)
	switch {
	case mac == "" && a.sawMAC:
		return fmt.Errorf("%w: stream %s seq %d carries no %s, and the messages before it do: it was not published by home %s's shipper", ErrForged, stream, seq, HeaderMAC, homeID)
	case mac == "":
		a.Legacy++
		return nil
	}
	a.sawMAC = true
	switch {
	case a.key == nil && a.unauth:
		return nil
	case a.key == nil:
		return fmt.Errorf("%w (stream %s seq %d carries a %s)", ErrNeedKey, stream, seq, HeaderMAC)
	case !hmac.Equal([]byte(mac), []byte(eventMAC(a.key, homeID, seq, data))):
		return fmt.Errorf("%w: stream %s seq %d fails its %s under home %s's key: forged, another home's event, or an event published again at another seq", ErrForged, stream, seq, HeaderMAC, homeID)
	}
	return nil
}
