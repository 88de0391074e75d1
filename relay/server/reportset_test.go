package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/topology/summary"
)

// A follower's reports reach the leader's mirror in batches of at most
// pumpBatchBytes (sendAll, deliver), and the leader reads each child's
// reports from the replica its link record names. While a second session
// sends everything again, the first one's copy still serves; a batch of a
// session the leader does not know is refused.
func TestReportMirror(t *testing.T) {
	defer func(n int) { pumpBatchBytes = n }(pumpBatchBytes)
	pumpBatchBytes = 1 << 10
	hard := store.New(store.Options{})
	hard.SetLog(store.NewMemLog(hard))
	t.Cleanup(hard.Close)
	ctx := context.Background()
	leader := newReportSet("root-0", hard, true, quiet)
	follower := newReportSet("root-1", hard, true, quiet)
	t.Cleanup(leader.close)
	t.Cleanup(follower.close)

	// Ten children: c0-c4 linked to the follower, c5-c9 to the leader,
	// each with a reports space of 20 objects of about 100 bytes.
	put := func(st *store.Store, k store.Key, v string) {
		t.Helper()
		data := fmt.Appendf(nil, `{"metadata":{"name":%q},"v":%q}`, k.Name, v)
		if _, err := st.Get(k); err == nil {
			_, err = st.Update(ctx, k, data, 0)
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := st.Create(ctx, k, data); err != nil {
			t.Fatal(err)
		}
	}
	cm := func(child string, i int) store.Key {
		return store.Key{Space: layout.ReportsSpace(child), Resource: store.Resource{Resource: "configmaps"}, Namespace: "ns", Name: fmt.Sprintf("o%02d", i)}
	}
	for c := range 10 {
		child := fmt.Sprintf("c%d", c)
		put(hard, store.Key{Resource: layout.SpaceResource, Name: layout.ReportsSpace(child)}, "space")
		putLink(t, hard, child, map[bool]string{true: "root-1", false: "root-0"}[c < 5])
		st := map[bool]*reportSet{true: follower, false: leader}[c < 5].local
		for i := range 20 {
			put(st, cm(child, i), "one")
		}
	}
	batches := 0
	sess := "s1"
	send := func(b reportBatch) error {
		b.Replica, b.Session = follower.self, sess
		batches++
		return leader.deliver(ctx, mustJSONBytes(t, b))
	}
	if st := leader.Store(layout.ReportsSpace("c0")); st != nil {
		t.Fatal("the leader serves the follower's reports before any arrived")
	}
	if err := follower.sendAll(send); err != nil {
		t.Fatal(err)
	}
	if batches < 5 {
		t.Fatalf("everything went in %d batches, want at least 5 of at most %d bytes", batches, pumpBatchBytes)
	}
	same := func(what string, wantV string) {
		t.Helper()
		for c := range 10 {
			space := layout.ReportsSpace(fmt.Sprintf("c%d", c))
			st := leader.Store(space)
			if st == nil {
				t.Fatalf("%s: no store for %s", what, space)
			}
			lr, err := st.List(store.ListOptions{Space: space})
			if err != nil || len(lr.Items) != 20 {
				t.Fatalf("%s: %s holds %d objects (%v), want 20", what, space, len(lr.Items), err)
			}
			var o struct{ V string }
			_ = json.Unmarshal(lr.Items[0].Data, &o)
			if c < 5 && o.V != wantV {
				t.Fatalf("%s: %s has %q, want %q", what, space, o.V, wantV)
			}
		}
	}
	same("after the first session", "one")

	// A second session: until it completes, the first one's copy serves.
	for c := range 5 {
		for i := range 20 {
			put(follower.local, cm(fmt.Sprintf("c%d", c), i), "two")
		}
	}
	sess = "s2"
	var during []string
	inner := send
	send = func(b reportBatch) error {
		err := inner(b)
		if !b.Complete {
			st := leader.Store(layout.ReportsSpace("c4")) // sent last
			o, gerr := st.Get(cm("c4", 19))
			if gerr != nil || !json.Valid(o.Data) {
				during = append(during, fmt.Sprint(gerr))
			}
		}
		return err
	}
	if err := follower.sendAll(send); err != nil {
		t.Fatal(err)
	}
	if len(during) > 0 {
		t.Fatalf("while the second session sent everything, c4's reports were missing: %v", during)
	}
	same("after the second session", "two")

	// Deltas of the session, and of a session the leader does not know.
	delta := reportBatch{Replica: follower.self, Session: "s2", Deletes: []store.Key{cm("c0", 0)}}
	if err := leader.deliver(ctx, mustJSONBytes(t, delta)); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Store(layout.ReportsSpace("c0")).Get(cm("c0", 0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted key is still mirrored: %v", err)
	}
	delta.Session = "s0"
	if err := leader.deliver(ctx, mustJSONBytes(t, delta)); !errors.Is(err, errUnknownSession) {
		t.Fatalf("a batch of an unknown session: %v, want errUnknownSession", err)
	}

	// A new term drops the mirrors: the follower's children are not at
	// hand until it sends everything again, and reported state waits
	// (ready: the hold over the children as the placement controller
	// lists them).
	ready := func() bool {
		var children []summary.Child
		for c := range 10 {
			space := layout.ReportsSpace(fmt.Sprintf("c%d", c))
			children = append(children, summary.Child{Space: space, Reports: leader.Store(space)})
		}
		return leader.hold.Ready(children)
	}
	leader.beginTerm()
	if leader.Store(layout.ReportsSpace("c0")) != nil || ready() {
		t.Fatal("after a new term, the follower's old copy still serves")
	}
	// c9 links to the follower: its reports are read there from now on
	// (a new version of its link record).
	rec, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": layout.DownsyncSpace + ".c9"}, "replica": "root-1", "connected": true})
	if _, err := hard.Update(ctx, session.LinkKey(layout.DownsyncSpace, "c9"), rec, 0); err != nil {
		t.Fatal(err)
	}
	if leader.Store(layout.ReportsSpace("c9")) != nil {
		t.Fatal("c9 moved to the follower, but the leader still reads its own store for it")
	}
	put(follower.local, cm("c9", 0), "moved") // the follower's Collector, as c9 reports there
	for c := range 10 {
		child := fmt.Sprintf("c%d", c)
		st := map[bool]*reportSet{true: follower, false: leader}[c < 5 || c == 9].local // c9 reports to the follower now
		put(st, layout.UpsyncCursor(layout.ReportsSpace(child)), "cursor")
	}
	sess = "s3"
	send = inner
	if err := follower.sendAll(send); err != nil {
		t.Fatal(err)
	}
	if in, err := tree.Collected(leader.Store(layout.ReportsSpace("c0")), layout.ReportsSpace("c0")); err != nil || !in || !ready() {
		t.Fatalf("after the follower sent everything again: collected %v (%v), ready %v", in, err, ready())
	}
}

func mustJSONBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putLink writes child's link record in hard, naming replica as the one
// it is linked to.
func putLink(tb testing.TB, hard *store.Store, child, replica string) {
	tb.Helper()
	rec, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": layout.DownsyncSpace + "." + child}, "replica": replica, "connected": true})
	if _, err := hard.Create(context.Background(), session.LinkKey(layout.DownsyncSpace, child), rec); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkReportSetStore measures the leader's look-up of where a child's
// reports are (reportSet.Store: the child's link record, then its
// replica's store), which the placement controller makes for every child
// at every flush of reported state: children=N is one flush's worth, half
// of the children linked to a follower, whose mirror the leader holds.
//
//	go test ./relay/server -run '^$' -bench ReportSetStore -benchmem
func BenchmarkReportSetStore(b *testing.B) {
	for _, children := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("children=%d", children), func(b *testing.B) {
			hard := store.New(store.Options{})
			hard.SetLog(store.NewMemLog(hard))
			b.Cleanup(hard.Close)
			leader := newReportSet("root-0", hard, true, quiet)
			b.Cleanup(leader.close)
			mirrored := newReportStore()
			leader.mirrors["root-1"] = &mirror{session: "s1", st: mirrored}
			spaces := make([]string, children)
			for c := range children {
				child := fmt.Sprintf("c%05d", c)
				spaces[c] = layout.ReportsSpace(child)
				putLink(b, hard, child, map[bool]string{true: "root-1", false: "root-0"}[c%2 == 0])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for c, sp := range spaces {
					want := leader.local
					if c%2 == 0 {
						want = mirrored
					}
					if leader.Store(sp) != want {
						b.Fatalf("%s: not the store of the replica its link names", sp)
					}
				}
			}
		})
	}
}
