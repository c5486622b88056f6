package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Defaults of SessionOptions.
const (
	CodeTTL     = 60 * time.Second
	IdleTTL     = 30 * time.Minute
	MaxCodes    = 16
	MaxSessions = 32
	// CookieName is the session cookie. It names the port-less host's
	// cookie jar entry, so two daemons on one host use one name: the
	// newer login replaces the older one in that browser.
	CookieName = "cmlab_console"
)

// Login errors. Each says what the browser shows; none says whether a
// code ever existed.
var (
	ErrCodeInvalid = errors.New("console: login code unknown, expired or already used")
)

// SessionOptions configure NewSessions.
type SessionOptions struct {
	CodeTTL, IdleTTL      time.Duration    // defaults CodeTTL, IdleTTL
	MaxCodes, MaxSessions int              // defaults MaxCodes, MaxSessions
	Now                   func() time.Time // tests: the clock
}

// Sessions holds the login codes and sessions of one daemon run, in
// memory only.
type Sessions struct {
	opts     SessionOptions
	mu       sync.Mutex
	codes    map[[32]byte]time.Time // sha256(code) → expiry
	sessions map[[32]byte]time.Time // sha256(id) → last use
}

// NewSessions returns an empty set.
func NewSessions(o SessionOptions) *Sessions {
	if o.CodeTTL <= 0 {
		o.CodeTTL = CodeTTL
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = IdleTTL
	}
	if o.MaxCodes <= 0 {
		o.MaxCodes = MaxCodes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = MaxSessions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sessions{opts: o, codes: map[[32]byte]time.Time{}, sessions: map[[32]byte]time.Time{}}
}

func secret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails on Linux (Go 1.24+ panics inside if it could)
	return hex.EncodeToString(b[:])
}

func key(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// NewCode draws a one-time login code valid CodeTTL.
func (s *Sessions) NewCode() (code string, expires time.Time) {
	code = secret()
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	evictOldest(s.codes, s.opts.MaxCodes-1)
	expires = now.Add(s.opts.CodeTTL)
	s.codes[key(code)] = expires
	return code, expires
}

// Exchange spends code and returns a new session id.
func (s *Sessions) Exchange(code string) (string, error) {
	now := s.opts.Now()
	k := key(code)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if _, ok := s.codes[k]; !ok || len(code) != 64 {
		return "", ErrCodeInvalid
	}
	delete(s.codes, k)
	id := secret()
	evictOldest(s.sessions, s.opts.MaxSessions-1)
	s.sessions[key(id)] = now
	return id, nil
}

// Valid reports whether r carries a live session cookie, and counts the
// request as the session's use.
func (s *Sessions) Valid(r *http.Request) bool {
	if s == nil {
		return false
	}
	c, err := r.Cookie(CookieName)
	if err != nil || len(c.Value) != 64 {
		return false
	}
	now := s.opts.Now()
	k := key(c.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if _, ok := s.sessions[k]; !ok {
		return false
	}
	s.sessions[k] = now
	return true
}

// Revoke ends every session and forgets every outstanding code; it
// returns how many sessions it ended.
func (s *Sessions) Revoke() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.sessions)
	clear(s.sessions)
	clear(s.codes)
	return n
}

// Count is the number of live sessions and outstanding codes.
func (s *Sessions) Count() (sessions, codes int) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	return len(s.sessions), len(s.codes)
}

func (s *Sessions) expireLocked(now time.Time) {
	for k, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, k)
		}
	}
	for k, last := range s.sessions {
		if now.Sub(last) >= s.opts.IdleTTL {
			delete(s.sessions, k)
		}
	}
}

// evictOldest removes the entries with the smallest times until m holds
// at most n.
func evictOldest(m map[[32]byte]time.Time, n int) {
	for len(m) > n {
		var oldest [32]byte
		var t time.Time
		first := true
		for k, v := range m {
			if first || v.Before(t) {
				oldest, t, first = k, v, false
			}
		}
		delete(m, oldest)
	}
}

// Cookie is the Set-Cookie of session id.
func Cookie(id string) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// ClearCookie is the Set-Cookie that ends the browser's copy.
func ClearCookie() *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1}
}
