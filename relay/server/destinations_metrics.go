package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
)

// descDestinations counts the fleet's destinations at the root.
var descDestinations = prometheus.NewDesc("canopy_destinations",
	"Destinations (edge clusters) the relay tree announces, by state: connected, or disconnected (their edge, or a relay on their path, is not linked).",
	[]string{"state"}, nil)

// destinationsCollector exports the destinations below the root by state
// (canopy_destinations), from the replicated route and link records
// (session.Fleet): every replica of the root gives the same figures, and
// they match the CONNECTED column of the SyncTargets once the inventory
// has caught up. Read at each scrape.
type destinationsCollector struct{ store store.Reader }

// Describe implements prometheus.Collector.
func (c destinationsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descDestinations }

// Collect implements prometheus.Collector.
func (c destinationsCollector) Collect(ch chan<- prometheus.Metric) {
	dests, err := session.Fleet(c.store, layout.DownsyncSpace)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDestinations, err)
		return
	}
	var connected float64
	for _, d := range dests {
		if d.Connected {
			connected++
		}
	}
	ch <- prometheus.MustNewConstMetric(descDestinations, prometheus.GaugeValue, connected, "connected")
	ch <- prometheus.MustNewConstMetric(descDestinations, prometheus.GaugeValue, float64(len(dests))-connected, "disconnected")
}
