package syncer

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/status"
)

// BenchmarkEdgeCost measures what one edge's syncer costs, in goroutines
// and live heap, holding a Deployment of 3 replicas: without a placement
// (apply, drift and live state only), and with a placement naming a
// collector that counts ready Pods (the reporter, and the informers of
// the Deployment's ReplicaSets and Pods). Against a virtual cluster the
// figures include the cluster's side of each watch (it runs in the same
// process); against a real cluster (-short skips it) they are the
// syncer's alone. Run with -benchtime=1x:
//
//	go test -run '^$' -bench EdgeCost -benchtime=1x ./syncer/
func BenchmarkEdgeCost(b *testing.B) {
	clusters := []struct {
		name string
		make func(testing.TB) *testCluster
	}{{"vcluster", newFastVirtualCluster}}
	if !testing.Short() {
		var kc *kubecluster.Cluster
		clusters = append(clusters, struct {
			name string
			make func(testing.TB) *testCluster
		}{"kube", func(tb testing.TB) *testCluster {
			if kc == nil {
				kc = kubecluster.Start(b, kubecluster.Options{})
			}
			return gatedCluster(tb, kc, true)
		}})
	}
	for _, cl := range clusters {
		for _, collect := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/collector-%v", cl.name, collect), func(b *testing.B) {
				for i := range b.N {
					measureEdge(b, cl.make(b), fmt.Sprintf("cost-%v-%d", collect, i), collect)
				}
			})
		}
	}
}

func measureEdge(b *testing.B, c *testCluster, ns string, collect bool) {
	h := newHarness(b, c, "edge-c")
	web := store.Key{Resource: resDeployments, Namespace: ns, Name: "web"}
	objs := []map[string]any{namespace(ns), appDeployment(ns, "web", 3)}
	if collect {
		objs = append(objs,
			collectorObj("ready", map[string]any{"combinedFields": []any{map[string]any{"name": "ready", "type": "SUM", "subject": readyPodsExpr}}}),
			placementObj("p", []any{clause("apps", "deployments", ns)}, nil, "ready"))
	}
	h.put(objs...)
	settle := func() (int, uint64) {
		time.Sleep(300 * time.Millisecond) // part of the measure: goroutines end, caches fill
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc
	}
	g0, h0 := settle()
	s := h.start()
	if collect {
		h.waitPartial("3 ready", "p", "ready", web, func(_ status.Partial, r string) bool { return r == "[3]" })
		h.waitSync("ready", "p", func(ps reports.PlacementSync) bool { return ps.Ready == 1 })
	} else {
		h.waitStatus("2 applied", func(st DestinationState) bool { return st.Applied == 2 })
	}
	g1, h1 := settle()
	b.ReportMetric(float64(g1-g0), "goroutines")
	b.ReportMetric(float64(int64(h1)-int64(h0))/1024, "KiB-heap")
	b.ReportMetric(float64(s.Stats().Informers), "informers")
	h.stop()
	g2, _ := settle()
	b.ReportMetric(float64(g2-g0), "goroutines-left")
}

// BenchmarkChange measures one change of one object of an inbox of
// -objects ConfigMaps, from the inbox write until the syncer has applied
// it to a virtual cluster (in this process: its side of the apply is in
// the figures): what an edge does per change, by the size of its inbox.
//
//	go test -run '^$' -bench Change -benchmem ./syncer/
func BenchmarkChange(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("inbox-%d", n), func(b *testing.B) { // (a vcluster name: no "=")
			h := newHarness(b, newFastVirtualCluster(b), "edge-c")
			objs := []map[string]any{namespace("bench")}
			for i := range n {
				objs = append(objs, configMap("bench", fmt.Sprintf("cm-%d", i), map[string]any{"v": "0"}))
			}
			h.put(objs...)
			// Without client-go's rate limit (DefaultQPS): a change every
			// 10 ms would wait for it, not for the syncer.
			h.tweak = func(c *Config) { c.Cluster.QPS = -1 }
			s := h.start()
			h.waitStatus("all applied", func(st DestinationState) bool { return st.Applied == n+1 })
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				before := s.Stats().Applies
				h.put(configMap("bench", fmt.Sprintf("cm-%d", i%n), map[string]any{"v": fmt.Sprint(i + 1)}))
				// A bare loop, not poll: its timer would count in the
				// allocations measured.
				for s.Stats().Applies == before {
					time.Sleep(20 * time.Microsecond)
				}
			}
		})
	}
}
