package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
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
