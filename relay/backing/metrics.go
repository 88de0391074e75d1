package backing

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

var (
	descUp = prometheus.NewDesc("canopy_space_backend_up",
		"Whether the backend of a backed space answers (its Space's Reachable condition): 1 or 0.", []string{"space"}, nil)
	descReady = prometheus.NewDesc("canopy_space_backend_ready",
		"Whether a backed space has what placement needs from its backend (its Space's Ready condition): 1 or 0.", []string{"space"}, nil)
)

// Collector exports the conditions of backed spaces, read from their
// records: every replica of the root serves them, whichever runs the
// mirrors.
type Collector struct{ Store *store.Store }

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUp
	ch <- descReady
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	list, err := c.Store.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descUp, err)
		return
	}
	for _, rec := range list.Items {
		if !layout.ReadSpace(rec).Backed() {
			continue
		}
		var r struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		_ = json.Unmarshal(rec.Data, &r)
		up, ready := 0.0, 0.0
		for _, c := range r.Status.Conditions {
			switch {
			case c.Status != "True":
			case c.Type == ConditionReachable:
				up = 1
			case c.Type == ConditionReady:
				ready = 1
			}
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, rec.Key.Name)
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready, rec.Key.Name)
	}
}
