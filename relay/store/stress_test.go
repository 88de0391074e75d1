package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestConcurrentStress runs writers, readers, watchers and snapshots at
// once. Each watcher must see events in revision order, and replaying them
// must rebuild exactly the state it watches.
func TestConcurrentStress(t *testing.T) {
	writers, txns := 8, 150
	if testing.Short() {
		txns = 30
	}
	s := newStore(t, Options{BookmarkInterval: 2 * time.Millisecond, WatcherQueue: writers * txns * 3})
	ctx := context.Background()
	spaces := []string{"s1", "s2"}
	var keys []Key
	for _, sp := range spaces {
		for _, res := range []Resource{pods, deploys} {
			for i := range 10 {
				keys = append(keys, key(sp, res, fmt.Sprint("ns", i%2), fmt.Sprint("o", i)))
			}
		}
	}

	scopes := []WatchOptions{
		{},
		{Space: "s1"},
		{Space: "s2", Resource: pods},
		{Resource: deploys, Namespace: "ns1"},
	}
	watchers := make([]Watcher, len(scopes))
	for i, o := range scopes {
		o.Bookmarks = true
		watchers[i] = mustWatch(t, s, o)
	}

	var wg sync.WaitGroup
	// Readers run once per new revision until the writers are done.
	stopped, stop := context.WithCancel(ctx)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range txns {
				var ops []Op
				for _, i := range rng.Perm(len(keys))[:1+rng.IntN(3)] {
					op := Op{Type: OpType(1 + rng.IntN(3)), Key: keys[i]}
					if op.Type != OpDelete {
						op.Data = body("u", map[string]string{"w": fmt.Sprint(w)}, rng.Int())
					}
					ops = append(ops, op)
				}
				if _, err := s.Txn(ctx, ops...); err != nil &&
					!errors.Is(err, ErrExists) && !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
			}
		})
	}

	var readers sync.WaitGroup
	// Two listers: their first pages retain states concurrently.
	for range 2 {
		readers.Go(func() { listPages(stopped, t, s, spaces) })
	}
	readers.Go(func() { // snapshots are written out while writes go on
		for rev := int64(1); s.WaitForRevision(stopped, rev) == nil; rev = s.Revision() + 1 {
			snap, err := s.Snapshot()
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := snap.WriteTo(io.Discard); err != nil {
				t.Error(err)
			}
			snap.Release()
		}
	})
	readers.Go(func() { // short-lived watchers come and go
		for rev := int64(1); s.WaitForRevision(stopped, rev) == nil; rev = s.Revision() + 1 {
			w, err := s.Watch(ctx, WatchOptions{Space: "s1", Since: rev - 1})
			if err != nil {
				t.Error(err)
				return
			}
			w.Stop()
		}
	})

	wg.Wait()
	stop()
	readers.Wait()
	if t.Failed() {
		return
	}

	final := s.Revision()
	for i, w := range watchers {
		state := map[Key]*Object{}
		last := int64(0)
		for _, ev := range collect(t, w, final) {
			if ev.Revision < last {
				t.Fatalf("watcher %d: event at %d after %d", i, ev.Revision, last)
			}
			last = ev.Revision
			if ev.Type == Deleted {
				delete(state, ev.Object.Key)
			} else {
				state[ev.Object.Key] = ev.Object
			}
		}
		var want []string
		for _, sp := range spaces {
			o := scopes[i]
			if o.Space != "" && o.Space != sp {
				continue
			}
			res, err := s.List(ListOptions{Space: sp, Resource: o.Resource, Namespace: o.Namespace})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, keysOf(res.Items)...)
			for _, o := range res.Items {
				if state[o.Key] != o {
					t.Fatalf("watcher %d: %s replays to %+v, stored %+v", i, o.Key, state[o.Key], o)
				}
			}
		}
		var got []string
		for k := range state {
			got = append(got, k.String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("watcher %d: replayed keys %v, stored %v", i, got, want)
		}
	}
}

// listPages pages through each space, once per new revision until stopped:
// every page of a list carries its first page's revision, and the pages
// are ordered and hold no version newer than it.
func listPages(stopped context.Context, t *testing.T, s *Store, spaces []string) {
	for rev := int64(1); s.WaitForRevision(stopped, rev) == nil; rev = s.Revision() + 1 {
		for _, sp := range spaces {
			opts := ListOptions{Space: sp, Limit: 7}
			var items []*Object
			first := int64(0)
			for {
				res, err := s.List(opts)
				if err != nil {
					t.Error(err)
					return
				}
				if first == 0 {
					first = res.Revision
				} else if res.Revision != first {
					t.Errorf("page at %d of a list at %d", res.Revision, first)
				}
				items = append(items, res.Items...)
				if res.Continue == "" {
					break
				}
				opts.After = res.Continue
			}
			for i, o := range items {
				if o.Revision > first {
					t.Errorf("listed %s at %d in a list at %d", o.Key, o.Revision, first)
				}
				if i > 0 && compareKeys(items[i-1].Key, o.Key) >= 0 {
					t.Errorf("list out of order: %s before %s", items[i-1].Key, o.Key)
				}
			}
		}
	}
}

// compareKeys orders keys as List does within a space.
func compareKeys(a, b Key) int {
	return cmp.Or(compareResource(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
