package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
)

// BenchmarkDestinationGet measures a GET of one ConfigMap at a real
// kube-apiserver: directly, through the root and an edge (one tier), and
// through the root, a region and an edge (two tiers), each over its own
// HTTP/2 connection, one request at a time. Both edges front the same
// cluster.
//
//	go test ./relay/server -run '^$' -bench DestinationGet -benchtime=2000x
func BenchmarkDestinationGet(b *testing.B) {
	cluster := kubecluster.Start(b, kubecluster.Options{Minimal: true})
	root := startTestRoot(b)
	token := joinToken(b, root)
	region := startTestChild(b, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: b.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	poll.True(b, "region serving", func() bool { return region.LinkAddr() != "" })
	startTestChild(b, ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: b.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, InMemory: true, Kubeconfig: cluster.Kubeconfig})
	startTestChild(b, ChildConfig{Role: pki.RoleEdge, Name: "e2", DataDir: b.TempDir(), Parents: []string{region.LinkAddr()},
		JoinToken: token, InMemory: true, Kubeconfig: cluster.Kubeconfig})
	direct, err := dynamic.NewForConfig(cluster.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	// The root's admin, canopy:canopy:admin at the cluster, may read.
	applyTB(b, direct, gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "canopy-admins"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "canopy:system:masters"}}})
	applyTB(b, direct, gvrConfigMaps, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "bench", "namespace": "default"}, "data": map[string]any{"k": "v"}})
	for _, path := range []struct {
		name string
		rc   *rest.Config
	}{
		{"direct", cluster.RESTConfig()},
		{"one-tier", adminDestinationConfig(b, root, "e1")},
		{"two-tiers", adminDestinationConfig(b, root, "e2")},
	} {
		rc := rest.CopyConfig(path.rc)
		rc.QPS = -1
		c, err := dynamic.NewForConfig(rc)
		if err != nil {
			b.Fatal(err)
		}
		cms := c.Resource(gvrConfigMaps).Namespace("default")
		poll.Until(b, path.name+" reachable", func() error { _, err := cms.Get(b.Context(), "bench", metav1.GetOptions{}); return err })
		b.Run("path="+path.name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				if _, err := cms.Get(b.Context(), "bench", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			b.ReportMetric(ms(percentile(ds, 0.5)), "p50-ms")
			b.ReportMetric(ms(percentile(ds, 0.99)), "p99-ms")
		})
	}
}

// BenchmarkPropagationUnderWatches measures how long a change written at
// the root takes to be applied at an edge's virtual cluster, two tiers
// down, with no proxied watch open and with 1 000 watches open through
// the same links (root → region → edge) on the namespace the change lands
// in, so that every change also sends 1 000 watch events up those links:
// read by the client, or never read (each stream stalls once its window
// is full, and must not hold up the links).
//
//	go test ./relay/server -run '^$' -bench PropagationUnderWatches -benchtime=1x
func BenchmarkPropagationUnderWatches(b *testing.B) {
	for _, c := range []struct {
		watches int
		read    bool
	}{{0, true}, {1000, true}, {1000, false}} {
		name := fmt.Sprintf("watches=%d", c.watches)
		if !c.read {
			name += "-unread"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				inbox, applied := propagationUnderWatches(b, c.watches, c.read)
				b.ReportMetric(ms(percentile(inbox, 0.5)), "inbox-p50-ms")
				b.ReportMetric(ms(percentile(inbox, 0.99)), "inbox-p99-ms")
				b.ReportMetric(ms(percentile(applied, 0.5)), "p50-ms")
				b.ReportMetric(ms(percentile(applied, 0.99)), "p99-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// propagationUnderWatches returns, for 50 changes, how long each took to
// reach the edge's inbox (the links' part) and to be applied at its
// cluster.
func propagationUnderWatches(b *testing.B, watches int, read bool) (inbox, applied []time.Duration) {
	root, _, edge := startChain(b, 0)
	local, err := dynamic.NewForConfig(edge.cluster.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	rc := adminDestinationConfig(b, root, "e1")
	rc.QPS = -1
	proxied, err := dynamic.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	cms := proxied.Resource(gvrConfigMaps).Namespace("default")
	poll.Until(b, "e1 reachable", func() error { _, err := cms.List(b.Context(), metav1.ListOptions{}); return err })
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	events := make(chan struct{}, 1<<16)
	for range watches {
		w, err := cms.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if !read {
			continue // its events pile up: the stream stalls at its window
		}
		go func() {
			for range w.ResultChan() {
				select {
				case events <- struct{}{}:
				default:
				}
			}
		}()
	}
	lw, err := local.Resource(gvrConfigMaps).Namespace("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=bench"})
	if err != nil {
		b.Fatal(err)
	}
	iw, err := edge.Store().Watch(ctx, store.WatchOptions{Space: layout.InboxSpace})
	if err != nil {
		b.Fatal(err)
	}
	received := make(chan int, 64)
	go func() {
		for ev := range iw.Events() {
			if ev.Object == nil || ev.Object.Key.Name != "bench" {
				continue
			}
			var cm struct {
				Data struct {
					V string `json:"v"`
				} `json:"data"`
			}
			if json.Unmarshal(ev.Object.Data, &cm) == nil {
				n, _ := strconv.Atoi(cm.Data.V)
				received <- n
			}
		}
	}()
	seen := make(chan int, 64)
	go func() {
		for ev := range lw.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				v, _, _ := unstructured.NestedString(u.Object, "data", "v")
				n, _ := strconv.Atoi(v)
				seen <- n
			}
		}
	}()
	wait := func(ch chan int, v int) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case n := <-ch:
				if n >= v {
					return time.Now()
				}
			case <-timeout:
				b.Fatalf("value %d never reached e1", v)
			}
		}
	}
	putDownsync(b, root, "bench", "0", "e1")
	wait(received, 0)
	wait(seen, 0)
	cpu0, wall0 := cpuTime(), time.Now()
	defer func() {
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Since(wall0)), "cpus-busy")
	}()
	for i := 1; i <= 50; i++ {
		t0 := time.Now()
		putDownsync(b, root, "bench", strconv.Itoa(i), "e1")
		inbox = append(inbox, wait(received, i).Sub(t0))
		applied = append(applied, wait(seen, i).Sub(t0))
	}
	b.Logf("%d proxied watches: %d watch events received during 50 changes", watches, len(events))
	return inbox, applied
}
