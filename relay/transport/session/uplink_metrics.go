package session

import "github.com/prometheus/client_golang/prometheus"

var (
	descUpConnected  = prometheus.NewDesc("canopy_uplink_connected", "Whether the link to the parent is up (1) or not (0).", nil, nil)
	descUpReconnects = prometheus.NewDesc("canopy_uplink_reconnects_total", "Links to the parent opened after the first.", nil, nil)
	descUpBytes      = prometheus.NewDesc("canopy_uplink_bytes_total", "Frame bytes on the link to the parent, by stream and direction.", []string{"stream", "direction"}, nil)
	descUpCursor     = prometheus.NewDesc("canopy_uplink_cursor_revision", "Parent revision this relay has applied to its inbox.", nil, nil)
	descUpCertExpiry = prometheus.NewDesc("canopy_uplink_certificate_expiry_seconds",
		"Unix time this relay's certificate expires; it asks its parent for a new one well before (two thirds into its lifetime).", nil, nil)
	descUpRenewals = prometheus.NewDesc("canopy_uplink_certificate_renewals_total", "Certificates this relay renewed over its link to its parent.", nil, nil)
)

// Describe implements prometheus.Collector.
func (u *Uplink) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUpConnected, descUpReconnects, descUpBytes, descUpCursor, descUpCertExpiry, descUpRenewals} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (u *Uplink) Collect(ch chan<- prometheus.Metric) {
	connected := 0.0
	if u.Connected() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(descUpConnected, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(descUpReconnects, prometheus.CounterValue, float64(u.Reconnects()))
	down, up := u.Downsync(), u.Upsync()
	for _, m := range []struct {
		v                 uint64
		stream, direction string
	}{
		{down.BytesReceived, "downsync", "in"}, {down.BytesSent, "downsync", "out"},
		{up.BytesSent, "upsync", "out"}, {up.BytesReceived, "upsync", "in"},
	} {
		ch <- prometheus.MustNewConstMetric(descUpBytes, prometheus.CounterValue, float64(m.v), m.stream, m.direction)
	}
	ch <- prometheus.MustNewConstMetric(descUpRenewals, prometheus.CounterValue, float64(u.Renewals()))
	if cert := u.cert.Load(); cert != nil {
		ch <- prometheus.MustNewConstMetric(descUpCertExpiry, prometheus.GaugeValue, float64(cert.Leaf.NotAfter.Unix()))
	}
	if cursor, err := u.receiver.Cursor(); err == nil {
		ch <- prometheus.MustNewConstMetric(descUpCursor, prometheus.GaugeValue, float64(cursor))
	}
}
