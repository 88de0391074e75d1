package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/test/kubecluster"
)

// BenchmarkAPI runs the same load (load.go) against a real kube-apiserver
// with one etcd member and with three (test/kubecluster, minimal: no
// controllers), a Canopy root with one replica and one with three (in this
// process, Raft over loopback TCP, the client on the leader). Each operation
// does a fixed amount of work (Scale; BENCH_QUICK=1 for the small one), so
// run it with -benchtime=1x:
//
//	go test ./test/bench -run '^$' -bench API -benchtime=1x -timeout=40m
//	go test ./test/bench -run '^$' -bench 'API/target=canopy-1/op=list-' -benchtime=1x -cpuprofile=cpu.out
//
// Metrics: ops/s over the run; p50-ms and p99-ms per operation (for watch,
// per write and watcher); ns/op is the run's wall time per operation.
func BenchmarkAPI(b *testing.B) {
	if bt := flag.Lookup("test.benchtime"); bt == nil || bt.Value.String() != "1x" {
		b.Fatal("run with -benchtime=1x: each operation does a fixed amount of work (BENCH_QUICK=1 for less)")
	}
	scale := ScaleFromEnv()
	targets := []struct {
		name  string
		start func(b testing.TB) *rest.Config
	}{
		{"kube", startKube},
		{"kube-3", func(b testing.TB) *rest.Config {
			return kubecluster.Start(b, kubecluster.Options{Minimal: true, Durable: true, EtcdMembers: 3}).RESTConfig()
		}},
		{"canopy-1", func(b testing.TB) *rest.Config { return startCanopy(b, 1) }},
		{"canopy-3", func(b testing.TB) *rest.Config { return startCanopy(b, 3) }},
	}
	for _, t := range targets {
		b.Run("target="+t.name, func(b *testing.B) {
			cfg := Config(t.start(b))
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			jcfg := rest.CopyConfig(cfg)
			jcfg.ContentType, jcfg.AcceptContentTypes = "application/json", "application/json"
			csJSON, err := kubernetes.NewForConfig(jcfg)
			if err != nil {
				b.Fatal(err)
			}
			runOps(b, cs, csJSON, scale)
		})
	}
}

