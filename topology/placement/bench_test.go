package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/canopy-dev/canopy/relay/kubeapi"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/scheduler"
)

// placedObjects is how many ConfigMaps the placement of the "one" cases
// selects (by label).
const placedObjects = 5

// BenchmarkUpdate measures what one ConfigMap update costs the placement
// controller in a space of n ConfigMaps: the store write, then the
// controller's work as its loop does it (observe each event, flush while
// there is work), until it is quiescent. placement=none: the space has
// no EdgePlacement (the kube API load of make bench); placement=one: one
// placement selects placedObjects of the ConfigMaps, and the update is
// to another (update=other) or to one it places (update=placed).
// controller=off is the store write and watch delivery alone: the floor.
//
//	go test ./topology/placement -run '^$' -bench Update -benchmem
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, tc := range []struct{ name, placement, update string }{
			{"controller=off", "none", "other"},
			{"placement=none", "none", "other"},
			{"placement=one/update=other", "one", "other"},
			{"placement=one/update=placed", "one", "placed"},
		} {
			b.Run(fmt.Sprintf("objects=%d/%s", n, tc.name), func(b *testing.B) {
				benchUpdate(b, n, tc.placement == "one", tc.update == "placed", tc.name != "controller=off")
			})
		}
	}
}

func benchUpdate(b *testing.B, n int, withPlacement, updatePlaced, controller bool) {
	ctx := context.Background()
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	b.Cleanup(st.Close)
	put := func(k store.Key, obj map[string]any) {
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		md["name"], md["uid"], md["generation"] = k.Name, "uid-"+k.Space+"-"+k.Name, 1
		if k.Namespace != "" {
			md["namespace"] = k.Namespace
		}
		data, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Create(ctx, k, data); err != nil {
			b.Fatal(err)
		}
	}
	for name, kind := range map[string]string{ws: kubeapi.SpaceKindWDS, inv: kubeapi.SpaceKindInventory, down: kubeapi.SpaceKindDownsync} {
		put(store.Key{Resource: kubeapi.SpaceResource, Name: name}, map[string]any{"spec": map[string]any{"kind": kind}})
	}
	cmRes := store.Resource{Resource: "configmaps"}
	put(store.Key{Space: ws, Resource: namespacesRes, Name: "app"}, map[string]any{"apiVersion": "v1", "kind": "Namespace"})
	cmData := func(name string, placed bool, v int) map[string]any {
		var labels map[string]any
		if placed {
			labels = map[string]any{"placed": "yes"}
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"labels": labels}, "data": map[string]any{"k": name, "v": fmt.Sprint(v)}}
	}
	cmName := func(i int) string { return fmt.Sprintf("cm-%05d", i) }
	for i := range n {
		put(store.Key{Space: ws, Resource: cmRes, Namespace: "app", Name: cmName(i)}, cmData(cmName(i), i < placedObjects, 0))
	}
	if withPlacement {
		put(store.Key{Space: inv, Resource: syncTargetsRes, Name: "s1"}, map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget", "metadata": map[string]any{"labels": map[string]any{"env": "prod"}}})
		put(store.Key{Space: inv, Resource: locationsRes, Name: "prod"}, map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location", "metadata": map[string]any{"labels": map[string]any{"tier": "prod"}},
			"spec": map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}})
		put(store.Key{Space: ws, Resource: placementsRes, Name: "p1"}, map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"spec": map[string]any{
				"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
				"downsync": []any{map[string]any{"resources": []any{"configmaps"},
					"labelSelectors": []any{map[string]any{"matchLabels": map[string]any{"placed": "yes"}}}}},
			}})
	}

	c := New(Config{Store: st, Inventory: inv, Downsync: down})
	rev := st.Revision()
	if err := c.load(); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := st.Watch(wctx, store.WatchOptions{Since: rev})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	seen := rev
	// settle runs the controller as its loop does until it has caught up
	// with the store and has nothing left to flush.
	settle := func() {
		for work := true; work; {
			if err := c.flush(ctx); err != nil {
				b.Fatal(err)
			}
			work = false
			for target := st.Revision(); seen < target; {
				ev := <-w.Events()
				seen = max(seen, ev.Revision)
				work = c.observe(ev) || work
			}
		}
	}
	if controller {
		settle()
		if withPlacement {
			if got := len(c.last.placed[placementRefForBench]); got != placedObjects {
				b.Fatalf("the placement places %d objects, want %d", got, placedObjects)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := placedObjects + i%(n-placedObjects)
		if updatePlaced {
			j = i % placedObjects
		}
		k := store.Key{Space: ws, Resource: cmRes, Namespace: "app", Name: cmName(j)}
		obj := cmData(cmName(j), j < placedObjects, i+1)
		obj["metadata"].(map[string]any)["name"] = k.Name
		obj["metadata"].(map[string]any)["namespace"] = k.Namespace
		data, _ := json.Marshal(obj)
		if _, err := st.Update(ctx, k, data, 0); err != nil {
			b.Fatal(err)
		}
		if !controller {
			for target := st.Revision(); seen < target; {
				ev := <-w.Events()
				seen = max(seen, ev.Revision)
			}
			continue
		}
		work := false
		for target := st.Revision(); seen < target; {
			ev := <-w.Events()
			seen = max(seen, ev.Revision)
			work = c.observe(ev) || work
		}
		if work {
			settle()
		}
	}
}

var placementRefForBench = scheduler.PlacementRef{Space: ws, Name: "p1"}
