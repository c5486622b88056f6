package steps

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseMandate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"minimal", `{"id":"m1","steps":[{"id":"a","argv":["true"]}]}`, true},
		{"name as id", `{"name":"build-1","steps":[{"id":"a","argv":["true"]}]}`, true},
		{"full", `{"id":"m","name":"x","steps":[{"id":"a","argv":["sh","-c","echo"],"cwd":"w","env":["PATH"],"world":["o.txt"],"expect_post":{"o.txt":"hi\n"}}]}`, true},
		{"expect_post hash", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o"],"expect_post":"sha256-` + "0123456789012345678901234567890123456789012345678901234567890123" + `"}]}`, true},
		{"expect_post missing file", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o"],"expect_post":{"o":null}}]}`, true},
		{"no id", `{"steps":[{"id":"a","argv":["true"]}]}`, false},
		{"bad id", `{"id":"../x","steps":[{"id":"a","argv":["true"]}]}`, false},
		{"no steps", `{"id":"m","steps":[]}`, false},
		{"dup step", `{"id":"m","steps":[{"id":"a","argv":["true"]},{"id":"a","argv":["true"]}]}`, false},
		{"empty argv", `{"id":"m","steps":[{"id":"a","argv":[]}]}`, false},
		{"empty program", `{"id":"m","steps":[{"id":"a","argv":[""]}]}`, false},
		{"env assignment", `{"id":"m","steps":[{"id":"a","argv":["true"],"env":["A=1"]}]}`, false},
		{"unknown field", `{"id":"m","steps":[{"id":"a","argv":["true"],"shell":true}]}`, false},
		{"trailing data", `{"id":"m","steps":[{"id":"a","argv":["true"]}]} {}`, false},
		{"not json", `id: m`, false},
		{"bad expect hash", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o"],"expect_post":"sha256-zz"}]}`, false},
		{"expect_post outside world", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o"],"expect_post":{"p":"x"}}]}`, false},
		{"expect_post incomplete", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o","p"],"expect_post":{"o":"x"}}]}`, false},
		{"expect_post without world", `{"id":"m","steps":[{"id":"a","argv":["true"],"expect_post":{}}]}`, false},
		{"NUL in world", `{"id":"m","steps":[{"id":"a","argv":["true"],"world":["a\u0000b"]}]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMandate([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseMandate = %+v, %v; want ok=%v", m, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidMandate) {
				t.Fatalf("error %v does not wrap ErrInvalidMandate", err)
			}
		})
	}
	// expect_post as contents hashes like the world it describes.
	m, err := ParseMandate([]byte(`{"id":"m","steps":[{"id":"a","argv":["true"],"world":["o.txt","gone"],"expect_post":{"o.txt":"hi\n","gone":null}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := m.Steps[0].expectedPost()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "o.txt"), []byte("hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := WorldHash(dir, []string{"o.txt", "gone"})
	if err != nil || got != want {
		t.Fatalf("expected post %s, world %s (%v)", got, want, err)
	}
}