// runOps runs every operation against cs (client-go's defaults: typed
// clients ask for protobuf, and send it), each in its own namespace; the
// big list, the watch fan-out and the mixed load also with csJSON (JSON both ways), so
// that the wire format's share shows.
func runOps(b *testing.B, cs, csJSON kubernetes.Interface, s Scale) {
	ctx := context.Background()
	ns := func(b *testing.B, name string) string {
		b.Helper()
		if err := EnsureNamespace(ctx, cs, name); err != nil {
			b.Fatal(err)
		}
		return name
	}
	// fresh names a namespace of its own for each round of an operation
	// (-count=N runs each N times against the same servers).
	rounds := map[string]int{}
	fresh := func(b *testing.B, name string) string {
		b.Helper()
		if rounds[name]++; rounds[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, rounds[name])
		}
		return ns(b, name)
	}
	report := func(b *testing.B, r Result, err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(max(r.Ops, 1)), "ns/op")
		b.ReportMetric(r.OpsPerSec(), "ops/s")
		b.ReportMetric(ms(Percentile(r.Latencies, 0.50)), "p50-ms")
		b.ReportMetric(ms(Percentile(r.Latencies, 0.99)), "p99-ms")
		if r.Last != nil {
			b.ReportMetric(ms(Percentile(r.Last, 0.50)), "last-p50-ms")
			b.ReportMetric(ms(Percentile(r.Last, 0.99)), "last-p99-ms")
		}
	}
	b.Run("op=create", func(b *testing.B) {
		r, err := Creates(ctx, cs, fresh(b, "create"), "cm", s.Writers, s.Creates)
		report(b, r, err)
	})
	b.Run("op=update", func(b *testing.B) {
		r, err := Updates(ctx, cs, fresh(b, "update"), s.Writers, s.Updates)
		report(b, r, err)
	})
	b.Run("op=get", func(b *testing.B) {
		const objects = 100
		name := fresh(b, "get")
		if _, err := Creates(ctx, cs, name, "cm", s.Writers, objects); err != nil {
			b.Fatal(err)
		}
		var names []string
		for i := range objects {
			names = append(names, fmt.Sprintf("cm-%d", i))
		}
		r, err := Gets(ctx, cs, name, names, s.Writers, s.Gets)
		report(b, r, err)
	})
	filled := map[int]bool{}
	list := func(b *testing.B, c kubernetes.Interface, objects, lists int) {
		name := ns(b, fmt.Sprintf("list-%d", objects))
		if !filled[objects] {
			if _, err := Creates(ctx, cs, name, "cm", s.Writers, objects); err != nil {
				b.Fatal(err)
			}
			filled[objects] = true
		}
		r, err := Lists(ctx, c, name, objects, lists)
		report(b, r, err)
	}
	b.Run(fmt.Sprintf("op=list-%d", s.SmallList), func(b *testing.B) { list(b, cs, s.SmallList, s.SmallLists) })
	b.Run(fmt.Sprintf("op=list-%d", s.BigList), func(b *testing.B) { list(b, cs, s.BigList, s.BigLists) })
	b.Run(fmt.Sprintf("op=list-%d-json", s.BigList), func(b *testing.B) { list(b, csJSON, s.BigList, s.BigLists) })
	b.Run(fmt.Sprintf("op=watch-%d", s.Watchers), func(b *testing.B) {
		r, err := WatchFanout(ctx, cs, fresh(b, "watch"), s.Watchers, s.WatchWrites)
		report(b, r, err)
	})
	b.Run(fmt.Sprintf("op=watch-%d-json", s.Watchers), func(b *testing.B) {
		r, err := WatchFanout(ctx, csJSON, fresh(b, "watch-json"), s.Watchers, s.WatchWrites)
		report(b, r, err)
	})
	mixed := func(b *testing.B, c kubernetes.Interface, namespace string) {
		listNS := fmt.Sprintf("list-%d", s.SmallList)
		if !filled[s.SmallList] {
			if _, err := Creates(ctx, cs, ns(b, listNS), "cm", s.Writers, s.SmallList); err != nil {
				b.Fatal(err)
			}
			filled[s.SmallList] = true
		}
		r, err := Mixed(ctx, c, fresh(b, namespace), listNS, s.Writers, s.MixedOps, s.MixedWatchers)
		report(b, r, err)
	}
	b.Run("op=mixed", func(b *testing.B) { mixed(b, cs, "mixed") })
	b.Run("op=mixed-json", func(b *testing.B) { mixed(b, csJSON, "mixed-json") })
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// startKube starts etcd and kube-apiserver (test/kubecluster, minimal).
func startKube(b testing.TB) *rest.Config {
	c := kubecluster.Start(b, kubecluster.Options{Minimal: true, Durable: true}) // etcd fsyncs, as every Canopy write does
	return c.RESTConfig()
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startCanopy starts n root replicas in this process (n > 1: one Raft
// cluster over loopback, as relay/server's ha tests do) and returns the
// admin configuration of the leader's "default" space.
func startCanopy(b testing.TB, n int) *rest.Config {
	b.Helper()
	dirs, gossip := make([]string, n), make([]string, n)
	for i := range n {
		dirs[i], gossip[i] = b.TempDir(), freePort(b)
	}
	if n > 1 {
		sharePKI(b, dirs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	roots := make([]*server.Root, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := server.Config{Name: fmt.Sprintf("root-%d", i), DataDir: dirs[i], APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}
		if n > 1 {
			var join []string
			for j := range n {
				if j != i {
					join = append(join, gossip[j])
				}
			}
			cfg.HA = server.Replication{RaftAddr: "127.0.0.1:0", PeerAddr: gossip[i], Join: join, BootstrapExpect: n}
		}
		wg.Go(func() { roots[i], errs[i] = server.OpenContext(ctx, cfg, quiet) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("root %d: %v", i, err)
		}
	}
	for i, r := range roots {
		serve(b, fmt.Sprintf("root-%d", i), r.Serve)
		<-r.Ready()
	}
	leader := 0
	if n > 1 {
		leader = -1
		for deadline := time.Now().Add(time.Minute); leader < 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("no leader after a minute")
			}
			for i, r := range roots {
				if r.IsLeader() {
					leader = i
				}
			}
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: roots[leader].KubeconfigPath()},
		&clientcmd.ConfigOverrides{CurrentContext: "default"})
	rc, err := cc.ClientConfig()
	if err != nil {
		b.Fatal(err)
	}
	return rc
}

// serve runs a root until the benchmark's end.
func serve(b testing.TB, name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("%s stopped with: %v", name, err)
		}
	})
}

// freePort returns a loopback address whose port was free a moment ago
// (memberlist needs one fixed port for UDP and TCP).
func freePort(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sharePKI creates the shared credentials in the first data directory and
// imports them into the others ("relay pki export | relay pki import").
func sharePKI(b testing.TB, dirs []string) {
	src := pki.Dir(dirs[0])
	if _, err := pki.LoadOrCreateCA(src); err != nil {
		b.Fatal(err)
	}
	if _, err := pki.LoadOrCreateToken(filepath.Join(src, pki.AdminTokenFile)); err != nil {
		b.Fatal(err)
	}
	if _, err := pki.LoadOrCreateSigningKey(filepath.Join(src, pki.SigningKeyFile)); err != nil {
		b.Fatal(err)
	}
	bundle, err := pki.ExportShared(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs[1:] {
		if err := pki.ImportShared(pki.Dir(d), bundle); err != nil {
			b.Fatal(err)
		}
	}
}
