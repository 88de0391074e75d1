package tree

import (
	"context"
	"fmt"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
)

// BenchmarkPropagateOne measures one change at the parent until it is
// applied in the child's inbox, over an in-memory pipe.
func BenchmarkPropagateOne(b *testing.B) {
	parent, child := newStore(b, store.Options{}), newStore(b, store.Options{})
	k := key(mailbox, "ns", "obj")
	rev := put(b, parent, k, body("obj", "0", 500))
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	down(b, snd, rcv, nil)
	converged(b, parent, child, rcv, rev)
	w, err := child.Watch(context.Background(), store.WatchOptions{Space: inbox})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ctx := context.Background()
	before := snd.Stats()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if _, err := parent.Update(ctx, k, body("obj", fmt.Sprint(i), 500), 0); err != nil {
			b.Fatal(err)
		}
		if ev := <-w.Events(); ev.Type != store.Modified {
			b.Fatalf("event %v", ev.Type)
		}
	}
	after := snd.Stats()
	b.ReportMetric(float64(after.BytesSent-before.BytesSent)/float64(b.N), "link-bytes/op")
	b.ReportMetric(float64(after.MessagesSent-before.MessagesSent)/float64(b.N), "frames/op")
}
