package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
	"github.com/canopy-dev/canopy/topology/status"
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

// BenchmarkReported measures what one report costs the root's placement
// controller: a child's COUNT partial of a placed ConfigMap changes, and
// the controller flushes reported state (it lists every reports-<child>
// space, merges the partials, rewrites the CombinedStatus and the
// placement's status) until it is quiescent. Each child reports one
// partial and one placement sync, whatever the destinations below it,
// as a region does: children=C/destinations=D is a root of C children
// over D destinations. A tree root (10 children) should cost the same
// over 10 and 10 000 destinations; a flat root has a child per
// destination.
//
//	go test ./topology/placement -run '^$' -bench Reported -benchmem
func BenchmarkReported(b *testing.B) {
	for _, tc := range []struct{ children, destinations int }{
		{10, 10}, {10, 1000}, {10, 10000}, {100, 100}, {1000, 1000}, {10000, 10000},
	} {
		b.Run(fmt.Sprintf("children=%d/destinations=%d", tc.children, tc.destinations), func(b *testing.B) {
			benchReported(b, tc.children, tc.destinations)
		})
	}
}

func benchReported(b *testing.B, children, destinations int) {
	f := newStoreFixture(b)
	targets := make([]string, destinations)
	for i := range targets {
		targets[i] = fmt.Sprintf("s%05d", i)
	}
	f.countedPlacement(targets...)
	col := compile(b, f, "count")
	ref := reports.PlacementRef{Space: ws, Name: "p"}
	obj := v1alpha1.ObjectReference{Resource: "configmaps", Namespace: "app", Name: "a"}
	// partial counts n destinations of child i.
	partial := func(i, n int) reports.Partial {
		parts := make([]status.Partial, n)
		for j := range parts {
			p, err := col.Evaluate(map[string]any{"metadata": map[string]any{"name": "a"}}, nil,
				status.Destination{Name: targets[(i+j*children)%destinations]})
			if err != nil {
				b.Fatal(err)
			}
			parts[j] = p
		}
		return reports.Partial{Placement: ref, Object: obj, Collector: "count", Partial: status.MergeAll(parts...)}
	}
	per := destinations / children // each child's share
	space := func(i int) string { return fmt.Sprintf("reports-c%05d", i) }
	for i := range children {
		f.put(store.Key{Resource: layout.SpaceResource, Name: space(i)}, map[string]any{"spec": map[string]any{"kind": layout.SpaceKindMailbox}})
		p := partial(i, per)
		f.report(space(i), p.Key(), reports.KindPartial, p)
		s := reports.PlacementSync{Placement: ref, Destinations: int64(per), Revisions: map[string]int64{"1": int64(per)}, Ready: int64(per)}
		f.report(space(i), s.Key(), reports.KindPlacementSync, s)
	}
	d := newDriver(f, true) // loads it all: a watch from before would fall behind
	d.settle()
	combined := store.Key{Space: ws, Resource: combinedRes, Namespace: "app", Name: "a.configmaps.p"}
	count := func() string {
		o, err := f.st.Get(combined)
		if err != nil {
			b.Fatal(err)
		}
		var cs v1alpha1.CombinedStatus
		if err := json.Unmarshal(o.Data, &cs); err != nil || len(cs.Results) != 1 || len(cs.Results[0].Rows) != 1 {
			b.Fatalf("CombinedStatus %s: %v", o.Data, err)
		}
		return cs.Results[0].Rows[0].Columns[0].String()
	}
	if got := count(); got != fmt.Sprint(children*per) {
		b.Fatalf("the CombinedStatus counts %s destinations, want %d", got, children*per)
	}
	// Child 0 reports one destination fewer, then all of them again.
	fewer, all := partial(0, per-1), partial(0, per)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := all
		if i%2 == 0 {
			p = fewer
		}
		f.report(space(0), p.Key(), reports.KindPartial, p)
		d.catchUp(true)
		d.settle()
	}
	b.StopTimer()
	if want := children*per - b.N%2; count() != fmt.Sprint(want) {
		b.Fatalf("after %d reports the CombinedStatus counts %s destinations, want %d", b.N, count(), want)
	}
}
