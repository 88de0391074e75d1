package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/canopy-dev/canopy/test/poll"
)

func checkEvent(t *testing.T, ev Event, typ EventType, rev int64, obj, prev *Object) {
	t.Helper()
	if ev.Type != typ || ev.Revision != rev || ev.Object != obj || ev.Prev != prev {
		t.Fatalf("got %s@%d object %p prev %p, want %s@%d object %p prev %p",
			ev.Type, ev.Revision, ev.Object, ev.Prev, typ, rev, obj, prev)
	}
}

func TestWatchFromNow(t *testing.T) {
	s := newStore(t, Options{})
	k := key("ws", pods, "ns", "a")
	mustCreate(t, s, key("ws", pods, "ns", "before"), body("u", nil, 0))
	w := mustWatch(t, s, WatchOptions{Space: "ws", Resource: pods})

	c := mustCreate(t, s, k, body("u", nil, 1))
	u := mustUpdate(t, s, k, body("u", nil, 2))
	d := mustDelete(t, s, k)
	checkEvent(t, next(t, w), Added, c.Revision, c, nil)
	checkEvent(t, next(t, w), Modified, u.Revision, u, c)
	checkEvent(t, next(t, w), Deleted, s.Revision(), u, u)
	if d != u {
		t.Fatalf("delete returned %p, want the last version %p", d, u)
	}
}

func TestWatchTxnEvents(t *testing.T) {
	s := newStore(t, Options{})
	a, b := key("ws", pods, "ns", "a"), key("ws", pods, "ns", "b")
	oa := mustCreate(t, s, a, body("u", nil, 0))
	w := mustWatch(t, s, WatchOptions{Space: "ws"})
	res, err := s.Txn(context.Background(),
		Op{Type: OpCreate, Key: b, Data: body("u", nil, 1)},
		Op{Type: OpDelete, Key: a},
	)
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, next(t, w), Added, res.Revision, res.Objects[0], nil)
	checkEvent(t, next(t, w), Deleted, res.Revision, oa, oa)
}

func TestWatchFromHistory(t *testing.T) {
	s := newStore(t, Options{})
	var objs []*Object
	for i := range 5 {
		objs = append(objs, mustCreate(t, s, key("ws", pods, "ns", fmt.Sprint(i)), body("u", nil, i)))
	}
	w := mustWatch(t, s, WatchOptions{Space: "ws", Since: objs[1].Revision})
	for _, o := range objs[2:] {
		checkEvent(t, next(t, w), Added, o.Revision, o, nil)
	}
	live := mustCreate(t, s, key("ws", pods, "ns", "live"), body("u", nil, 0))
	checkEvent(t, next(t, w), Added, live.Revision, live, nil)

	// Since in the future: nothing until after Since.
	future := mustWatch(t, s, WatchOptions{Space: "ws", Since: s.Revision() + 1})
	mustCreate(t, s, key("ws", pods, "ns", "skipped"), body("u", nil, 0))
	after := mustCreate(t, s, key("ws", pods, "ns", "after"), body("u", nil, 0))
	checkEvent(t, next(t, future), Added, after.Revision, after, nil)
}

