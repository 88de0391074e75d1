package kubeapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/canopy-dev/canopy/relay/store"
)

// metrics are the API's Prometheus metrics, in a registry of their own so
// that several servers can live in one process (tests, simulations).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
	handler  http.Handler
}

func newMetrics(st *store.Store, process bool, extra ...prometheus.Collector) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of API requests by verb, resource and HTTP response code.",
		}, []string{"verb", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb and resource (watches excluded).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"verb", "resource"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "canopy_api_watches",
			Help: "Number of open watch requests.",
		}),
	}
	storeStat := func(name, help string, f func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(st.Stats()) })
	}
	m.registry.MustRegister(
		m.requests, m.latency, m.watchers,
		storeStat("canopy_store_objects", "Objects in the store, all spaces.", func(s store.Stats) float64 { return float64(s.Objects) }),
		storeStat("canopy_store_bytes", "Bytes of object data in the store.", func(s store.Stats) float64 { return float64(s.Bytes) }),
		storeStat("canopy_store_watchers", "Watchers registered with the store.", func(s store.Stats) float64 { return float64(s.Watchers) }),
		storeStat("canopy_store_revision", "Current store revision.", func(s store.Stats) float64 { return float64(s.Revision) }),
	)
	if process {
		m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m.registry.MustRegister(extra...)
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(rq *request, code int, d time.Duration) {
	verb := rq.metricVerb
	if verb == "" {
		verb = rq.r.Method
	}
	m.requests.WithLabelValues(verb, rq.metricResource, strconv.Itoa(code)).Inc()
	if verb != "WATCH" {
		m.latency.WithLabelValues(verb, rq.metricResource).Observe(d.Seconds())
	}
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
