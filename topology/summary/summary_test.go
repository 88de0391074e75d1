package summary

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

var ref = reports.PlacementRef{Space: "default", Name: "p"}

// newMemStore returns an empty store on a log that keeps nothing.
func newMemStore(t *testing.T) *store.Store {
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	return st
}

// put creates or replaces the object at k.
func put(t *testing.T, st *store.Store, k store.Key, data []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Get(k); err == nil {
		if _, err := st.Update(ctx, k, data, 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := st.Create(ctx, k, data); err != nil {
		t.Fatal(err)
	}
}

// reportSync writes, into child's reports space of st, that dests
// destinations applied placement p.
func reportSync(t *testing.T, st *store.Store, child string, dests int64) {
	t.Helper()
	s := reports.PlacementSync{Placement: ref, Destinations: dests, Revisions: map[string]int64{"7": dests}}
	data, err := reports.Encode(reports.KindPlacementSync, s.Key().Name, s)
	if err != nil {
		t.Fatal(err)
	}
	k := s.Key()
	k.Space = layout.ReportsSpace(child)
	put(t, st, k, data)
}

// reportForwarded writes, into child's reports space, the live state of
// configmap app/a at dest, with value v.
func reportForwarded(t *testing.T, st *store.Store, child, dest, v string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "a", "namespace": "app",
		"annotations": map[string]any{v1alpha1.DestinationAnnotation: dest}}, "data": map[string]any{"v": v}})
	put(t, st, store.Key{Space: layout.ReportsSpace(child), Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}, data)
}

// collected writes the Collector's cursor of child's reports space.
func collected(t *testing.T, st *store.Store, child string) {
	t.Helper()
	put(t, st, layout.UpsyncCursor(layout.ReportsSpace(child)), []byte(`{"metadata":{"name":"cursor"},"revision":1}`))
}

// sinkFunc is a Sink.
type sinkFunc func(context.Context, reports.Merged) error

func (f sinkFunc) Write(ctx context.Context, m reports.Merged) error { return f(ctx, m) }

func synced(m reports.Merged) int64 {
	var n int64
	for _, s := range m.Syncs {
		n += s.Destinations
	}
	return n
}

// Flush merges the children listed, in their order, but for those left
// out and those whose reports are not at hand; it calls written once the
// Sink took the merge, and not when the Sink failed.
func TestFlushMergesTheChildrenThatCount(t *testing.T) {
	rs := newMemStore(t)
	reportSync(t, rs, "c1", 2)
	reportForwarded(t, rs, "c1", "d1", "from c1")
	reportSync(t, rs, "c2", 5) // left out
	reportSync(t, rs, "c4", 1)
	reportForwarded(t, rs, "c4", "d1", "from c4") // a destination that moved: c1's counts
	children := []Child{
		{Space: layout.ReportsSpace("c1"), Reports: rs},
		{Space: layout.ReportsSpace("c2"), Reports: rs, Out: true},
		{Space: layout.ReportsSpace("c3")},
		{Space: layout.ReportsSpace("c4"), Reports: rs},
	}
	var got reports.Merged
	var sinkErr error
	written := 0
	s := New(Config{
		Children: func() ([]Child, func(), error) { return children, func() { written++ }, nil },
		Placed:   rs, PlacedSpace: layout.InboxSpace,
		Sink: sinkFunc(func(_ context.Context, m reports.Merged) error { got = m; return sinkErr }),
	})
	if ok, err := s.Flush(context.Background()); !ok || err != nil {
		t.Fatalf("Flush = %v, %v", ok, err)
	}
	if synced(got) != 3 || written != 1 {
		t.Fatalf("merged %d destinations (want 3: c1 and c4), written called %d times", synced(got), written)
	}
	if len(got.Forwarded) != 1 {
		t.Fatalf("forwarded %d objects, want 1", len(got.Forwarded))
	}
	for _, o := range got.Forwarded {
		if !json.Valid(o.Data) || !jsonHas(o.Data, "from c1") {
			t.Fatalf("forwarded %s, want c1's (the first child by name)", o.Data)
		}
	}

	sinkErr = errors.New("boom")
	if ok, err := s.Flush(context.Background()); ok || !errors.Is(err, sinkErr) || written != 1 {
		t.Fatalf("Flush with a failing Sink = %v, %v; written called %d times, want once", ok, err, written)
	}

	rs.Close()
	if _, err := s.Flush(context.Background()); !errors.Is(err, ErrReportsMoved) {
		t.Fatalf("Flush over a closed store of reports = %v, want ErrReportsMoved", err)
	}
}

func jsonHas(data []byte, v string) bool {
	var m struct {
		Data map[string]string `json:"data"`
	}
	_ = json.Unmarshal(data, &m)
	return m.Data["v"] == v
}

