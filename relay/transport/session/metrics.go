package session

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Per-link metrics of a relay's children, labelled by child.
var (
	descConnected    = prometheus.NewDesc("canopy_link_connected", "Whether the child's link is up (1) or not (0).", []string{"child"}, nil)
	descLinks        = prometheus.NewDesc("canopy_link_connects_total", "Links the child has opened (reconnects are this minus one).", []string{"child"}, nil)
	descBytes        = prometheus.NewDesc("canopy_link_bytes_total", "Frame bytes on the child's streams, by stream and direction.", []string{"child", "stream", "direction"}, nil)
	descMessages     = prometheus.NewDesc("canopy_link_messages_total", "Frames on the child's streams, by stream and direction.", []string{"child", "stream", "direction"}, nil)
	descAcked        = prometheus.NewDesc("canopy_link_acked_revision", "Last mailbox revision the child acknowledged as applied.", []string{"child"}, nil)
	descLag          = prometheus.NewDesc("canopy_link_lag_revisions", "Mailbox revisions the child has not acknowledged yet.", []string{"child"}, nil)
	descLagSecs      = prometheus.NewDesc("canopy_link_lag_seconds", "Age of the oldest mailbox change the child has not acknowledged (0: up to date).", []string{"child"}, nil)
	descDirty        = prometheus.NewDesc("canopy_link_dirty_keys", "Keys waiting to be sent to the child (bounded by its number of keys).", []string{"child"}, nil)
	descLastSeen     = prometheus.NewDesc("canopy_link_last_seen_seconds", "Unix time the child was last connected or heard from.", []string{"child"}, nil)
	descRefused      = prometheus.NewDesc("canopy_claims_refused_total", "Destinations the child announced and may not claim (not itself, not below it, or not granted by the root).", []string{"child"}, nil)
	descProxy        = prometheus.NewDesc("canopy_link_proxy_streams", "Requests to destinations open on the child's link (proxy streams).", []string{"child"}, nil)
	descProxyRefused = prometheus.NewDesc("canopy_link_proxy_streams_refused_total", "Requests to destinations refused because the child's link carried its limit of proxy streams (429).", []string{"child"}, nil)
	descRegRefused   = prometheus.NewDesc("canopy_registrations_refused_total",
		"Joins and links of relays at or below this relay that the root (or this relay) refused: a name already joined, another key, a token refused, a relay outside the child's subtree.", nil, nil)
	descRenewals = prometheus.NewDesc("canopy_child_certificate_renewals_total",
		"Certificate renewals the children of this relay asked for, by result: renewed, or refused (the log says why).", []string{"result"}, nil)
)

// Describe implements prometheus.Collector.
func (d *Downlink) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{descConnected, descLinks, descBytes, descMessages, descAcked, descLag, descLagSecs, descDirty, descLastSeen, descRefused, descRegRefused, descRenewals, descProxy, descProxyRefused} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector: one set of series per child.
func (d *Downlink) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descRegRefused, prometheus.CounterValue, float64(d.registrationsRefused.Load()))
	ch <- prometheus.MustNewConstMetric(descRenewals, prometheus.CounterValue, float64(d.renewed.Load()), "renewed")
	ch <- prometheus.MustNewConstMetric(descRenewals, prometheus.CounterValue, float64(d.renewalsRefused.Load()), "refused")
	for _, c := range d.Children() {
		name := c.Identity.Name
		connected := 0.0
		if c.Connected {
			connected = 1
		}
		gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
		}
		counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		gauge(descConnected, connected)
		counter(descLinks, c.Links)
		counter(descBytes, c.Down.BytesSent, "downsync", "out")
		counter(descBytes, c.Down.BytesReceived, "downsync", "in")
		counter(descBytes, c.Up.BytesReceived, "upsync", "in")
		counter(descBytes, c.Up.BytesSent, "upsync", "out")
		counter(descMessages, c.Down.MessagesSent, "downsync", "out")
		counter(descMessages, c.Down.MessagesReceived, "downsync", "in")
		counter(descMessages, c.Up.MessagesReceived, "upsync", "in")
		counter(descMessages, c.Up.MessagesSent, "upsync", "out")
		gauge(descAcked, float64(c.Down.AckedRevision))
		gauge(descLag, float64(c.Down.LagRevisions))
		gauge(descLagSecs, c.Down.LagSeconds)
		gauge(descDirty, float64(c.Down.DirtyKeys))
		counter(descRefused, c.ClaimsRefused)
		gauge(descProxy, float64(c.ProxyStreams))
		counter(descProxyRefused, c.ProxyRefused)
		if !c.LastSeen.IsZero() {
			gauge(descLastSeen, float64(c.LastSeen.Unix()))
		}
	}
}
