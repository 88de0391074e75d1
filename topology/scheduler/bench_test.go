package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The benchmark fleet: 10 000 SyncTargets labelled region (5), zone (4
// per region), tier (3) and env (3); 200 Locations: one per (zone, tier,
// env) (180, kind=site) and one per zone (20, kind=zone), so every
// SyncTarget is in two; 1 000 EdgePlacements in 10 spaces, of five
// shapes (see benchPlacement), about 1 200 destinations each on average.
const (
	benchTargets = 10_000
	benchSpaces  = 10
	benchPerWDS  = 100
)

var (
	benchTiers = []string{"edge", "core", "far"}
	benchEnvs  = []string{"prod", "staging", "dev"}
)

func benchZone(i int) (region, zone string) {
	return fmt.Sprint("r", i/4), fmt.Sprintf("r%d-z%d", i/4, i%4)
}

type benchFleet struct {
	targets    []*v1alpha1.SyncTarget
	locations  []*v1alpha1.Location
	refs       []PlacementRef
	placements []*v1alpha1.EdgePlacement
}

func newBenchFleet() *benchFleet {
	r := rand.New(rand.NewPCG(42, 42))
	f := &benchFleet{}
	for i := range benchTargets {
		region, zone := benchZone(r.IntN(20))
		f.targets = append(f.targets, &v1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("st-%05d", i),
			UID:  types.UID(fmt.Sprintf("uid-%05d", i)),
			Labels: map[string]string{
				"region": region, "zone": zone,
				"tier": benchTiers[r.IntN(3)], "env": benchEnvs[r.IntN(3)],
			},
		}})
	}
	for z := range 20 {
		region, zone := benchZone(z)
		for _, tier := range benchTiers {
			for _, env := range benchEnvs {
				sel := map[string]string{"zone": zone, "tier": tier, "env": env}
				f.locations = append(f.locations, mkBenchLocation(fmt.Sprintf("site-%s-%s-%s", zone, tier, env),
					map[string]string{"kind": "site", "region": region, "zone": zone, "tier": tier, "env": env}, sel))
			}
		}
		f.locations = append(f.locations, mkBenchLocation("zone-"+zone,
			map[string]string{"kind": "zone", "region": region, "zone": zone}, map[string]string{"zone": zone}))
	}
	for s := range benchSpaces {
		for n := range benchPerWDS {
			f.refs = append(f.refs, PlacementRef{Space: fmt.Sprint("wds-", s), Name: fmt.Sprint("p-", n)})
			f.placements = append(f.placements, benchPlacement(r))
		}
	}
	return f
}

func mkBenchLocation(name string, labels, sel map[string]string) *v1alpha1.Location {
	return &v1alpha1.Location{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1alpha1.LocationSpec{InstanceSelector: metav1.LabelSelector{MatchLabels: sel}},
	}
}

// benchPlacement draws one of five shapes of placement.
func benchPlacement(r *rand.Rand) *v1alpha1.EdgePlacement {
	region, zone := benchZone(r.IntN(20))
	var sels []metav1.LabelSelector
	switch x := r.IntN(100); {
	case x < 30: // a region's sites of one env: 12 Locations, ~670 targets
		sels = []metav1.LabelSelector{{MatchLabels: map[string]string{"kind": "site", "region": region, "env": benchEnvs[r.IntN(3)]}}}
	case x < 55: // one zone: 1 Location, ~500 targets
		sels = []metav1.LabelSelector{{MatchLabels: map[string]string{"kind": "zone", "zone": zone}}}
	case x < 75: // one tier in prod and staging: 40 Locations, ~2 200 targets
		sels = []metav1.LabelSelector{{
			MatchLabels:      map[string]string{"kind": "site", "tier": benchTiers[r.IntN(3)]},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}}},
		}}
	case x < 90: // a region, every kind: 40 Locations, ~2 000 targets, each reached twice
		sels = []metav1.LabelSelector{{MatchLabels: map[string]string{"region": region}}}
	default: // two zones: 2 Locations, ~1 000 targets
		_, zone2 := benchZone(r.IntN(20))
		sels = []metav1.LabelSelector{
			{MatchLabels: map[string]string{"kind": "zone", "zone": zone}},
			{MatchLabels: map[string]string{"kind": "zone", "zone": zone2}},
		}
	}
	return &v1alpha1.EdgePlacement{Spec: v1alpha1.EdgePlacementSpec{LocationSelectors: sels}}
}

func (f *benchFleet) build(placementsFirst bool) *Engine {
	e := New()
	if placementsFirst {
		for i, p := range f.placements {
			e.SetPlacement(f.refs[i], p)
		}
	}
	for _, l := range f.locations {
		e.SetLocation(l)
	}
	for _, st := range f.targets {
		e.SetSyncTarget(st)
	}
	if !placementsFirst {
		for i, p := range f.placements {
			e.SetPlacement(f.refs[i], p)
		}
	}
	return e
}

