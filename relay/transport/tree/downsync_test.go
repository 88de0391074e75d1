package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/test/poll"
)

// 1. Full resync of 100 objects, then updates and deletes incrementally.
func TestResyncThenIncremental(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	var rev int64
	for i := range 100 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", fmt.Sprint(i), 100))
	}
	// Noise in another space must not reach the child.
	put(t, parent, key("mailbox-other", "ns", "x"), body("x", "x", 10))

	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	if !snd.Resync(0) {
		t.Fatal("Resync(0) = false")
	}
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	if st := snd.Stats(); st.Resyncs != 1 || st.Objects != 100 {
		t.Fatalf("after resync: %+v, want 1 resync of 100 objects", st)
	}

	for i := range 30 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", fmt.Sprint("new", i), 120))
	}
	for i := 50; i < 70; i++ {
		rev = del(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)))
	}
	rev = put(t, parent, key(mailbox, "other-ns", "fresh"), body("fresh", "f", 10))
	converged(t, parent, child, rcv, rev)

	if n := child.Stats().Objects; n != 81+1 { // 81 objects + the cursor
		t.Fatalf("child holds %d objects, want 82", n)
	}
	// The cursor is persisted: a new Receiver on the same store reads it.
	c, err := NewReceiver(child, inbox, ReceiverOptions{}).Cursor()
	if err != nil || c < uint64(rev) {
		t.Fatalf("persisted cursor %d, %v; want >= %d", c, err, rev)
	}
	poll.True(t, "ack", func() bool { return snd.Stats().AckedRevision >= uint64(rev) })
	if st := snd.Stats(); st.Resyncs != 1 || st.DirtyKeys != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// 2. A reconnect with the child's cursor sends only what changed.
func TestResume(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	var rev int64
	for i := range 100 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", fmt.Sprint(i), 100))
	}
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	s := down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	s.cut()

	// Ten keys change, some twice: only their latest versions must cross.
	for i := range 10 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", "first", 100))
		if i%2 == 0 {
			rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", "second", 100))
		}
	}
	before := snd.Stats()
	cursor, _ := rcv.Cursor()
	if snd.Resync(cursor) {
		t.Fatalf("Resync(%d) = true, history covers it", cursor)
	}
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	after := snd.Stats()
	if d := after.Objects - before.Objects; d != 10 {
		t.Fatalf("%d objects sent on resume, want 10", d)
	}
	if after.Resyncs != before.Resyncs {
		t.Fatal("resume resynced")
	}
	// 10 Puts and Progress frames only.
	if d := after.MessagesSent - before.MessagesSent; d > 20 {
		t.Fatalf("%d messages on resume, want <= 20", d)
	}
}

// 3. History compacted while disconnected: a resync, and keys deleted on
// the parent are deleted on the child.
func TestResyncAfterCompaction(t *testing.T) {
	parent, child := newStore(t, store.Options{HistorySize: 4}), newStore(t, store.Options{})
	var rev int64
	for i := range 20 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", fmt.Sprint(i), 50))
	}
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	s := down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	s.cut()

	for i := range 8 {
		rev = del(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)))
	}
	rev = put(t, parent, key(mailbox, "ns", "o10"), body("o", "changed", 50))
	cursor, _ := rcv.Cursor()
	if !snd.Resync(cursor) {
		t.Fatalf("Resync(%d) = false after compaction", cursor)
	}
	before := snd.Stats()
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	if d := snd.Stats().Resyncs - before.Resyncs; d != 1 {
		t.Fatalf("%d resyncs, want 1", d)
	}
	for i := range 8 {
		if _, err := child.Get(key(inbox, "ns", fmt.Sprint("o", i))); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("o%d still in the inbox: %v", i, err)
		}
	}
	if d := rcv.Stats().Resyncs; d != 2 {
		t.Fatalf("receiver saw %d resyncs, want 2", d)
	}
}

// 4. State, not events: 1 000 updates to 50 keys while disconnected cost
// about the 50 latest values on reconnect.
func TestCatchUpCostsState(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	const keys, updates, size = 50, 1000, 1000
	var rev int64
	for i := range keys {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("k", i)), body("k", "0", size))
	}
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	s := down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	s.cut()

	for u := range updates {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("k", u%keys)), body("k", fmt.Sprint("u", u), size))
	}
	latest := 0
	for i := range keys {
		o, _ := parent.Get(key(mailbox, "ns", fmt.Sprint("k", i)))
		latest += len(o.Data)
	}
	before := snd.Stats()
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	after := snd.Stats()
	bytes, objs := after.BytesSent-before.BytesSent, after.Objects-before.Objects
	const overhead = 64 // frame header, revision, key
	t.Logf("catch-up after %d updates to %d keys: %d objects, %d bytes (latest values: %d bytes)", updates, keys, objs, bytes, latest)
	if objs != keys {
		t.Fatalf("%d objects sent, want %d", objs, keys)
	}
	if limit := uint64(2*latest + overhead*keys); bytes > limit {
		t.Fatalf("%d bytes sent, want <= %d", bytes, limit)
	}
}

