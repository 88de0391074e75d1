package placement

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// A change of one placed object rewrites that object in the downsync
// space and nothing else; a change of one SyncTarget, its copy alone: not the per-destination copies (SyncTargets,
// Locations), which every destination would otherwise be sent again.
func TestChangeRewritesOnlyItself(t *testing.T) {
	f := newFixture(t)
	const n = 300
	for i := range n {
		f.target(fmt.Sprint("s", i), map[string]string{"env": "prod"})
	}
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "a", nil, nil)
	f.placement(ws, "p1", map[string]string{"tier": "prod"}, cmClause("app"))
	revs := func() map[store.Key]int64 {
		lr, err := f.st.List(store.ListOptions{Space: down})
		if err != nil {
			t.Fatal(err)
		}
		out := map[store.Key]int64{}
		for _, o := range lr.Items {
			out[o.Key] = o.Revision
		}
		return out
	}
	// The ConfigMap, the namespace, the Location, the placement and a
	// SyncTarget per destination.
	poll.Until(t, "the downsync space filled", func() error {
		if got := len(revs()); got < n+4 {
			return fmt.Errorf("%d objects, want %d", got, n+4)
		}
		return nil
	})
	// settled waits until the downsync space has not changed for 300 ms:
	// the bound within which a rewrite would follow the last one.
	settled := func() map[store.Key]int64 {
		last, since := revs(), time.Now()
		poll.Until(t, "the downsync space unchanged for 300 ms", func() error {
			if now := revs(); !maps.Equal(now, last) {
				last, since = now, time.Now()
			}
			if quiet := time.Since(since); quiet < 300*time.Millisecond {
				return fmt.Errorf("unchanged for %v", quiet)
			}
			return nil
		})
		return last
	}
	before := settled()
	f.configMap(ws, "app", "a", nil, map[string]string{"v": "2"})
	cm := store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}
	poll.True(t, "the ConfigMap rewritten", func() bool { return revs()[cm] != before[cm] })
	rewritten := func(before map[store.Key]int64) (map[store.Key]int64, []string) {
		now := settled()
		var changed []string
		for k, r := range now {
			if before[k] != r {
				changed = append(changed, k.Resource.Resource+"/"+k.Name)
			}
		}
		return now, changed
	}
	after, changed := rewritten(before)
	if len(changed) != 1 {
		t.Fatalf("%d downsync objects rewritten by one ConfigMap change (of %d): %v", len(changed), len(before), changed[:min(len(changed), 10)])
	}

	// A change of one destination's SyncTarget rewrites its copy, and only
	// that one (the controller skips the copies it knows unchanged).
	f.target("s7", map[string]string{"env": "prod", "zone": "z1"})
	st := store.Key{Space: down, Resource: syncTargetsRes, Name: "s7"}
	poll.True(t, "the copy of s7 rewritten", func() bool { return revs()[st] != after[st] })
	if _, changed = rewritten(after); len(changed) != 1 || changed[0] != "synctargets/s7" {
		t.Fatalf("a SyncTarget's change rewrote %v, want synctargets/s7 alone", changed[:min(len(changed), 10)])
	}
	o, err := f.st.Get(st)
	if err != nil {
		t.Fatal(err)
	}
	if md, _ := jsonMap(o)["metadata"].(map[string]any); md["labels"].(map[string]any)["zone"] != "z1" {
		t.Fatalf("the copy of s7 has labels %v, want zone=z1", md["labels"])
	}
}