// A Hold waits for every child listed, those left out too, until each
// has reported again; then it stays ready until Reset. A child whose
// reports are not at hand is waited for; a Hold whose grace has passed
// waits for none; a nil Hold holds nothing.
func TestHold(t *testing.T) {
	rs := newMemStore(t)
	children := []Child{{Space: layout.ReportsSpace("a"), Reports: rs}, {Space: layout.ReportsSpace("b"), Reports: rs, Out: true}}
	h := NewHold(time.Hour)
	if h.Ready(children) || !h.Holding() {
		t.Fatal("ready before any child reported")
	}
	collected(t, rs, "a")
	if h.Ready(children) {
		t.Fatal("ready before b reported")
	}
	collected(t, rs, "b")
	if !h.Ready(children) || h.Holding() {
		t.Fatal("not ready once every child reported")
	}
	if !h.Ready(append(children, Child{Space: layout.ReportsSpace("c")})) {
		t.Fatal("ready is not latched")
	}
	h.Reset()
	if h.Ready(append(children, Child{Space: layout.ReportsSpace("c")})) || !h.Holding() {
		t.Fatal("ready after Reset, with c's reports not at hand")
	}
	if !h.Ready(children) {
		t.Fatal("not ready after Reset with every child reported")
	}

	if !NewHold(time.Hour).Ready(append(children, Child{Space: layout.LinksSpace, Reports: rs, Own: true})) {
		t.Fatal("a Hold waits for the tier's own reports")
	}
	if !NewHold(0).Ready([]Child{{Space: layout.ReportsSpace("never"), Reports: rs}}) {
		t.Fatal("a Hold whose grace has passed still waits")
	}
	var none *Hold
	if !none.Ready([]Child{{Space: layout.ReportsSpace("x")}}) || none.Holding() {
		t.Fatal("a nil Hold holds")
	}
}

// Outbox writes what differs: a changed report is updated, an unchanged
// one keeps its revision, one no longer merged is deleted.
func TestOutboxWritesWhatDiffers(t *testing.T) {
	rs, st := newMemStore(t), newMemStore(t)
	ctx := context.Background()
	merge := func() reports.Merged {
		var lists [][]*store.Object
		for _, c := range []string{"c1", "c2"} {
			lr, _ := rs.List(store.ListOptions{Space: layout.ReportsSpace(c)})
			lists = append(lists, lr.Items)
		}
		return reports.Merge(lists, nil)
	}
	out := &Outbox{Store: st, Space: layout.OutboxSpace}
	list := func() map[string]int64 {
		lr, err := st.List(store.ListOptions{Space: layout.OutboxSpace})
		if err != nil {
			t.Fatal(err)
		}
		revs := map[string]int64{}
		for _, o := range lr.Items {
			revs[o.Key.Resource.Resource+"/"+o.Key.Name] = o.Revision
		}
		return revs
	}
	reportSync(t, rs, "c1", 2)
	reportForwarded(t, rs, "c2", "d9", "one")
	if err := out.Write(ctx, merge()); err != nil {
		t.Fatal(err)
	}
	first := list()
	if len(first) != 2 {
		t.Fatalf("outbox %v, want a placement sync and a forwarded object", first)
	}
	reportForwarded(t, rs, "c2", "d9", "two")
	if err := out.Write(ctx, merge()); err != nil {
		t.Fatal(err)
	}
	second := list()
	for k, rev := range first {
		switch {
		case k == "configmaps/a" && second[k] == rev:
			t.Fatalf("%s was not rewritten", k)
		case k != "configmaps/a" && second[k] != rev:
			t.Fatalf("%s was rewritten although unchanged (revision %d, then %d)", k, rev, second[k])
		}
	}
	if _, err := rs.Delete(ctx, store.Key{Space: layout.ReportsSpace("c2"), Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := out.Write(ctx, merge()); err != nil {
		t.Fatal(err)
	}
	if third := list(); len(third) != 1 || third["configmaps/a"] != 0 {
		t.Fatalf("outbox %v, want only the placement sync", third)
	}
}

// Run holds the merge until the children have reported again, then merges
// after each burst of reports and after each change of who counts.
func TestRun(t *testing.T) {
	rs := newMemStore(t)
	var mu sync.Mutex
	counted := []string{"c1"}
	changed := make(chan struct{})
	type write struct {
		synced    int64
		collected bool
	}
	writes := make(chan write, 16)
	s := New(Config{
		Children: func() ([]Child, func(), error) {
			mu.Lock()
			defer mu.Unlock()
			var out []Child
			for _, c := range counted {
				out = append(out, Child{Space: layout.ReportsSpace(c), Reports: rs})
			}
			return out, nil, nil
		},
		Placed: rs, PlacedSpace: layout.InboxSpace,
		Sink: sinkFunc(func(_ context.Context, m reports.Merged) error {
			_, err := rs.Get(layout.UpsyncCursor(layout.ReportsSpace("c1")))
			writes <- write{synced(m), err == nil}
			return nil
		}),
		Hold:    NewHold(time.Hour),
		Reports: rs,
		Changed: func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return changed },
		Window:  5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	next := func(what string, want int64) {
		t.Helper()
		for {
			select {
			case w := <-writes:
				if !w.collected {
					t.Fatalf("%s: a merge before c1 reported again", what)
				}
				if w.synced == want {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no merge of %d destinations", what, want)
			}
		}
	}
	reportSync(t, rs, "c1", 2)
	reportSync(t, rs, "c2", 3) // not counted yet
	collected(t, rs, "c1")
	next("c1 reported again", 2)
	reportSync(t, rs, "c1", 4)
	next("c1 reported more", 4)
	mu.Lock()
	counted = append(counted, "c2")
	close(changed)
	changed = make(chan struct{})
	mu.Unlock()
	next("c2 counts", 7)
}
