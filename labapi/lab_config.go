package labapi

import (
	"net/http"

	"github.com/cmlab/cmlab/events"
)

// Lab routes: config, health, session (LAB-API.md).

type configResponse struct {
	SessionID               string   `json:"sessionId"`
	Token                   string   `json:"token"`
	Version                 string   `json:"version"`
	RunnerEnabled           bool     `json:"runnerEnabled"`
	RunnerAllowNetwork      bool     `json:"runnerAllowNetwork"`
	RunnerAllowWorkflowExec bool     `json:"runnerAllowWorkflowExec"`
	AllowedRoots            []string `json:"allowedRoots"`
	UI                      struct {
		BlindMetricsDefault  bool `json:"blindMetricsDefault"`
		RevealMetricsEnabled bool `json:"revealMetricsEnabled"`
	} `json:"ui"`
	Task            *Task `json:"task"`
	ExitAfterSubmit int   `json:"exitAfterSubmit"`
	ReadOnly        bool  `json:"readOnly,omitempty"`
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) error {
	c := configResponse{SessionID: s.opts.SessionID, Token: s.opts.LabToken, Version: s.opts.Version,
		AllowedRoots: append([]string{}, s.opts.AllowedRoots...), Task: s.opts.Task,
		ExitAfterSubmit: s.opts.ExitAfterSubmit, ReadOnly: s.opts.ReadOnly}
	c.UI.BlindMetricsDefault, c.UI.RevealMetricsEnabled = true, true
	writeJSON(w, http.StatusOK, c)
	return nil
}

// Health is the answer of GET /api/health.
type Health struct {
	Status   string `json:"status"` // ok | degraded
	Cause    string `json:"cause,omitempty"`
	Fix      string `json:"fix,omitempty"`
	WalIndex uint64 `json:"walIndex"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Views is "behind" while the views lag the log (a projection failed
	// after its events were made durable; they catch up by themselves),
	// with ViewsCause. The log and every acknowledged write are intact.
	Views      string `json:"views,omitempty"`
	ViewsCause string `json:"viewsCause,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	h := Health{Status: "ok", WalIndex: s.opts.Engine.Log().LastSeq(), ReadOnly: s.opts.ReadOnly}
	if err := s.errFn(); err != nil {
		h.Status, h.Cause = "degraded", err.Error()
		h.Fix = degradedError(err).Fix()
	}
	if err := s.opts.Engine.ViewsErr(); err != nil {
		h.Views, h.ViewsCause = "behind", err.Error()
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) error {
	started := s.startedAt.UnixMilli()
	ts, ok, err := s.lab.sessionStarted(s.opts.SessionID)
	if err != nil {
		return labStoreError(err)
	}
	if ok {
		started = ts
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sessionId": s.opts.SessionID,
		"startedAt": events.FormatISO(started),
		"walIndex":  s.opts.Engine.Log().LastSeq(),
	})
	return nil
}