// 4b. The same with a connected child that stops reading for a while (a
// slow or congested link): the versions written meanwhile are skipped.
// The stream is held shut during the updates, so the figure does not
// depend on how fast this machine is.
func TestSlowChildSkipsVersions(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	const keys, updates = 50, 1000
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	gate := make(chan struct{})
	down(t, snd, rcv, func(p *pipe) io.ReadWriteCloser {
		return &slowConn{Conn: p.parent, p: p, gate: gate}
	})
	var rev int64
	for u := range updates {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("k", u%keys)), body("k", fmt.Sprint("u", u), 200))
	}
	// While the child is stalled the lag grows in seconds...
	poll.Until(t, "lag while stalled", func() error {
		if st := snd.Stats(); st.LagSeconds < 0.05 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	close(gate)
	converged(t, parent, child, rcv, rev)
	// ... and drops to zero once it has acknowledged everything.
	poll.Until(t, "lag after convergence", func() error {
		if st := snd.Stats(); st.LagSeconds != 0 || st.LagRevisions != 0 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	st := snd.Stats()
	t.Logf("stalled child: %d updates, %d objects sent, %d bytes", updates, st.Objects, st.BytesSent)
	// At most one object per key, plus what was in flight when the
	// stream stalled.
	if st.Objects > 2*keys {
		t.Fatalf("%d objects sent for %d updates to %d keys: not coalesced", st.Objects, updates, keys)
	}
}

// 5. A stream cut in the middle of a burst leaves inbox and cursor
// consistent, and a reconnect converges.
func TestCutMidBurst(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	var rev int64
	for i := range 200 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", "0", 300))
	}
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{MaxBatch: 16})
	s := down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	s.cut()

	for i := range 200 {
		rev = put(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)), body("o", "1", 300))
	}
	for i := 150; i < 200; i++ {
		rev = del(t, parent, key(mailbox, "ns", fmt.Sprint("o", i)))
	}
	// About a third of the catch-up gets through.
	s = down(t, snd, rcv, func(p *pipe) io.ReadWriteCloser {
		return &slowConn{Conn: p.parent, p: p, limit: 20_000}
	})
	s.wait(t)
	if s.errs[0] == nil || s.errs[1] == nil {
		t.Fatalf("Serve errors after the cut: %v, %v", s.errs[0], s.errs[1])
	}
	cursor, err := rcv.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	lr, _ := parent.List(store.ListOptions{Space: mailbox})
	for _, o := range lr.Items {
		c, err := child.Get(key(inbox, o.Key.Namespace, o.Key.Name))
		if err != nil {
			t.Fatalf("%s missing from the inbox: %v", o.Key.Name, err)
		}
		same := string(value(t, c.Data)) == string(value(t, o.Data))
		if same {
			applied++
		}
		if uint64(o.Revision) <= cursor && !same {
			t.Fatalf("%s at revision %d <= cursor %d differs in the inbox", o.Key.Name, o.Revision, cursor)
		}
	}
	t.Logf("cut mid-burst: %d of %d updates applied, cursor %d (parent at %d)", applied, len(lr.Items), cursor, rev)
	if applied == 0 || applied == len(lr.Items) {
		t.Fatalf("%d of %d applied: the cut was not mid-burst", applied, len(lr.Items))
	}

	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
}

func value(t testing.TB, data []byte) []byte {
	t.Helper()
	var o struct{ Data map[string]string }
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return []byte(o.Data["v"])
}

// A Receiver refuses a frame that does not belong on a downsync stream.
func TestReceiverProtocolError(t *testing.T) {
	child := newStore(t, store.Options{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	p := newPipe()
	defer p.close()
	done := make(chan error, 1)
	go func() { done <- rcv.Serve(t.Context(), p.child) }()
	go newTestWriter(p.parent).send(&reportMsg)
	if code := readError(t, p.parent); code != wire.CodeProtocol {
		t.Fatalf("Error code %v, want protocol", code)
	}
	if err := <-done; !errors.Is(err, ErrProtocol) {
		t.Fatalf("Serve = %v, want ErrProtocol", err)
	}
}

// CursorChanged is closed once the cursor moves, and only then: a waiter
// for a revision needs no polling.
func TestCursorChanged(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	rev := put(t, parent, key(mailbox, "ns", "a"), body("o", "1", 10))
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	before := rcv.CursorChanged()
	if again := rcv.CursorChanged(); again != before {
		t.Fatal("two calls before a move returned different channels")
	}
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)
	select {
	case <-before:
	case <-time.After(waitFor):
		t.Fatal("CursorChanged not closed after the cursor moved")
	}
	next := rcv.CursorChanged()
	select {
	case <-next:
		t.Fatal("CursorChanged closed without a move")
	default:
	}
	rev = put(t, parent, key(mailbox, "ns", "b"), body("o", "2", 10))
	select {
	case <-next:
	case <-time.After(waitFor):
		t.Fatal("CursorChanged not closed after the second move")
	}
	converged(t, parent, child, rcv, rev)
}

// TestChangeAndCursorInOneTxn: each change of the mailbox reaches the
// inbox in one Txn with the cursor that covers it (the sender writes a
// revision's objects and its Progress at once), not the objects first and
// the cursor in a Txn of its own.
func TestChangeAndCursorInOneTxn(t *testing.T) {
	parent, child := newStore(t, store.Options{}), newStore(t, store.Options{})
	rev := put(t, parent, key(mailbox, "ns", "o"), body("o", "0", 100))
	snd := NewSender(parent, mailbox, SenderOptions{})
	rcv := NewReceiver(child, inbox, ReceiverOptions{})
	down(t, snd, rcv, nil)
	converged(t, parent, child, rcv, rev)

	const changes = 20
	before := child.Revision()
	for i := range changes {
		rev = put(t, parent, key(mailbox, "ns", "o"), body("o", fmt.Sprint(i+1), 100))
		converged(t, parent, child, rcv, rev)
	}
	if n := child.Revision() - before; n != changes {
		t.Errorf("%d changes took %d Txns in the inbox, want %d", changes, n, changes)
	}
}
