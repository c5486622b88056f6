package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
)

// The terminal's dropped past in the damage matrix (issue 26). The
// fixture's conversation fx runs more blocks than pty keeps in memory
// (pty/history.go: the last 100, once it holds more than 200), so reads of
// its oldest blocks are answered from its events view
// (pty/fx/events.jsonl, kind view-pty) read back, and the bound is in the
// terminal snapshot (kind snapshot). After each serve case of those kinds
// the matrix asks the daemon what it asked the undamaged fixture: every
// answer must be the fixture's, byte for byte, or a refusal (an error
// status with an error code); any other answer is a violation.

// pastView is the events view of fx, relative to the home.
const pastView = "pty/fx/events.jsonl"

// pastBlocks is how many blocks the fixture runs in fx after its first:
// 206 in all, so the first 101 are dropped from memory.
const pastBlocks = 205

// pastKinds are the kinds whose serve cases read the past back.
var pastKinds = map[string]bool{"view-pty": true, "snapshot": true, "dir-pty": true, "dir-conversation": true, "dir-snapshots": true}

// pastRead is one read of the dropped past and the fixture's answer.
type pastRead struct {
	path   string
	status int
	body   []byte
}

// runPast runs the fixture's blocks of the past in fx.
func runPast(ctx context.Context, c *client) error {
	for i := range pastBlocks {
		r := c.post(ctx, "/api/pty/fx/exec_wait", "", map[string]any{"cmd": fmt.Sprintf("echo past%d-end", i), "timeout_ms": 20000})
		if !r.ok() {
			return fmt.Errorf("fixture: exec_wait %d: %s", i, r)
		}
	}
	return nil
}

// recordPast asks c's daemon the reads of fx's dropped past (the block
// list from the start, whole and its first three; the second block by id,
// its output; a search hitting a dropped block) and returns them with
// their answers.
func recordPast(ctx context.Context, c *client) ([]pastRead, error) {
	list := c.get(ctx, "/api/pty/fx/blocks?since=0")
	var l struct {
		Blocks []struct {
			BlockID string `json:"block_id"`
		} `json:"blocks"`
	}
	if !list.ok() || json.Unmarshal(list.body, &l) != nil || len(l.Blocks) <= pastBlocks {
		return nil, fmt.Errorf("fixture: the block list of fx: %s", list)
	}
	id := url.PathEscape(l.Blocks[1].BlockID)
	var reads []pastRead
	for _, p := range []string{"/api/pty/fx/blocks?since=0", "/api/pty/fx/blocks?since=0&limit=3",
		"/api/pty/fx/blocks/" + id, "/api/pty/fx/blocks/" + id + "/output", "/api/pty/fx/search?q=past7-end"} {
		r := c.get(ctx, p)
		if !r.ok() {
			return nil, fmt.Errorf("fixture: GET %s: %s", p, r)
		}
		reads = append(reads, pastRead{path: p, status: r.status, body: r.body})
	}
	return reads, nil
}

// checkPast asks the daemon at base (token tok) the fixture's reads of
// the past and returns the answers that are neither the fixture's nor a
// refusal, and a line that counts both kinds of good answer.
func checkPast(ctx context.Context, base, tok string, reads []pastRead) ([]string, string) {
	var v []string
	same, refused := 0, 0
	for _, want := range reads {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+want.path, nil)
		req.Header.Set("X-CM-LAB-TOKEN", tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			v = append(v, fmt.Sprintf("GET %s: no answer: %v", want.path, err))
			continue
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		got := reply{status: res.StatusCode, body: body, err: err}
		switch {
		case got.err != nil:
			v = append(v, fmt.Sprintf("GET %s: %v", want.path, got.err))
		case got.status == want.status && bytes.Equal(got.body, want.body):
			same++
		case got.status >= 400 && got.errCode() != "":
			refused++ // the past could not be read back as the log has it
		default:
			i := 0
			for i < min(len(body), len(want.body)) && body[i] == want.body[i] {
				i++
			}
			lo := max(0, i-80)
			v = append(v, fmt.Sprintf("GET %s answered %d, byte %d on: %.160q, the undamaged home %d: %.160q",
				want.path, got.status, i, body[lo:], want.status, want.body[lo:]))
		}
	}
	return v, fmt.Sprintf("reads of the terminal's dropped past: %d as the fixture, %d refused, %d otherwise", same, refused, len(v))
}

// flipPastDigit flips the lowest bit of one digit of the command of a
// block END line in the first half of the events view at path (a dropped
// block's, as the fixture runs them), in place: the JSON stays valid and
// names another command. It says what it changed.
func flipPastDigit(path string, rng *rand.Rand) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "nothing: " + err.Error()
	}
	var at []int
	for off := 0; off < len(b)/2; {
		end := bytes.IndexByte(b[off:], '\n')
		if end < 0 {
			break
		}
		line := b[off : off+end]
		if bytes.Contains(line, []byte(`"type":"agent_block_end"`)) {
			if i := bytes.Index(line, []byte(`"cmd":"echo past`)); i >= 0 {
				for j := off + i + len(`"cmd":"echo past`); b[j] >= '0' && b[j] <= '9'; j++ {
					at = append(at, j)
				}
			}
		}
		off += end + 1
	}
	if len(at) == 0 {
		return "nothing: no command of a dropped block"
	}
	i := at[rng.IntN(len(at))]
	old := b[i]
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return "nothing: " + err.Error()
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{old ^ 1}, int64(i)); err != nil {
		return "nothing: " + err.Error()
	}
	return fmt.Sprintf("%s byte %d: %q -> %q", pastView, i, old, old^1)
}
