package tree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/test/poll"
)

const (
	outbox  = "outbox"
	reports = "reports-c1"
)

// reported waits until the parent's report space equals the outbox and the
// Collector has acked rev.
func reported(t testing.TB, child, parent *store.Store, col *Collector, rev int64) {
	t.Helper()
	want := hash(t, child, outbox)
	poll.True(t, "reports to converge", func() bool {
		a, err := col.Acked()
		return err == nil && a >= uint64(rev) && hash(t, parent, reports) == want
	})
}

// 6. Reports survive reconnects, latest per key; acks persist.
func TestUpsyncSurvivesReconnects(t *testing.T) {
	child, parent := newStore(t, store.Options{}), newStore(t, store.Options{})
	var rev int64
	for i := range 30 {
		rev = put(t, child, key(outbox, "ns", fmt.Sprint("r", i)), body("r", fmt.Sprint(i), 100))
	}
	rep := NewReporter(child, outbox, ReporterOptions{})
	col := NewCollector(parent, reports, CollectorOptions{})
	s := up(t, rep, col, 0)
	reported(t, child, parent, col, rev)
	poll.True(t, "reporter to see the ack", func() bool { return rep.Acked() >= uint64(rev) })
	s.cut()

	// While disconnected: updates (some twice), deletes, a new key.
	for i := range 10 {
		rev = put(t, child, key(outbox, "ns", fmt.Sprint("r", i)), body("r", "a", 100))
		rev = put(t, child, key(outbox, "ns", fmt.Sprint("r", i)), body("r", "b", 100))
	}
	for i := 20; i < 25; i++ {
		rev = del(t, child, key(outbox, "ns", fmt.Sprint("r", i)))
	}
	rev = put(t, child, key(outbox, "ns", "new"), body("new", "n", 100))

	// The ack survives a new Collector on the same store.
	col = NewCollector(parent, reports, CollectorOptions{})
	acked, err := col.Acked()
	if err != nil || acked == 0 {
		t.Fatalf("persisted ack %d, %v", acked, err)
	}
	before := rep.Stats()
	s = up(t, rep, col, acked)
	reported(t, child, parent, col, rev)
	after := rep.Stats()
	if d := after.Objects - before.Objects; d != 16 {
		t.Fatalf("%d reports resent, want 16 (10 updated, 5 deleted, 1 new)", d)
	}
	if after.Resyncs != before.Resyncs {
		t.Fatal("resume sent a full report set")
	}

	// Cut in the middle of a burst, then resume from the persisted ack.
	for i := range 30 {
		rev = put(t, child, key(outbox, "ns", fmt.Sprint("burst", i)), body("b", fmt.Sprint(i), 100))
	}
	s.cut()
	acked, _ = col.Acked()
	up(t, rep, col, acked)
	reported(t, child, parent, col, rev)
}

// A full report set (ack 0 or expired) deletes stale reports at the parent.
func TestUpsyncFullReportSet(t *testing.T) {
	child, parent := newStore(t, store.Options{HistorySize: 2}), newStore(t, store.Options{})
	var rev int64
	for i := range 10 {
		rev = put(t, child, key(outbox, "ns", fmt.Sprint("r", i)), body("r", "0", 50))
	}
	rep := NewReporter(child, outbox, ReporterOptions{})
	col := NewCollector(parent, reports, CollectorOptions{})
	s := up(t, rep, col, 0)
	reported(t, child, parent, col, rev)
	s.cut()
	for i := range 5 {
		rev = del(t, child, key(outbox, "ns", fmt.Sprint("r", i)))
	}
	acked, _ := col.Acked()
	up(t, rep, col, acked)
	reported(t, child, parent, col, rev)
	if n := rep.Stats().Resyncs; n != 2 {
		t.Fatalf("%d full report sets, want 2", n)
	}
}

// Allow refuses a report outside the child's subtree.
func TestUpsyncAllowRefuses(t *testing.T) {
	child, parent := newStore(t, store.Options{}), newStore(t, store.Options{})
	put(t, child, key(outbox, "mine", "a"), body("a", "a", 10))
	put(t, child, key(outbox, "theirs", "b"), body("b", "b", 10))
	rep := NewReporter(child, outbox, ReporterOptions{})
	col := NewCollector(parent, reports, CollectorOptions{
		Allow: func(k wire.Key) bool { return k.Namespace == "mine" },
	})
	s := up(t, rep, col, 0)
	s.wait(t)
	if !errors.Is(s.errs[1], ErrNotAllowed) {
		t.Fatalf("Collector.Serve = %v, want ErrNotAllowed", s.errs[1])
	}
	if !errors.Is(s.errs[0], ErrRemote) {
		t.Fatalf("Reporter.Serve = %v, want ErrRemote", s.errs[0])
	}
	if _, err := parent.Get(key(reports, "theirs", "b")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused report stored: %v", err)
	}
}

// Serve refuses a second concurrent stream.
func TestServeBusy(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	snd := NewSender(parent, mailbox, SenderOptions{})
	down(t, snd, NewReceiver(child, inbox, ReceiverOptions{}), nil)
	poll.True(t, "first Serve", func() bool { return snd.Stats().Resyncs == 1 })
	p := newPipe()
	defer p.close()
	if err := snd.Serve(context.Background(), p.parent, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Serve = %v, want ErrBusy", err)
	}
}

// A batch of reports that arrives at once is one Txn, with its Progress:
// the parent's store moves by one revision per batch, however the reader
// and the applier of the Collector interleave.
func TestCollectorBatchIsOneTxn(t *testing.T) {
	parent := newStore(t, store.Options{})
	col := NewCollector(parent, reports, CollectorOptions{})
	childEnd, parentEnd := net.Pipe()
	defer childEnd.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- col.Serve(ctx, parentEnd) }()
	acks := wire.NewReader(childEnd, nil)
	seq := uint64(0)
	for round := range 50 {
		var batch bytes.Buffer
		w := wire.NewWriter(&batch, nil)
		for i := range 3 {
			seq++
			m := &wire.Report{Seq: seq, Key: wire.Key{Resource: "configmaps", Namespace: "ns", Name: fmt.Sprintf("r%d", i)},
				Data: body(fmt.Sprintf("r%d", i), fmt.Sprint(round), 100)}
			if err := w.Write(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(&wire.Progress{Revision: seq}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		before := parent.Revision()
		if _, err := childEnd.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		m, err := acks.Read()
		if err != nil {
			t.Fatalf("round %d: no ack: %v (Serve: %v)", round, err, <-served)
		}
		if ack, ok := m.(*wire.ReportAck); !ok || ack.Seq != seq {
			t.Fatalf("round %d: got %#v, want ReportAck %d", round, m, seq)
		}
		if moved := parent.Revision() - before; moved != 1 {
			t.Fatalf("round %d: the batch took %d revisions, want 1", round, moved)
		}
	}
}
