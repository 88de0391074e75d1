package consensus

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
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

// BenchmarkStoreManyWriters measures a root's store, on one Raft node,
// written by 2 000 goroutines at once, each its own small object (a flat
// fleet's children reporting, nine in ten as store.Bulk): Txns per second
// through the log, with the store's group commit.
func BenchmarkStoreManyWriters(b *testing.B) {
	st := store.New(store.Options{})
	b.Cleanup(st.Close)
	n := openNode(b, b.TempDir(), st)
	st.SetLog(n)
	ctx := context.Background()
	data := []byte(`{"metadata":{"name":"r"},"status":{"ready":1,"observed":"` + string(benchCmd[:200]) + `"}}`)
	var writer atomic.Int64
	b.SetParallelism(1000) // per GOMAXPROCS: 2 000 on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := writer.Add(1)
		k := store.Key{Space: fmt.Sprintf("reports-e%d", w), Resource: store.Resource{Resource: "partials"}, Name: "r"}
		ctx := ctx
		if w%10 != 0 {
			ctx = store.Bulk(ctx) // nine in ten write as a relay's children do
		}
		var rev int64
		for pb.Next() {
			op := store.Op{Type: store.OpCreate, Key: k, Data: data}
			if rev != 0 {
				op = store.Op{Type: store.OpUpdate, Key: k, Data: data, ExpectRevision: rev}
			}
			res, err := st.Txn(ctx, op)
			if err != nil {
				b.Error(err)
				return
			}
			rev = res.Revision
		}
	})
	reportOpsPerSec(b)
}
