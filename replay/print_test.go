package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/engine"
	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
)

func TestWriteTableAndJSON(t *testing.T) {
	ov := 70
	evs := []*events.Event{
		events.MustNew("lab_s", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_1", RunID: "run_1", Ratings: &events.Ratings{Overall: &ov}}}).
			WithRequest("r1", "sha256-00", json.RawMessage(`{"feedbackId":"fb_1"}`)),
		events.MustNew("c1", &events.PtyOutput{BlockID: "blk_1", SpoolOffset: 7, Data: []byte("hi\n")}),
	}
	evs[0].Seq, evs[0].TS, evs[0].ID = 1, 1770379200000, "id-1"
	evs[1].Seq, evs[1].TS, evs[1].ID = 2, 1770379201500, "id-2"
	var tb bytes.Buffer
	if err := WriteTable(&tb, evs); err != nil {
		t.Fatal(err)
	}
	want := "SEQ  TIME                      TYPE                STREAM  REQ  SUMMARY\n" +
		"1    2026-02-06T12:00:00.000Z  feedback.submitted  lab_s   r1   feedback fb_1 run=run_1\n" +
		"2    2026-02-06T12:00:01.500Z  pty.output          c1      -    3 bytes at 7 \"hi\\n\"\n"
	if tb.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", tb.String(), want)
	}
	var jb bytes.Buffer
	if err := WriteJSON(&jb, evs); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"seq":1,"v":1,"id":"id-1","type":"feedback.submitted","ts":1770379200000,"time":"2026-02-06T12:00:00.000Z","stream":"lab_s","req":"r1","rh":"sha256-00","resp":{"feedbackId":"fb_1"},"data":{"entry":{"schemaVersion":1,"id":"fb_1","createdAt":"","runId":"run_1","ratings":{"overall":70}}}}` + "\n" +
		`{"seq":2,"v":1,"id":"id-2","type":"pty.output","ts":1770379201500,"time":"2026-02-06T12:00:01.500Z","stream":"c1","data":{"block_id":"blk_1","spool_offset":7,"data":"aGkK"}}` + "\n"
	if jb.String() != wantJSON {
		t.Fatalf("json:\n%s\nwant:\n%s", jb.String(), wantJSON)
	}
	// An event that no longer decodes is still printed, with the reason.
	bad := *evs[1]
	bad.V = 7
	r := Render(&bad)
	if r.Data != nil || r.DecodeError == "" {
		t.Fatalf("undecodable render %+v", r)
	}
}

// TestCheckWhileDaemonHoldsLog: replay reads a log whose owner is open
// (holding its lock) and compares with views the owner keeps writing.
func TestCheckWhileDaemonHoldsLog(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "live")}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, ev := range cloneEvents(workload(t, 4, 60)) {
		if _, err := eng.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Check(ctx, CheckOptions{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical || rep.LastSeq != 60 {
		t.Fatalf("check of an open home: %+v first %+v", rep, rep.First)
	}
	into := home.Home{Dir: filepath.Join(t.TempDir(), "at30")}
	if res, err := To(ctx, ToOptions{Src: h, Into: into, UpTo: 30}); err != nil || res.Last != 30 {
		t.Fatalf("replay of an open home: %+v %v", res, err)
	}
}

// TestPrintStreamsChunks prints more events than one aligned chunk: one
// header, every matching event once, in order; JSON lines likewise.
func TestPrintStreamsChunks(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "h")}
	eng, err := engine.Open(ctx, engine.Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	evs := cloneEvents(workload(t, 2, 2600))
	if _, err := eng.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := OpenLog(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	n, err := Print(ctx, log, Filter{From: 100}, &tb, false)
	if err != nil || n != 2501 {
		t.Fatalf("printed %d (%v), want 2501", n, err)
	}
	lines := strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n")
	if len(lines) != 2502 || !strings.HasPrefix(lines[0], "SEQ ") || strings.Count(tb.String(), "SEQ ") != 1 {
		t.Fatalf("%d lines, header %q", len(lines), lines[0])
	}
	for i, l := range lines[1:] {
		if want := fmt.Sprintf("%d ", 100+i); !strings.HasPrefix(l, want) {
			t.Fatalf("row %d is %q, want seq %d", i, l, 100+i)
		}
	}
	var jb bytes.Buffer
	n, err = Print(ctx, log, Filter{Types: []string{events.TypePtyOutput}}, &jb, true)
	if err != nil || n == 0 || strings.Count(jb.String(), "\n") != n {
		t.Fatalf("json: %d events, %d lines, %v", n, strings.Count(jb.String(), "\n"), err)
	}
	var empty bytes.Buffer
	if n, err := Print(ctx, log, Filter{Req: "none"}, &empty, false); err != nil || n != 0 || !strings.HasPrefix(empty.String(), "SEQ ") {
		t.Fatalf("empty selection: %d %v %q", n, err, empty.String())
	}
}
