package vcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// measureClusters is how many clusters each memory figure is averaged over.
const measureClusters = 200

func memInUse() (heap, stack uint64) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// perCluster reports the heap and stack growth across f, and the
// goroutines it left running, divided by n.
func perCluster(b *testing.B, name string, n int, f func()) {
	heap0, stack0 := memInUse()
	g0 := runtime.NumGoroutine()
	f()
	heap1, stack1 := memInUse()
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), name+"-heap-B/cluster")
	b.ReportMetric(float64(int64(stack1)-int64(stack0))/float64(n), name+"-stack-B/cluster")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), name+"-goroutines/cluster")
}

// BenchmarkClusterMemory measures the heap that clusters hold, averaged
// over 200 of each: run it with
//
//	go test -run=NONE -bench=ClusterMemory -benchtime=1x ./relay/apiserver/vcluster/
func BenchmarkClusterMemory(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	b.Run("parts", func(b *testing.B) {
		var keep []any
		perCluster(b, "store", measureClusters, func() {
			for range measureClusters {
				st := store.New(storeOptions())
				keep = append(keep, st)
			}
		})
		stores := make([]*store.Store, measureClusters)
		for i := range stores {
			stores[i] = store.New(storeOptions())
		}
		perCluster(b, "kubeapi.Server", measureClusters, func() {
			for i := range measureClusters {
				keep = append(keep, kubeapi.New(kubeapi.Config{Store: stores[i], Authenticator: allowAll{}, Authorizer: allowAll{}, Logger: quiet}))
			}
		})
		perCluster(b, "prometheus-registry", measureClusters, func() {
			for range measureClusters {
				r := prometheus.NewRegistry()
				r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				keep = append(keep, r)
			}
		})
		runtime.KeepAlive(keep)
	})

	b.Run("new", func(b *testing.B) {
		var cs []*Cluster
		perCluster(b, "new", measureClusters, func() {
			for i := range measureClusters {
				c, err := New(Options{Name: fmt.Sprintf("c%d", i), Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				cs = append(cs, c)
			}
		})
		for _, c := range cs {
			c.Close()
		}
	})

	b.Run("idle", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		cs, stop := startMany(b, ctx, cancel, quiet)
		defer stop()
		_ = cs
	})

	b.Run("deployment", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		cs, stop := startMany(b, ctx, cancel, quiet)
		defer stop()
		perCluster(b, "deployment-3-replicas", measureClusters, func() {
			for _, c := range cs {
				cfg := c.RESTConfig()
				cfg.QPS = -1
				client, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := client.AppsV1().Deployments("default").Create(ctx, newDeployment("web", 3), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range cs {
				poll.Until(b, c.Name()+" running the deployment", func() error {
					if s := c.Stats(); s.PodsReady < 3 || s.Writes < 12 {
						return fmt.Errorf("%+v", s)
					}
					return nil
				}, poll.For(60*time.Second))
			}
			// A pause the measure includes: the status writes that follow
			// the last ready pod land.
			time.Sleep(500 * time.Millisecond)
		})
		var objs, bytes int64
		for _, c := range cs {
			s := c.Stats()
			objs += int64(s.Objects)
			bytes += s.Bytes
		}
		b.ReportMetric(float64(objs)/measureClusters, "objects/cluster")
		b.ReportMetric(float64(bytes)/measureClusters, "object-B/cluster")
	})
}

// startMany builds and starts measureClusters clusters, measuring them as
// "idle", and returns a function that stops them.
func startMany(b *testing.B, ctx context.Context, cancel context.CancelFunc, log *slog.Logger) ([]*Cluster, func()) {
	var cs []*Cluster
	done := make(chan error, measureClusters)
	perCluster(b, "idle", measureClusters, func() {
		for i := range measureClusters {
			c, err := New(Options{Name: fmt.Sprintf("c%d", i), Logger: log, ReadyDelay: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
			go func() { done <- c.Start(ctx) }()
		}
		for _, c := range cs {
			poll.True(b, c.Name()+"'s own watches", func() bool { return c.Stats().Watchers >= 2 })
		}
	})
	return cs, func() {
		cancel()
		for range cs {
			<-done
		}
	}
}
