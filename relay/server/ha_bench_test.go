package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/test/poll"
)

// Writes through the kube API of a root with one replica and with three
// (Raft over loopback TCP, every write committed by a majority), from 16
// client-go writers; with three, through the leader and through a
// follower (which forwards to the leader). Run with
//
//	go test ./relay/server -run '^$' -bench RootWrites -benchtime=2000x
func BenchmarkRootWrites(b *testing.B) {
	b.Run("replicas=1", func(b *testing.B) {
		benchWrites(b, adminClient(b, startTestRoot(b), "default"))
	})
	b.Run("replicas=3/leader", func(b *testing.B) {
		rs := startReplicas(b, 3)
		benchWrites(b, adminClient(b, rs[leaderOf(b, rs)].Root, "default"))
	})
	b.Run("replicas=3/follower", func(b *testing.B) {
		rs := startReplicas(b, 3)
		benchWrites(b, adminClient(b, rs[(leaderOf(b, rs)+1)%3].Root, "default"))
	})
}

func benchWrites(b *testing.B, cs *kubernetes.Clientset) {
	var n atomic.Int64
	b.SetParallelism(8) // 8 x GOMAXPROCS(2) = 16 writers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", n.Add(1))}, Data: map[string]string{"k": "v"}}
			if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

// Failover: three replicas; the leader is stopped and a survivor is
// written to until a write is acknowledged. The time from the stop to
// that acknowledgement is the availability gap (raft's default timers:
// a 1 s heartbeat timeout). Run with
//
//	go test ./relay/server -run '^$' -bench RootFailover -benchtime=3x
func BenchmarkRootFailover(b *testing.B) {
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		rs := startReplicas(b, 3)
		leader := leaderOf(b, rs)
		survivor := rs[(leader+1)%3]
		cs := adminClient(b, survivor.Root, "default")
		createConfigMap(b, survivor, fmt.Sprintf("before-%d", i))
		b.StartTimer()
		began := time.Now()
		rs[leader].stop()
		poll.Until(b, "a write acknowledged after the leader stopped", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "after-"}}
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			return err
		}, poll.Every(20*time.Millisecond))
		gap := time.Since(began)
		b.StopTimer()
		total += gap
		b.Logf("failover %d: next acknowledged write %v after the leader stopped", i, gap.Round(time.Millisecond))
		for j, r := range rs {
			if j != leader {
				r.stop()
			}
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}