func TestWatchExpired(t *testing.T) {
	s := newStore(t, Options{HistorySize: 4})
	ctx := context.Background()
	for i := range 3 {
		mustCreate(t, s, key("ws", pods, "ns", fmt.Sprint(i)), body("u", nil, i))
	}
	// A txn of three events at revision 4 pushes out revisions 1 and 2.
	res, err := s.Txn(ctx,
		Op{Type: OpCreate, Key: key("ws", pods, "ns", "x"), Data: body("u", nil, 0)},
		Op{Type: OpCreate, Key: key("ws", pods, "ns", "y"), Data: body("u", nil, 0)},
		Op{Type: OpCreate, Key: key("ws", pods, "ns", "z"), Data: body("u", nil, 0)},
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().OldestRevision; got != 2 {
		t.Fatalf("oldest revision %d, want 2", got)
	}
	if _, err := s.Watch(ctx, WatchOptions{Since: 1}); !errors.Is(err, ErrExpired) {
		t.Fatalf("Since 1: %v", err)
	}
	w := mustWatch(t, s, WatchOptions{Since: 2})
	if ev := next(t, w); ev.Revision != 3 {
		t.Fatalf("first event at %d, want 3", ev.Revision)
	}
	for _, o := range res.Objects {
		checkEvent(t, next(t, w), Added, res.Revision, o, nil)
	}

	// Two more events drop revision 3 and the first event of revision 4:
	// only Since >= 4 is served from now on.
	mustCreate(t, s, key("ws", pods, "ns", "5"), body("u", nil, 0))
	mustCreate(t, s, key("ws", pods, "ns", "6"), body("u", nil, 0))
	if _, err := s.Watch(ctx, WatchOptions{Since: 3}); !errors.Is(err, ErrExpired) {
		t.Fatalf("Since 3 after rollover: %v", err)
	}
	mustWatch(t, s, WatchOptions{Since: 4})
}

func TestWatchSelectionChanges(t *testing.T) {
	web := labels.Set{"app": "web"}
	db := labels.Set{"app": "db"}
	s := newStore(t, Options{})
	w := mustWatch(t, s, WatchOptions{Space: "ws", Label: labels.SelectorFromSet(web)})
	k := key("ws", pods, "ns", "a")

	mustCreate(t, s, k, body("u", db, 0))           // out: nothing
	in := mustUpdate(t, s, k, body("u", web, 1))    // enters: Added
	still := mustUpdate(t, s, k, body("u", web, 2)) // stays: Modified
	out := mustUpdate(t, s, k, body("u", db, 3))    // leaves: Deleted
	mustUpdate(t, s, k, body("u", db, 4))           // out: nothing
	mustDelete(t, s, k)                             // out: nothing
	marker := mustCreate(t, s, key("ws", pods, "ns", "m"), body("u", web, 0))

	checkEvent(t, next(t, w), Added, in.Revision, in, nil)
	checkEvent(t, next(t, w), Modified, still.Revision, still, in)
	checkEvent(t, next(t, w), Deleted, out.Revision, out, still)
	checkEvent(t, next(t, w), Added, marker.Revision, marker, nil)
}

func TestWatchScopes(t *testing.T) {
	s := newStore(t, Options{BookmarkInterval: 5 * time.Millisecond, Fields: nodeFields})
	writes := []Key{
		key("", pods, "", "sys"),
		key("ws", pods, "ns1", "a"),
		key("ws", pods, "ns2", "a"),
		key("ws", deploys, "ns1", "a"),
		key("ws", Resource{Group: "x", Resource: "pods"}, "ns1", "a"),
		key("other", pods, "ns1", "a"),
	}
	for _, tc := range []struct {
		name string
		opts WatchOptions
		want []int // indexes into writes
	}{
		{"every space", WatchOptions{}, []int{0, 1, 2, 3, 4, 5}},
		{"space", WatchOptions{Space: "ws"}, []int{1, 2, 3, 4}},
		{"space and resource", WatchOptions{Space: "ws", Resource: pods}, []int{1, 2}},
		{"resource in every space", WatchOptions{Resource: pods}, []int{0, 1, 2, 5}},
		{"namespace", WatchOptions{Space: "ws", Namespace: "ns1"}, []int{1, 3, 4}},
		{"namespace in every space", WatchOptions{Resource: pods, Namespace: "ns1"}, []int{1, 5}},
		{"field", WatchOptions{Field: fields.OneTermEqualSelector("metadata.namespace", "ns2")}, []int{2}},
		{"custom field", WatchOptions{Field: fields.OneTermEqualSelector("spec.node", "na")}, []int{1, 2, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Bookmarks = true
			w := mustWatch(t, s, opts)
			from := s.Revision()
			for _, k := range writes {
				mustCreate(t, s, k, body("u", nil, map[string]any{"node": "n" + k.Name}))
			}
			var got []int
			for _, ev := range collect(t, w, s.Revision()) {
				got = append(got, int(ev.Revision-from-1))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got writes %v, want %v", got, tc.want)
			}
			for _, k := range writes {
				mustDelete(t, s, k)
			}
		})
	}
}

func TestWatchBookmarks(t *testing.T) {
	s := newStore(t, Options{BookmarkInterval: 5 * time.Millisecond})
	first := mustCreate(t, s, key("ws", pods, "busy", "first"), body("u", nil, 0))
	quiet := mustWatch(t, s, WatchOptions{Space: "ws", Namespace: "quiet", Bookmarks: true})
	plain := mustWatch(t, s, WatchOptions{Space: "ws"})

	// An idle watcher gets bookmarks at the revision it is at.
	if ev := next(t, quiet); ev.Type != Bookmark || ev.Revision != first.Revision || ev.Object != nil {
		t.Fatalf("first event %+v, want a bookmark at %d", ev, first.Revision)
	}
	// Changes it does not select move its bookmarks forward.
	last := mustCreate(t, s, key("ws", pods, "busy", "a"), body("u", nil, 0))
	for {
		ev := next(t, quiet)
		if ev.Type != Bookmark {
			t.Fatalf("unexpected %s", ev.Type)
		}
		if ev.Revision == last.Revision {
			break
		}
	}
	// A watcher that did not ask gets none.
	if ev := next(t, plain); ev.Type != Added || ev.Object != last {
		t.Fatalf("plain watcher got %+v", ev)
	}

	// Bookmarks after a replay report at least the revision replayed to.
	replay := mustWatch(t, s, WatchOptions{Space: "ws", Since: last.Revision - 1, Bookmarks: true})
	checkEvent(t, next(t, replay), Added, last.Revision, last, nil)
	if ev := next(t, replay); ev.Type != Bookmark || ev.Revision != last.Revision {
		t.Fatalf("after replay: %+v", ev)
	}

	// The ticker stops with its last bookmark watcher and restarts with
	// the next one.
	quiet.Stop()
	replay.Stop()
	poll.True(t, "the bookmark ticker to stop", func() bool {
		s.fanMu.Lock()
		defer s.fanMu.Unlock()
		return !s.ticking
	})
	again := mustWatch(t, s, WatchOptions{Bookmarks: true})
	if ev := next(t, again); ev.Type != Bookmark {
		t.Fatalf("got %+v, want a bookmark", ev)
	}
}

func TestWatchTooSlow(t *testing.T) {
	const queue, writes = 8, 100
	s := newStore(t, Options{WatcherQueue: queue})
	slow := mustWatch(t, s, WatchOptions{Space: "ws"}) // never read while writing
	fast := mustWatch(t, s, WatchOptions{Space: "ws"})

	// Apply never waits for the slow watcher: all writes complete, and a
	// watcher that keeps up gets every event.
	for i := range writes {
		o := mustCreate(t, s, key("ws", pods, "ns", fmt.Sprint(i)), body("u", nil, i))
		checkEvent(t, next(t, fast), Added, o.Revision, o, nil)
	}
	if err := ended(t, slow); !errors.Is(err, ErrTooSlow) {
		t.Fatalf("slow watcher: %v", err)
	}
	if n := s.Stats().Watchers; n != 1 {
		t.Fatalf("%d watchers registered, want 1", n)
	}
}

func TestWatchStop(t *testing.T) {
	s := newStore(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	byCtx, err := s.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byStop := mustWatch(t, s, WatchOptions{})
	// Pending events do not keep a stopped watcher open.
	mustCreate(t, s, key("ws", pods, "ns", "a"), body("u", nil, 0))

	byStop.Stop()
	byStop.Stop()
	cancel()
	for name, w := range map[string]Watcher{"Stop": byStop, "context": byCtx} {
		if err := ended(t, w); err != nil {
			t.Errorf("ended by %s: Err() = %v, want nil", name, err)
		}
	}
	poll.True(t, "watchers to unregister", func() bool { return s.Stats().Watchers == 0 })

	if _, err := s.Watch(ctx, WatchOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a done context: %v", err)
	}
}

// A watch with a Func hands it the events, history first, in order, and
// closes Events, and calls Ended, only once the watch has ended and Func
// has returned.
func TestWatchFunc(t *testing.T) {
	s := newStore(t, Options{})
	a, b := key("ws", pods, "ns", "a"), key("ws", pods, "ns", "b")
	mustCreate(t, s, key("ws", pods, "ns", "before"), body("u", nil, 0))
	ca := mustCreate(t, s, a, body("u", nil, 1))
	got := make(chan Event, 10)
	release := make(chan struct{})
	endedc := make(chan error, 2)
	w := mustWatch(t, s, WatchOptions{Space: "ws", Since: ca.Revision - 1, Func: func(ev Event) {
		got <- ev
		if ev.Object != nil && ev.Object.Key == b {
			<-release // the consumer is busy with b
		}
	}, Ended: func(err error) { endedc <- err }})
	cb := mustCreate(t, s, b, body("u", nil, 1))
	ua := mustUpdate(t, s, a, body("u", nil, 2))
	checkEvent(t, <-got, Added, ca.Revision, ca, nil)
	checkEvent(t, <-got, Added, cb.Revision, cb, nil)
	w.Stop()
	select {
	case _, ok := <-w.Events():
		t.Fatalf("Events closed (%v) while Func runs", ok)
	case err := <-endedc:
		t.Fatalf("Ended (%v) while Func runs", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if _, ok := <-w.Events(); ok {
		t.Fatal("an event on Events of a Func watch")
	}
	select {
	case ev := <-got:
		if ev.Object != ua {
			t.Errorf("after Stop, Func got %s %v", ev.Type, ev.Object.Key)
		}
	default: // Stop came first: a's update is not handed over
	}
	if err := w.Err(); err != nil {
		t.Errorf("Err() = %v after Stop", err)
	}
	if err := <-endedc; err != nil {
		t.Errorf("Ended(%v) after Stop", err)
	}
	// A watch that falls behind ends with ErrTooSlow, and says so.
	slow := newStore(t, Options{WatcherQueue: 2})
	stuck := make(chan struct{})
	mustWatch(t, slow, WatchOptions{Func: func(Event) { <-stuck }, Ended: func(err error) { endedc <- err }})
	for i := range 5 {
		mustCreate(t, slow, key("ws", pods, "ns", fmt.Sprint(i)), body("u", nil, i))
	}
	close(stuck)
	if err := <-endedc; !errors.Is(err, ErrTooSlow) {
		t.Errorf("Ended(%v), want ErrTooSlow", err)
	}
}

// TestWatchAlso: single keys outside the selection are delivered too, in
// revision order, each once, from history and live, and stop with the
// watcher.
func TestWatchAlso(t *testing.T) {
	s := newStore(t, Options{})
	rec := key("", Resource{"canopy.dev", "routes"}, "", "child-a")
	other := key("", Resource{"canopy.dev", "routes"}, "", "child-b")
	in := key("ws", pods, "ns", "x")
	mustCreate(t, s, key("ws", pods, "ns", "before"), body("u", nil, 0))
	start := s.Revision() // non-zero: replay from here
	r1 := mustCreate(t, s, rec, body("r", nil, 1))
	mustCreate(t, s, other, body("r", nil, 1)) // same registry key, not selected
	o1 := mustCreate(t, s, in, body("u", nil, 1))

	// The second watch sees every space's pods and would meet rec through
	// two registry keys; it must get it once.
	w1 := mustWatch(t, s, WatchOptions{Space: "ws", Since: start, Also: []Key{rec}})
	w2 := mustWatch(t, s, WatchOptions{Space: "", Resource: pods, Since: start, Also: []Key{rec, rec}})
	r2 := mustUpdate(t, s, rec, body("r", nil, 2))
	mustUpdate(t, s, other, body("r", nil, 2))
	o2 := mustUpdate(t, s, in, body("u", nil, 2))
	for _, w := range []Watcher{w1, w2} {
		checkEvent(t, next(t, w), Added, r1.Revision, r1, nil)
		checkEvent(t, next(t, w), Added, o1.Revision, o1, nil)
		checkEvent(t, next(t, w), Modified, r2.Revision, r2, r1)
		checkEvent(t, next(t, w), Modified, o2.Revision, o2, o1)
		w.Stop()
	}
	poll.True(t, "watchers to unregister", func() bool { return s.Stats().Watchers == 0 })

	if _, err := s.Watch(context.Background(), WatchOptions{Space: "ws", Also: []Key{{Space: "x"}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Also with an incomplete key: %v, want ErrInvalid", err)
	}
}

// A watch refused for a revision older than the history is safe while
// writes move the history on (run with -race; a small history, as an
// in-memory child relay keeps, makes this path common).
func TestWatchExpiredDuringWrites(t *testing.T) {
	s := newStore(t, Options{HistorySize: 2})
	k := key("ws", pods, "ns", "a")
	mustCreate(t, s, k, body("u", nil, 0))
	for i := range 3 {
		mustUpdate(t, s, k, body("u", nil, i+1)) // revisions 1 and 2 leave the history
	}
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			if _, err := s.Update(context.Background(), k, body("u", nil, i+4), 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 200 {
		if _, err := s.Watch(context.Background(), WatchOptions{Since: 1}); !errors.Is(err, ErrExpired) {
			t.Fatalf("watch from revision 1: %v, want ErrExpired", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Events arrive in revision order, each once, whichever way they travel:
// replayed from the history, queued for run, or handed over by push to a
// receiver already waiting. The receiver pauses now and then so that the
// three ways mix while writes go on.
func TestWatchOrderUnderHandOff(t *testing.T) {
	for seed := range 4 {
		s := newStore(t, Options{HistorySize: 20000})
		k := key("ws", pods, "ns", "a")
		mustCreate(t, s, k, body("u", nil, 0))
		start := s.Revision()
		for i := range 2000 { // history to replay
			mustUpdate(t, s, k, body("u", nil, i))
		}
		w := mustWatch(t, s, WatchOptions{Space: "ws", Resource: pods, Since: start})
		const writes = 6000
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range writes {
				if _, err := s.Update(context.Background(), k, body("u", nil, i), 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		want := start + 1
		for n := 0; n < 2000+writes; n++ {
			ev := next(t, w)
			if ev.Revision != want {
				t.Fatalf("seed %d: event %d has revision %d, want %d", seed, n, ev.Revision, want)
			}
			want++
			if (n+seed)%97 == 0 {
				time.Sleep(50 * time.Microsecond) // a slow receiver now and then
			}
		}
		<-done
	}
}

// An event is not handed over while run holds an earlier one it took from
// the queue, even to a receiver already waiting: it would overtake it.
func TestWatchHandOffWaitsForRun(t *testing.T) {
	s := newStore(t, Options{})
	k := key("ws", pods, "ns", "a")
	w := mustWatch(t, s, WatchOptions{Space: "ws", Resource: pods})
	ww := w.(*watcher)
	popped, release := make(chan struct{}), make(chan struct{})
	ww.mu.Lock()
	var once sync.Once
	ww.testPopped = func() { once.Do(func() { close(popped); <-release }) }
	ww.mu.Unlock()

	first := mustCreate(t, s, k, body("u", nil, 1)) // nobody receives: queued, and run takes it
	<-popped
	got := make(chan Event, 2)
	go func() {
		for ev := range w.Events() {
			got <- ev
		}
	}()
	time.Sleep(20 * time.Millisecond) // the receiver now waits on Events()
	second := mustUpdate(t, s, k, body("u", nil, 2))
	close(release)
	for _, want := range []*Object{first, second} {
		select {
		case ev := <-got:
			if ev.Object != want {
				t.Fatalf("got the event of revision %d, want %d", ev.Object.Revision, want.Revision)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event of revision %d", want.Revision)
		}
	}
}
