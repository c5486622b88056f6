package labapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/events"
)

// The feedback long poll (issue 25, an extension of GET /api/feedback):
// with wait=<duration> ("30s", or a number of seconds) a poll that finds
// no entry after since waits until one is appended — woken by the commit,
// never by a timer loop — or the duration passes, then answers exactly as
// the poll without wait would at that moment. Without wait the answer is
// byte for byte the seed's. An agent (lab_feedback_poll wait_seconds) or
// 'cmlab feedback poll --follow' thus waits for a human without polling
// in a loop.

// MaxFeedbackWait caps wait.
const MaxFeedbackWait = 10 * time.Minute

// MaxFeedbackWaiters bounds the long polls waiting at once (the route
// needs no token for a GET, as the Lab's): past it a long poll is BUSY,
// so idle connections cannot pile up goroutines and file reads.
const MaxFeedbackWaiters = 64

// feedbackSignal is closed and replaced at every committed feedback event.
type feedbackSignal struct {
	once    sync.Once
	err     error
	mu      sync.Mutex
	ch      chan struct{}
	waiters int // long polls waiting; guarded by mu
}

// enter counts a waiting long poll; false past MaxFeedbackWaiters.
func (f *feedbackSignal) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiters >= MaxFeedbackWaiters {
		return false
	}
	f.waiters++
	return true
}

func (f *feedbackSignal) leave() {
	f.mu.Lock()
	f.waiters--
	f.mu.Unlock()
}

func (f *feedbackSignal) current() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ch
}

func (f *feedbackSignal) Observe(ev *events.Event) {
	if ev.Type != events.TypeFeedbackSubmitted && ev.Type != events.TypeFeedbackIngested {
		return
	}
	f.mu.Lock()
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

// feedbackChanged subscribes the signal to the engine at the first long
// poll (from the log's end: no history replayed) and returns the channel
// the next feedback commit closes.
func (s *Server) feedbackChanged() (chan struct{}, error) {
	f := &s.fbSignal
	f.once.Do(func() {
		f.ch = make(chan struct{})
		f.err = s.opts.Engine.Subscribe(resumeAt{f, s.opts.Engine.Log().LastSeq()})
	})
	return f.current(), f.err
}

// resumeAt is an observer fed only the log after seq.
type resumeAt struct {
	*feedbackSignal
	seq uint64
}

func (r resumeAt) Covered() uint64 { return r.seq }

// parseFeedbackWait reads wait: a Go duration or a number of seconds;
// capped at MaxFeedbackWait.
func parseFeedbackWait(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseFloat(v, 64)
		if nerr != nil || n < 0 {
			return 0, NewError(CodeInvalidArgument, "wait must be a duration (30s) or a number of seconds, not "+strconv.Quote(v), "Send wait=30s, or omit it for an immediate answer.")
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d < 0 {
		return 0, NewError(CodeInvalidArgument, "wait must not be negative", "Send wait=30s, or omit it for an immediate answer.")
	}
	return min(d, MaxFeedbackWait), nil
}

// feedbackLongPoll answers GET /api/feedback with wait.
func (s *Server) feedbackLongPoll(w http.ResponseWriter, r *http.Request, wait string) error {
	d, err := parseFeedbackWait(wait)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if !s.fbSignal.enter() {
		return NewError(CodeBusy, strconv.Itoa(MaxFeedbackWaiters)+" feedback long polls are already waiting", "Retry in a few seconds, or poll without wait.")
	}
	defer s.fbSignal.leave()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		changed, err := s.feedbackChanged()
		if err != nil {
			return err
		}
		page, err := PollFeedback(s.opts.Engine.Home().FeedbackFile(), q.Get("since"), strings.TrimSpace(q.Get("sessionId")), parseLimit(q.Get("limit")))
		if err != nil {
			return err
		}
		if len(page.Items) > 0 || len(page.Malformed) > 0 {
			writeJSON(w, http.StatusOK, page)
			return nil
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-s.closing.Done():
		case <-r.Context().Done():
			return r.Context().Err()
		}
		writeJSON(w, http.StatusOK, page)
		return nil
	}
}
