package cmdline

import (
	"bytes"
	"errors"
	"testing"
)

func TestIsCobraUsage(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New(`unknown flag: --hme`), true},
		{errors.New(`unknown command "sttus" for "cmlab"`), true},
		{errors.New(`accepts 1 arg(s), received 2`), true},
		{errors.New(`required flag(s) "session" not set`), true},
		{errors.New("daemon at http://127.0.0.1:1: connection refused"), false},
	} {
		if got := IsCobraUsage(c.err); got != c.want {
			t.Errorf("IsCobraUsage(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string]any{"path": "<a&b>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"n\": 1,\n  \"path\": \"<a&b>\"\n}\n"
	if b.String() != want {
		t.Fatalf("WriteJSON wrote %q, want %q", b.String(), want)
	}
}
