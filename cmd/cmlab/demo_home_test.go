package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cmlab/cmlab/events"
	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
	"github.com/cmlab/cmlab/replay"
)

// TestDemoHomeTraceCheckWhatIf builds the demo home through a real daemon
// and runs the debugging tools on it: the trace of the submit request
// lists the experiment's creation, the submit with every feedback entry it
// wrote, and the experiment's record; the views re-project identically;
// the crashed mandate is fragile exactly at s2.
func TestDemoHomeTraceCheckWhatIf(t *testing.T) {
	ctx := context.Background()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "demo")}
	var logBuf bytes.Buffer
	res, err := Demo(ctx, DemoOptions{Home: h, Log: &logBuf})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, logBuf.String())
	}
	t.Logf("demo: terminal via %s, %d events\n%s", res.TerminalVia, res.LastSeq, logBuf.String())
	if len(res.Runs) != 3 || len(res.FeedbackIDs) != 2 || res.ExperimentID == "" || len(res.SubmitFeedback) != 3 || len(res.Blocks) != 2 {
		t.Fatalf("demo result %+v", res)
	}
	log, err := replay.OpenLog(h.WALDir())
	if err != nil {
		t.Fatal(err)
	}

	tr, err := replay.Trace(ctx, log, res.SubmitRequestID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var submit *replay.Hit
	for i, hit := range tr.Hits {
		types = append(types, hit.Event.Type)
		if hit.Event.Req == res.SubmitRequestID {
			submit = &tr.Hits[i]
		}
	}
	if !slices.Equal(types, []string{events.TypeExperimentCreated, events.TypeExperimentSubmitted}) {
		t.Fatalf("trace types %v", types)
	}
	if submit == nil || submit.Event.Type != events.TypeExperimentSubmitted {
		t.Fatalf("trace has no submit: %+v", tr.Hits)
	}
	sub, err := events.DecodeAs[*events.ExperimentSubmitted](submit.Event)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Experiment.ExperimentID != res.ExperimentID || sub.Experiment.Status != "done" || len(sub.Feedback) != 3 {
		t.Fatalf("submit event %+v", sub)
	}
	via := strings.Join(submit.Via, " ")
	for _, fb := range res.SubmitFeedback {
		if !strings.Contains(via, "data.feedback[") || !strings.Contains(via, "="+fb) {
			t.Fatalf("submit hit does not show feedback %s: %s", fb, via)
		}
	}
	if !slices.Equal(tr.Related, sortedCopy(append([]string{res.ExperimentID}, res.SubmitFeedback...))) {
		t.Fatalf("related ids %v", tr.Related)
	}
	// A feedback id traces to the submit that wrote it.
	if tr2, err := replay.Trace(ctx, log, res.SubmitFeedback[1]); err != nil || len(tr2.Hits) != 1 || tr2.Hits[0].Event.Seq != submit.Event.Seq {
		t.Fatalf("trace of %s: %+v %v", res.SubmitFeedback[1], tr2, err)
	}

	rep, err := replay.Check(ctx, replay.CheckOptions{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical {
		t.Fatalf("demo views differ from their re-projection: %+v", rep.First)
	}

	wi, err := replay.WhatIf(ctx, log, res.MandateID)
	if err != nil {
		t.Fatal(err)
	}
	last := wi.Points[len(wi.Points)-1]
	if last.Type != events.TypeStepExecuting || last.StepID != "s2" || !last.Fragile || last.Landed == nil ||
		last.Landed.Verdict.Kind != recovery.ManualReview {
		t.Fatalf("last what-if point %+v", last)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