// BenchmarkScheduleAll builds the whole state from nothing: inventory
// then placements, or placements first (as a controller that loads the
// workload spaces before the inventory does).
func BenchmarkScheduleAll(b *testing.B) {
	f := newBenchFleet()
	for _, order := range []struct {
		name            string
		placementsFirst bool
	}{{"inventory-first", false}, {"placements-first", true}} {
		b.Run(order.name, func(b *testing.B) {
			b.ReportAllocs()
			var e *Engine
			for b.Loop() {
				e = f.build(order.placementsFirst)
			}
			s := e.Stats()
			b.ReportMetric(float64(s.Destinations), "destinations")
			var before, after runtime.MemStats
			e = nil
			runtime.GC()
			runtime.ReadMemStats(&before)
			e = f.build(order.placementsFirst)
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-heap")
			runtime.KeepAlive(e)
		})
	}
}

// BenchmarkLabelChange changes one SyncTarget's labels per op, cycling
// through the fleet: "moves" changes env (the target leaves one site
// Location for another); "in-place" changes a label no selector reads
// (the target's Locations stay, but every placement reaching it gets new
// labels for it). placements/op is the length of the returned list.
func BenchmarkLabelChange(b *testing.B) {
	f := newBenchFleet()
	for _, mode := range []string{"moves", "in-place"} {
		b.Run(mode, func(b *testing.B) {
			e := f.build(false)
			targets := append([]*v1alpha1.SyncTarget(nil), f.targets...)
			b.ReportAllocs()
			touched, i := 0, 0
			for b.Loop() {
				st := targets[i%benchTargets].DeepCopy()
				targets[i%benchTargets] = st
				if mode == "moves" {
					for j, env := range benchEnvs {
						if env == st.Labels["env"] {
							st.Labels["env"] = benchEnvs[(j+1)%3]
							break
						}
					}
				} else {
					st.Labels["heartbeat"] = fmt.Sprint(i)
				}
				touched += len(e.SetSyncTarget(st))
				i++
			}
			b.ReportMetric(float64(touched)/float64(i), "placements/op")
		})
	}
}

// BenchmarkNewPlacement adds one placement and deletes it again per op,
// so the state stays the same: one zone (1 Location), one region (40
// Locations) and every site (180 Locations, all 10 000 targets).
func BenchmarkNewPlacement(b *testing.B) {
	f := newBenchFleet()
	e := f.build(false)
	for _, tc := range []struct {
		name string
		sel  map[string]string
	}{
		{"zone", map[string]string{"kind": "zone", "zone": "r2-z1"}},
		{"region", map[string]string{"region": "r3"}},
		{"all-sites", map[string]string{"kind": "site"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := &v1alpha1.EdgePlacement{Spec: v1alpha1.EdgePlacementSpec{
				LocationSelectors: []metav1.LabelSelector{{MatchLabels: tc.sel}},
			}}
			ref := PlacementRef{Space: "wds-new", Name: "new"}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				e.SetPlacement(ref, p)
				n = e.DestinationCount(ref)
				e.DeletePlacement(ref)
			}
			b.ReportMetric(float64(n), "destinations")
		})
	}
}

// BenchmarkDestinations builds one placement's sorted destination list
// (what the controller hands the Pager after a change).
func BenchmarkDestinations(b *testing.B) {
	f := newBenchFleet()
	e := f.build(false)
	ref := PlacementRef{Space: "wds-new", Name: "all"}
	e.SetPlacement(ref, &v1alpha1.EdgePlacement{Spec: v1alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"kind": "site"}}},
	}})
	b.ReportAllocs()
	for b.Loop() {
		if len(e.Destinations(ref)) != benchTargets {
			b.Fatal("wrong count")
		}
	}
}

// BenchmarkPager pages 100 000 destinations into slices of
// MaxDestinationsPerSlice and changes one destination's labels per op:
// Update is given the whole list, Apply only the change. Each op writes
// one slice.
func BenchmarkPager(b *testing.B) {
	want := many(100_000)
	b.Run("first-fill", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if c := NewPager("p", 0, nil).Update(want); len(c.Write) != 100 {
				b.Fatal(len(c.Write))
			}
		}
	})
	b.Run("rebuild-from-store", func(b *testing.B) {
		existing := NewPager("p", 0, nil).Update(want).Write
		b.ReportAllocs()
		for b.Loop() {
			if p := NewPager("p", 0, existing); p.Len() != len(want) {
				b.Fatal(p.Len())
			}
		}
	})
	for _, mode := range []string{"Update", "Apply"} {
		b.Run("one-change-"+mode, func(b *testing.B) {
			p := NewPager("p", 0, nil)
			p.Update(want)
			cur := append([]v1alpha1.Destination(nil), want...)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := (i * 7919) % len(cur)
				d := cur[k]
				d.Labels = map[string]string{"name": d.SyncTargetName, "rev": fmt.Sprint(i)}
				cur[k] = d
				var c Changes
				if mode == "Update" {
					c = p.Update(cur)
				} else {
					c = p.Apply([]v1alpha1.Destination{d}, nil)
				}
				if len(c.Write) != 1 || len(c.Write[p.SliceOf(d.SyncTargetName)]) != 1000 {
					b.Fatalf("writes %v", writes(c))
				}
				i++
			}
		})
	}
}
