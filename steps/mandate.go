package steps

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/cmlab/cmlab/home"
)

// ErrInvalidMandate wraps every error about a mandate file.
var ErrInvalidMandate = errors.New("invalid mandate")

// Limits of a mandate file.
const (
	MaxMandateBytes = 1 << 20
	MaxMandateSteps = 1000
)

// Mandate is a named list of steps for `cmlab run`:
//
//	{"id": "m1", "name": "build", "steps": [
//	  {"id": "fetch", "argv": ["sh", "-c", "..."], "cwd": "work",
//	   "env": ["PATH", "HOME"], "world": ["out/a.txt"],
//	   "expect_post": {"out/a.txt": "hello\n"}}]}
//
// The mandate id is id, else name; it must be a valid id. cwd is relative
// to the mandate file's directory unless absolute; world paths relative to
// the step's cwd. env is an allow-list of variable names passed through from
// the runner's environment. expect_post, optional, is the world the step
// must leave: a world hash ("sha256-…") or an object from every world path
// to its expected file content (a string) or null (must be missing).
type Mandate struct {
	ID    string        `json:"id,omitempty"`
	Name  string        `json:"name,omitempty"`
	Steps []MandateStep `json:"steps"`
}

// MandateStep is one command of a mandate.
type MandateStep struct {
	ID         string          `json:"id"`
	Argv       []string        `json:"argv"`
	Cwd        string          `json:"cwd,omitempty"`
	Env        []string        `json:"env,omitempty"`
	World      []string        `json:"world,omitempty"`
	ExpectPost json.RawMessage `json:"expect_post,omitempty"`
}

// MandateID is id, else name.
func (m Mandate) MandateID() string {
	if m.ID != "" {
		return m.ID
	}
	return m.Name
}

var (
	envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	hashRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256-[0-9a-f]{64}$`) })
)

// ValidHash reports whether h is "sha256-" + 64 lowercase hex digits.
func ValidHash(h string) bool { return hashRE().MatchString(h) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidMandate, fmt.Sprintf(format, args...))
}

// ParseMandate parses and validates a mandate file. Unknown fields, trailing
// data, duplicate or invalid ids, empty argv, bad env names, NUL bytes in
// paths and an expect_post that is neither a hash nor an object over exactly
// the world paths are errors wrapping ErrInvalidMandate.
func ParseMandate(b []byte) (Mandate, error) {
	var m Mandate
	if len(b) > MaxMandateBytes {
		return m, invalid("file is %d bytes, over %d", len(b), MaxMandateBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Mandate{}, invalid("%v at %s", err, jsonPosition(b, err, dec)) // mandate_position.go
	}
	if dec.More() {
		return Mandate{}, invalid("data after the JSON object")
	}
	if _, err := dec.Token(); err == nil {
		return Mandate{}, invalid("data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return Mandate{}, err
	}
	return m, nil
}

// Validate checks a mandate as ParseMandate does.
func (m Mandate) Validate() error {
	id := m.MandateID()
	if id == "" {
		return invalid("needs an id or a name")
	}
	if err := home.ValidateID(id); err != nil {
		return invalid("mandate id: %v", err)
	}
	if len(m.Steps) == 0 {
		return invalid("mandate %s has no steps", id)
	}
	if len(m.Steps) > MaxMandateSteps {
		return invalid("mandate %s has %d steps, over %d", id, len(m.Steps), MaxMandateSteps)
	}
	seen := map[string]bool{}
	for i, s := range m.Steps {
		if err := home.ValidateID(s.ID); err != nil {
			return invalid("step %d id: %v", i, err)
		}
		if seen[s.ID] {
			return invalid("step id %q appears twice", s.ID)
		}
		seen[s.ID] = true
		if len(s.Argv) == 0 || s.Argv[0] == "" {
			return invalid("step %s: argv needs at least a program", s.ID)
		}
		for _, a := range s.Argv {
			if strings.ContainsRune(a, 0) {
				return invalid("step %s: argv contains a NUL byte", s.ID)
			}
		}
		if strings.ContainsRune(s.Cwd, 0) {
			return invalid("step %s: cwd contains a NUL byte", s.ID)
		}
		for _, e := range s.Env {
			if !envNameRE().MatchString(e) {
				return invalid("step %s: env %q is not a variable name (the env list names variables to pass through)", s.ID, e)
			}
		}
		for _, w := range s.World {
			if w == "" || strings.ContainsRune(w, 0) {
				return invalid("step %s: world paths must be non-empty and without NUL bytes", s.ID)
			}
		}
		if _, err := s.expectedPost(); err != nil {
			return err
		}
	}
	return nil
}

// expectedPost is the expected world hash of the step, "" when none.
func (s MandateStep) expectedPost() (string, error) {
	raw := bytes.TrimSpace(s.ExpectPost)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var h string
	if json.Unmarshal(raw, &h) == nil {
		if !ValidHash(h) {
			return "", invalid("step %s: expect_post %q is not a world hash (sha256- and 64 hex digits)", s.ID, h)
		}
		return h, nil
	}
	var files map[string]*string
	if err := json.Unmarshal(raw, &files); err != nil {
		return "", invalid("step %s: expect_post must be a world hash or an object from world path to content", s.ID)
	}
	if len(s.World) == 0 {
		return "", invalid("step %s: expect_post needs a world", s.ID)
	}
	names := map[string]bool{}
	for _, w := range s.World {
		names[worldName(w)] = true
	}
	var es []WorldEntry
	covered := map[string]bool{}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := worldName(k)
		if !names[n] {
			return "", invalid("step %s: expect_post names %q, which is not in its world", s.ID, k)
		}
		if covered[n] {
			return "", invalid("step %s: expect_post names %q twice", s.ID, k)
		}
		covered[n] = true
		if c := files[k]; c == nil {
			es = append(es, WorldEntry{Name: n, Kind: KindMissing, Digest: "-"})
		} else {
			es = append(es, WorldEntry{Name: n, Kind: KindFile, Size: int64(len(*c)), Digest: HashBytes([]byte(*c))})
		}
	}
	for n := range names {
		if !covered[n] {
			return "", invalid("step %s: expect_post must give every world path; %q is missing", s.ID, n)
		}
	}
	return HashListing(es), nil
}

// ParamsHash is the hash of what the step runs: argv, cwd, env names,
// world and expect_post, as canonical JSON.
func (s MandateStep) ParamsHash() string {
	b, _ := json.Marshal(struct {
		Argv       []string        `json:"argv"`
		Cwd        string          `json:"cwd"`
		Env        []string        `json:"env"`
		World      []string        `json:"world"`
		ExpectPost json.RawMessage `json:"expect_post,omitempty"`
	}{s.Argv, s.Cwd, s.Env, s.World, compactJSON(s.ExpectPost)})
	return HashBytes(b)
}

func compactJSON(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// IdemKey derives a step's idempotency key from its mandate, id and params:
// stable across resumes of the same plan.
func IdemKey(mandateID, stepID, paramsHash string) string {
	sum := sha256.Sum256([]byte(mandateID + "\x00" + stepID + "\x00" + paramsHash))
	return "idem_" + hex.EncodeToString(sum[:16])
}
