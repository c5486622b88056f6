package labapi

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// openStream opens GET /api/events?since=0 with tok on its own connection
// and returns the response once its first line arrived.
func openStream(t *testing.T, tl *testLab, tok string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", tl.hs.URL+"/api/events?since=0", nil)
	req.Header.Set("X-CM-LAB-TOKEN", tok)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == 200 {
		if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil {
			res.Body.Close()
			return nil, err
		}
	}
	return res, nil
}

// pollUntil waits for cond, failing after d.
func pollUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLabStreamsStopReadingWhenClientsGone (issue 27 finding 8): 200 Lab
// streams from seq 0 over a log of events the Lab token does not see;
// their clients go as soon as the stream has started. The streams end,
// and their log reads stop well short of each reading the whole log
// (counted, not timed).
func TestLabStreamsStopReadingWhenClientsGone(t *testing.T) {
	tl := newTestLab(t, func(o *Options) { o.LabStreams = 1000 })
	const n = 20000
	ctx := context.Background()
	for i := 0; i < n; i += 500 {
		batch := make([]*events.Event, 500)
		for j := range batch {
			batch[j], _ = events.New("wal", &events.WalRepaired{Segment: "x", Reason: "test"})
		}
		if _, err := tl.eng.Append(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	const streams = 200
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := openStream(t, tl, tl.srv.LabToken())
			if err != nil {
				errs <- err
				return
			}
			res.Body.Close() // the client goes
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	pollUntil(t, "every stream ended", 60*time.Second, func() bool { return tl.srv.metrics.sseClients.Load() == 0 })
	reads := tl.srv.streamReads.Load()
	t.Logf("%d streams of a %d-event log read %d events after their clients went (whole log each: %d)", streams, n, reads, streams*n)
	if reads >= streams*n/4 {
		t.Fatalf("the streams read %d events; their clients were gone after the first line (whole log each: %d)", reads, streams*n)
	}
	if tl.srv.labStreams.Load() != 0 {
		t.Fatalf("%d Lab streams still counted", tl.srv.labStreams.Load())
	}
}

// TestLabStreamBudget (issue 27 finding 8): past its budget a Lab stream
// is refused with 503 UNAVAILABLE and Retry-After (not reset), the
// operator's stream still opens, and a freed slot is taken again.
func TestLabStreamBudget(t *testing.T) {
	tl := newTestLab(t, func(o *Options) { o.LabStreams = 3 })
	var held []*http.Response
	for i := 0; i < 3; i++ {
		res, err := openStream(t, tl, tl.srv.LabToken())
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("Lab stream %d: %v %v", i, err, res)
		}
		held = append(held, res)
	}
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	over, err := openStream(t, tl, tl.srv.LabToken())
	if err != nil {
		t.Fatalf("the 4th Lab stream was not answered: %v", err)
	}
	body := make([]byte, 4096)
	k, _ := over.Body.Read(body)
	over.Body.Close()
	if over.StatusCode != 503 || over.Header.Get("Retry-After") != "5" || !strings.Contains(string(body[:k]), `"code":"UNAVAILABLE"`) || !strings.Contains(string(body[:k]), "Retry after 5 seconds") {
		t.Fatalf("4th Lab stream: %d Retry-After %q %s", over.StatusCode, over.Header.Get("Retry-After"), body[:k])
	}
	op, err := openStream(t, tl, tl.token)
	if err != nil || op.StatusCode != 200 {
		t.Fatalf("operator stream over the Lab budget: %v %v", err, op)
	}
	op.Body.Close()
	held[0].Body.Close()
	held = held[1:]
	pollUntil(t, "the closed stream released its slot", 10*time.Second, func() bool { return tl.srv.labStreams.Load() == 2 })
	again, err := openStream(t, tl, tl.srv.LabToken())
	if err != nil || again.StatusCode != 200 {
		t.Fatalf("Lab stream after one closed: %v %v", err, again)
	}
	held = append(held, again)
}
