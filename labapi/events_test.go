package labapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmlab/cmlab/events"
)

// readSSE reads events from the stream until it has max of them or the
// stream ends, returning their ids and the data of each.
func readSSE(t *testing.T, url, token, lastID string, max int) (ids []uint64, datas []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("X-CM-LAB-TOKEN", token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v", res.StatusCode, res.Header)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && id != "":
			n, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				t.Fatalf("bad id %q", id)
			}
			ids = append(ids, n)
			datas = append(datas, data)
			id, data = "", ""
			if len(ids) >= max {
				return ids, datas // disconnect mid-stream
			}
		}
	}
	return ids, datas
}

// TestSSEResumeUnderConcurrentAppends disconnects repeatedly mid-stream and
// resumes with Last-Event-ID while appenders run: every seq arrives exactly
// once, in order.
func TestSSEResumeUnderConcurrentAppends(t *testing.T) {
	tl := newTestLab(t)
	const writers, perWriter = 4, 100
	total := uint64(writers * perWriter)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				ev := events.MustNew("lab_test", &events.IdempotencyRecorded{Kind: "test", EntityID: strconv.Itoa(w*1000 + i)})
				if _, err := tl.eng.Append(context.Background(), ev); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var got []uint64
	last := ""
	for uint64(len(got)) < total {
		url := tl.hs.URL + "/api/events"
		if last == "" {
			url += "?since=0"
		}
		ids, datas := readSSE(t, url, tl.token, last, int(min(37, total-uint64(len(got)))))
		for i, id := range ids {
			var se StreamEvent
			if err := json.Unmarshal([]byte(datas[i]), &se); err != nil || se.Seq != id || se.Type != events.TypeIdempotencyRecorded {
				t.Fatalf("event %d: %v %s", id, err, datas[i])
			}
		}
		got = append(got, ids...)
		if len(ids) > 0 {
			last = strconv.FormatUint(ids[len(ids)-1], 10)
		}
	}
	wg.Wait()
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("position %d has seq %d (got %d events)", i, s, len(got))
		}
	}
	if uint64(len(got)) != total {
		t.Fatalf("got %d events, want %d", len(got), total)
	}
	// since=N starts after N.
	ids, _ := readSSE(t, tl.hs.URL+"/api/events?since="+strconv.FormatUint(total-2, 10), tl.token, "", 2)
	if len(ids) != 2 || ids[0] != total-1 || ids[1] != total {
		t.Fatalf("since: %v", ids)
	}
}

// TestSSEHeartbeatAndSlowClient: an idle stream gets heartbeats; a client
// that stops reading is dropped and never holds up appends.
func TestSSEHeartbeatAndSlowClient(t *testing.T) {
	tl := newTestLab(t, func(o *Options) {
		o.SSEHeartbeat = 20 * time.Millisecond
		o.SSEWriteTimeout = 200 * time.Millisecond
	})
	// EventSource's way: the Lab token in the query (the events below are Lab events).
	res, err := http.Get(tl.hs.URL + "/api/events?token=" + tl.srv.LabToken())
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	deadline := time.Now().Add(10 * time.Second)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": heartbeat\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat")
		}
	}
	// Stop reading; append far more than the socket buffers hold.
	big := strings.Repeat("x", 60<<10)
	start := time.Now()
	for i := 0; i < 300; i++ {
		ev := events.MustNew("lab_test", &events.FeedbackSubmitted{Entry: events.FeedbackEntry{SchemaVersion: 1, ID: "fb_" + strconv.Itoa(i), Notes: big}})
		if _, err := tl.eng.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	appendTime := time.Since(start)
	for time.Now().Before(deadline) && tl.srv.metrics.sseDropped.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	res.Body.Close()
	if tl.srv.metrics.sseDropped.Load() != 1 {
		t.Fatalf("slow client not dropped (dropped=%d)", tl.srv.metrics.sseDropped.Load())
	}
	t.Logf("300 appends of 60 KiB with a stalled client took %v", appendTime)
}

// TestSSEOutlivesReadTimeout: a stream keeps going past the server's
// ReadTimeout.
func TestSSEOutlivesReadTimeout(t *testing.T) {
	tl := newTestLab(t, func(o *Options) { o.SSEHeartbeat = 50 * time.Millisecond })
	hs := httptest.NewUnstartedServer(tl.srv.Handler())
	hs.Config.ReadTimeout = 200 * time.Millisecond
	hs.Start()
	defer hs.Close()
	tl.srv.SetListen(strings.TrimPrefix(hs.URL, "http://"))
	req, _ := http.NewRequest("GET", hs.URL+"/api/events", nil)
	req.Header.Set("X-CM-LAB-TOKEN", tl.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	time.AfterFunc(800*time.Millisecond, func() {
		tl.eng.Append(context.Background(), events.MustNew("lab_test", &events.IdempotencyRecorded{Kind: "late"}))
	})
	br := bufio.NewReader(res.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if line == "id: 1\n" {
			return
		}
	}
}
