package consensus

import (
	"bytes"
	"context"
	"testing"
)

// benchCmd is about the size of a small kube object.
var benchCmd = bytes.Repeat([]byte("x"), 512)

func reportOpsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPropose measures one proposer: each Propose waits for its own
// fsync, so this is the disk's fsync rate.
func BenchmarkPropose(b *testing.B) {
	n := openNode(b, b.TempDir(), newTestFSM())
	ctx := context.Background()
	for b.Loop() {
		if _, err := n.Propose(ctx, benchCmd); err != nil {
			b.Fatal(err)
		}
	}
	reportOpsPerSec(b)
}

// BenchmarkProposeParallel measures 8 proposers per GOMAXPROCS: their
// commands share fsyncs (group commit).
func BenchmarkProposeParallel(b *testing.B) {
	n := openNode(b, b.TempDir(), newTestFSM())
	ctx := context.Background()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Propose(ctx, benchCmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOpsPerSec(b)
}
