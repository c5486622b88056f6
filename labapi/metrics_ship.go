package labapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cmlab/cmlab/ship/cursor"
)

// shipCollector exports the shipping cursor (state/ship.json, written by
// `cmlab ship` or `serve --ship`) when the home ships, so the lag shows
// whichever process ships.
type shipCollector struct{ s *Server }

var (
	descShipShipped = prometheus.NewDesc("cmlab_ship_shipped_seq", "Last seq the NATS JetStream stream acknowledged.", nil, nil)
	descShipLag     = prometheus.NewDesc("cmlab_ship_lag_events", "Events in the log not yet shipped.", nil, nil)
	descShipFailing = prometheus.NewDesc("cmlab_ship_failing", "1 while shipping retries after an error or has stopped on one.", nil, nil)
)

func (c shipCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descShipShipped
	ch <- descShipLag
	ch <- descShipFailing
}

func (c shipCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := cursor.Read(c.s.opts.Engine.Home())
	if err != nil {
		return // the home does not ship
	}
	st.LastSeq = max(st.LastSeq, c.s.opts.Engine.Log().LastSeq())
	failing := 0.0
	if st.Retrying || st.Stopped {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(descShipShipped, prometheus.GaugeValue, float64(st.Shipped))
	ch <- prometheus.MustNewConstMetric(descShipLag, prometheus.GaugeValue, float64(st.Lag()))
	ch <- prometheus.MustNewConstMetric(descShipFailing, prometheus.GaugeValue, failing)
}
