package labui

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// The first rows in the HTML: a page at / served with the first page of
// runs (labapi.RunsPage) holds the runs view as runs.js would build it
// for that answer, with its first screenful of rows, so the browser paints
// them from the document and lab.css alone. runs.js then takes the view
// over: it reads the same answer from the page (main's data-runs) instead
// of asking for it, and replaces the view with its own, all rows, in one
// task. What runs.js writes into a row is written here the same way
// (dom.js relTime, metricBadges, shortId); TestLabPage/server-rows holds
// the two to each other in Chromium.

// firstScreenRows is how many rows the server renders: a screenful of a
// window up to about 1,400 px high (45 px rows under about 330 px of
// header, lab.css). runs.js adds the rest of the page.
const firstScreenRows = 24

// runsAnswer is the part of GET /api/runs?limit=50&sort=newest's answer
// the rows show.
type runsAnswer struct {
	Items []runItem `json:"items"`
	Total int       `json:"total"`
}

type runItem struct {
	RunID         string   `json:"runId"`
	CreatedAt     *string  `json:"createdAt"`
	Topic         *string  `json:"topic"`
	VideoPath     *string  `json:"videoPath"`
	Metrics       *metrics `json:"autoMetricsSummary"`
	FeedbackCount float64  `json:"feedbackCount"`
}

type metrics struct {
	SyncRating        *float64 `json:"syncRating"`
	SyncLabel         string   `json:"syncLabel"`
	MeanDriftMs       *float64 `json:"meanDriftMs"`
	CaptionOverall    *float64 `json:"captionOverall"`
	ProxyScoreOverall *float64 `json:"proxyScoreOverall"`
}

// runsView is what the "runs" template shows.
type runsView struct {
	JSON        string // the answer, for runs.js to take
	Roots       []string
	Rows        []rowView
	Status      string
	StatusTimed bool // no rows: the status line is the first paint
}

type rowView struct {
	RunID, Href, PickLabel, Topic, Short, Rated string
	Index                                       int
	Video                                       bool
	Created                                     createdView
	Badges                                      []badgeView
}

type createdView struct {
	Time      bool // a <time>; else a <span> of Text
	ISO, Text string
}

type badgeView struct{ Class, Title, Text string }

// newRunsView reads the runs answer; now is the time the rows are
// written (relative times: "3 min ago").
func newRunsView(answer []byte, roots []string, now time.Time) (*runsView, error) {
	var a runsAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, fmt.Errorf("the first runs: %w", err)
	}
	v := &runsView{JSON: string(answer), Roots: roots, Status: "Loading runs…"}
	for i, r := range a.Items {
		if i == firstScreenRows {
			return v, nil
		}
		v.Rows = append(v.Rows, newRow(r, i, now))
	}
	// The whole page fits the first screenful: the status line too (runs.js
	// show); the pager stays empty, a page of 50 that fits has no next.
	switch {
	case a.Total == 0:
		v.Status, v.StatusTimed = "No runs yet: import one above, or let an agent import them.", true
	default:
		s := "s"
		if a.Total == 1 {
			s = ""
		}
		v.Status = fmt.Sprintf("Showing %d of %d run%s.", len(a.Items), a.Total, s)
	}
	return v, nil
}

func newRow(r runItem, i int, now time.Time) rowView {
	topic := "(no topic)"
	label := r.RunID
	if r.Topic != nil && *r.Topic != "" {
		topic, label = *r.Topic, *r.Topic
	}
	row := rowView{RunID: r.RunID, Index: i, Href: "#/review/" + encodeURIComponent(r.RunID),
		PickLabel: "Pick " + label + " for compare", Topic: topic, Short: shortID(r.RunID),
		Video: r.VideoPath != nil && *r.VideoPath != "", Created: relTime(r.CreatedAt, now)}
	m := r.Metrics
	if m == nil {
		m = &metrics{}
	}
	sync := "sync"
	if m.SyncLabel != "" {
		sync = "sync (" + m.SyncLabel + ")"
	}
	row.Badges = append(row.Badges, badge(sync, m.SyncRating, "/100"), badge("caption", m.CaptionOverall, "/100"))
	if m.MeanDriftMs != nil {
		row.Badges = append(row.Badges, badge("drift", m.MeanDriftMs, " ms"))
	}
	row.Badges = append(row.Badges, badge("score", m.ProxyScoreOverall, "/100"))
	if r.FeedbackCount != 0 {
		row.Rated = "rated " + jsNumber(r.FeedbackCount) + "×"
	}
	return row
}

// badge is dom.js badge: a metric with its label, its level in text.
func badge(label string, value *float64, unit string) badgeView {
	if value == nil {
		return badgeView{Class: "badge", Text: label + " n/a"}
	}
	n := jsNumber(jsRound(*value))
	if unit != "/100" {
		return badgeView{Class: "badge", Text: label + " " + n + unit}
	}
	level, mark := "bad", "✗"
	switch r := jsRound(*value); {
	case r >= 80:
		level, mark = "ok", "✓"
	case r >= 60:
		level, mark = "warn", "~"
	}
	return badgeView{Class: "badge badge-" + level, Title: label + " " + n + " of 100", Text: mark + " " + label + " " + n + unit}
}

// relTime is dom.js relTime: "3 min ago", titled with the time itself.
func relTime(iso *string, now time.Time) createdView {
	s := ""
	if iso != nil {
		s = *iso
	}
	t, ok := parseISO(s)
	if !ok {
		if s == "" {
			s = "—"
		}
		return createdView{Text: s}
	}
	secs := jsRound(float64(now.UnixMilli()-t.UnixMilli()) / 1000)
	var txt string
	switch {
	case secs < 45:
		txt = "just now"
	case secs < 3600:
		txt = jsNumber(jsRound(secs/60)) + " min ago"
	case secs < 86400:
		txt = jsNumber(jsRound(secs/3600)) + " h ago"
	case secs < 86400*30:
		txt = jsNumber(jsRound(secs/86400)) + " d ago"
	default:
		txt = t.UTC().Format("2006-01-02")
	}
	return createdView{Time: true, ISO: s, Text: txt}
}

// parseISO reads the forms of Date.parse that hold a zone (or none, as
// a date alone, which is UTC); a local date-time is left to the page.
func parseISO(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// jsRound is Math.round: halves go up.
func jsRound(x float64) float64 { return math.Floor(x + 0.5) }

// jsNumber is a whole number as JavaScript prints it.
func jsNumber(x float64) string {
	if x == 0 {
		return "0" // and -0
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// shortID is dom.js shortId (lengths in UTF-16 code units, as in JS).
func shortID(id string) string {
	u := utf16.Encode([]rune(id))
	if len(u) <= 16 {
		return id
	}
	return string(utf16.Decode(u[:10])) + "…" + string(utf16.Decode(u[len(u)-4:]))
}

// encodeURIComponent is JavaScript's.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
