package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
)

// Catch-up of a new replica: three replicas hold N ConfigMaps (written
// through the kube API by 16 writers); a fourth, started with an empty data
// directory and --join, is timed from its start until it serves
// (OpenContext returns: the leader has added it, it has caught up with the
// leader's read index and made sure of its spaces). With "snapshot" the
// three have taken a snapshot and compacted their logs (--trailing-logs=64)
// before the fourth starts, so it installs the leader's snapshot; with
// "log" they never snapshot and it replays the whole log. Run with
//
//	go test ./relay/server -run '^$' -bench RootCatchUp -benchtime=1x
func BenchmarkRootCatchUp(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, mode := range []string{"snapshot", "log"} {
			b.Run(fmt.Sprintf("objects=%d/%s", n, mode), func(b *testing.B) {
				benchCatchUp(b, n, mode == "snapshot")
			})
		}
	}
}

func benchCatchUp(b *testing.B, objects int, snapshot bool) {
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		ha := Replication{TrailingLogs: 64}
		if !snapshot {
			ha = Replication{SnapshotThreshold: 1 << 40}
		}
		rs, dirs, gossip := startReplicasHA(b, 3, ha)
		leader := leaderOf(b, rs)
		writeConfigMaps(b, rs[leader].Root, objects)
		if snapshot {
			for _, r := range rs {
				if err := r.node.Snapshot(); err != nil {
					b.Fatal(err)
				}
			}
			if st := rs[leader].node.Status(); st.FirstLogIndex <= 1 {
				b.Fatalf("leader's log not compacted: %+v", st)
			}
		}
		dir := b.TempDir()
		bundle, err := pki.ExportShared(pki.Dir(dirs[0]))
		if err == nil {
			err = pki.ImportShared(pki.Dir(dir), bundle)
		}
		if err != nil {
			b.Fatal(err)
		}
		ha.RaftAddr, ha.PeerAddr, ha.Join = "127.0.0.1:0", freeTCPPort(b), gossip[:1]
		cfg := Config{Name: "root-3", DataDir: dir, APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0", HA: ha}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		b.StartTimer()
		began := time.Now()
		r, err := OpenContext(ctx, cfg, quiet)
		took := time.Since(began)
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		st := r.node.Status()
		list, err := r.store.List(store.ListOptions{Space: "default", Resource: store.Resource{Resource: "configmaps"}, Namespace: "default"})
		r.close()
		if err != nil {
			b.Fatal(err)
		}
		got := len(list.Items)
		if got < objects {
			b.Fatalf("the new replica serves %d ConfigMaps, want %d", got, objects)
		}
		if restored := st.SnapshotsRestored > 0; restored != snapshot {
			b.Fatalf("snapshot restored: %v, want %v (%+v)", restored, snapshot, st)
		}
		total += took
		b.Logf("catch-up %d: %d objects, revision %d, serving after %v (snapshots restored: %d)",
			i, got, st.Revision, took.Round(time.Millisecond), st.SnapshotsRestored)
		for _, r := range rs {
			r.stop()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/catchup")
}

// startReplicasHA starts n roots on loopback that form one cluster, with
// ha's settings (RaftAddr, PeerAddr, Join and BootstrapExpect are set
// here), and waits until all serve. It also returns the data directories
// and gossip addresses. The gossip addresses must be known before any
// replica starts, so they are free ports that another process may take
// meanwhile: a start that finds one taken is tried again on fresh ones.
func startReplicasHA(t testing.TB, n int, ha Replication) ([]*replica, []string, []string) {
	t.Helper()
	for try := 1; ; try++ {
		out, dirs, gossip, err := openReplicas(t, n, ha)
		// memberlist words its errors with %v: the cause is only in the
		// text.
		if err != nil && strings.Contains(err.Error(), syscall.EADDRINUSE.Error()) && try < 3 {
			t.Logf("starting the replicas again on other ports: %v", err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range out {
			r.stop = serveInBackground(t, fmt.Sprintf("root-%d", i), r.Serve)
			<-r.Ready()
		}
		return out, dirs, gossip
	}
}

// openReplicas opens startReplicasHA's replicas; on an error it closes
// those it opened.
func openReplicas(t testing.TB, n int, ha Replication) ([]*replica, []string, []string, error) {
	dirs, gossip := make([]string, n), make([]string, n)
	for i := range n {
		dirs[i], gossip[i] = t.TempDir(), freeTCPPort(t)
	}
	sharePKI(t, dirs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]*replica, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		h := ha
		h.RaftAddr, h.PeerAddr, h.BootstrapExpect = "127.0.0.1:0", gossip[i], n
		for j := range n {
			if j != i {
				h.Join = append(h.Join, gossip[j])
			}
		}
		cfg := Config{Name: fmt.Sprintf("root-%d", i), DataDir: dirs[i], APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0", HA: h}
		wg.Go(func() {
			r, err := OpenContext(ctx, cfg, quiet)
			if err != nil {
				errs[i] = fmt.Errorf("replica %d: %w", i, err)
				return
			}
			out[i] = &replica{Root: r}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, r := range out {
			if r != nil {
				r.close()
			}
		}
		return nil, nil, nil, err
	}
	return out, dirs, gossip, nil
}

// writeConfigMaps creates n ConfigMaps through r's kube API from 16
// writers.
func writeConfigMaps(t testing.TB, r *Root, n int) {
	t.Helper()
	cs := adminClient(t, r, "default")
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)},
					Data: map[string]string{"k": fmt.Sprintf("value of cm-%05d", i)}}
				if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
