package wal

import (
	"errors"
	"testing"
)

func TestAppendRejectsBadPayload(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir() + "/wal"})
	for _, data := range [][]byte{{}, {0x92, 0x01}, {0x01, 0x02}} {
		ev := testEvent(1)
		ev.Data = data
		if _, err := l.Append(t.Context(), ev); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("data % x: %v", data, err)
		}
	}
	if l.LastSeq() != 0 {
		t.Fatal("something was written")
	}
}
