package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

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
// The destinations=D cases place on D SyncTargets: what an update of a
// placed object costs as the fleet grows.
//
//	go test ./topology/placement -run '^$' -bench Update -benchmem
func BenchmarkUpdate(b *testing.B) {
	for _, d := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("objects=1000/destinations=%d/update=placed", d), func(b *testing.B) {
			benchUpdate(b, 1000, d, true, true, true)
		})
	}
	for _, n := range []int{1000, 10000} {
		for _, tc := range []struct{ name, placement, update string }{
			{"controller=off", "none", "other"},
			{"placement=none", "none", "other"},
			{"placement=one/update=other", "one", "other"},
			{"placement=one/update=placed", "one", "placed"},
		} {
			b.Run(fmt.Sprintf("objects=%d/%s", n, tc.name), func(b *testing.B) {
				benchUpdate(b, n, 1, tc.placement == "one", tc.update == "placed", tc.name != "controller=off")
			})
		}
	}
}

func benchUpdate(b *testing.B, n, destinations int, withPlacement, updatePlaced, controller bool) {
	ctx := context.Background()
	f := newStoreFixture(b)
	st := f.st
	cmRes := store.Resource{Resource: "configmaps"}
	f.namespace(ws, "app")
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
		f.put(store.Key{Space: ws, Resource: cmRes, Namespace: "app", Name: cmName(i)}, cmData(cmName(i), i < placedObjects, 0))
	}
	if withPlacement {
		for i := range destinations {
			f.target(fmt.Sprintf("s%05d", i), map[string]string{"env": "prod"})
		}
		f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
		f.placement(ws, "p1", map[string]string{"tier": "prod"}, map[string]any{"resources": []any{"configmaps"},
			"labelSelectors": []any{map[string]any{"matchLabels": map[string]any{"placed": "yes"}}}})
	}
	d := newDriver(f, controller)
	c := d.c
	if controller {
		d.settle()
		if withPlacement {
			if got := len(c.last.placed[placementRefForBench]); got != placedObjects {
				b.Fatalf("the placement places %d objects, want %d", got, placedObjects)
			}
			if got := len(c.last.matched[placementRefForBench]); got != destinations {
				b.Fatalf("the placement matches %d destinations, want %d", got, destinations)
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
		if d.catchUp(controller) {
			d.settle()
		}
	}
}

var placementRefForBench = scheduler.PlacementRef{Space: ws, Name: "p1"}
