package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// world is the reference: the objects as given, and the destinations
// recomputed from scratch, by the rules written as plainly as possible.
type world struct {
	targets    map[string]*v1alpha1.SyncTarget
	locations  map[string]*v1alpha1.Location
	placements map[PlacementRef]*v1alpha1.EdgePlacement
}

func (w *world) destinations(r PlacementRef) []v1alpha1.Destination {
	p := w.placements[r]
	if p == nil {
		return nil
	}
	var sels []labels.Selector
	for i := range p.Spec.LocationSelectors {
		if s, err := metav1.LabelSelectorAsSelector(&p.Spec.LocationSelectors[i]); err == nil {
			sels = append(sels, s)
		}
	}
	found := map[string]v1alpha1.Destination{}
	for _, ln := range slices.Sorted(maps.Keys(w.locations)) { // first Location by name wins
		l := w.locations[ln]
		if !slices.ContainsFunc(sels, func(s labels.Selector) bool { return s.Matches(labels.Set(l.Labels)) }) {
			continue
		}
		isel, err := metav1.LabelSelectorAsSelector(&l.Spec.InstanceSelector)
		if err != nil {
			continue
		}
		for tn, st := range w.targets {
			if _, ok := found[tn]; ok || !isel.Matches(labels.Set(st.Labels)) {
				continue
			}
			var lb map[string]string
			if len(st.Labels) > 0 {
				lb = st.Labels
			}
			found[tn] = v1alpha1.Destination{SyncTargetName: tn, SyncTargetUID: st.UID, LocationName: ln, Labels: lb}
		}
	}
	if len(found) == 0 {
		return nil
	}
	out := slices.Collect(maps.Values(found))
	slices.SortFunc(out, compareDest)
	return out
}

func (w *world) stats() Stats {
	var s Stats
	s.SyncTargets, s.Locations, s.Placements = len(w.targets), len(w.locations), len(w.placements)
	for _, l := range w.locations {
		isel, err := metav1.LabelSelectorAsSelector(&l.Spec.InstanceSelector)
		if err != nil {
			s.InvalidSelectors++
			continue
		}
		for _, st := range w.targets {
			if isel.Matches(labels.Set(st.Labels)) {
				s.Memberships++
			}
		}
	}
	for r, p := range w.placements {
		var sels []labels.Selector
		for i := range p.Spec.LocationSelectors {
			if sel, err := metav1.LabelSelectorAsSelector(&p.Spec.LocationSelectors[i]); err == nil {
				sels = append(sels, sel)
			} else {
				s.InvalidSelectors++
			}
		}
		for _, l := range w.locations {
			if slices.ContainsFunc(sels, func(sel labels.Selector) bool { return sel.Matches(labels.Set(l.Labels)) }) {
				s.Selections++
			}
		}
		s.Destinations += len(w.destinations(r))
	}
	return s
}

// gen draws random objects from small sets of names, labels and values,
// so that operations collide often.
type gen struct {
	r   *rand.Rand
	uid int
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) labels(keys map[string][]string) map[string]string {
	m := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if g.r.IntN(10) < 7 {
			m[k] = g.pick(keys[k]...)
		}
	}
	if len(m) == 0 && g.r.IntN(2) == 0 {
		return nil
	}
	return m
}

func (g *gen) selector(keys map[string][]string) metav1.LabelSelector {
	ks := slices.Sorted(maps.Keys(keys))
	key := g.pick(ks...)
	switch g.r.IntN(9) {
	case 0:
		return metav1.LabelSelector{}
	case 1, 2:
		s := metav1.LabelSelector{MatchLabels: map[string]string{key: g.pick(keys[key]...)}}
		if g.r.IntN(2) == 0 {
			k2 := g.pick(ks...)
			s.MatchLabels[k2] = g.pick(keys[k2]...)
		}
		return s
	case 3:
		return expr(key, metav1.LabelSelectorOpIn, g.pick(keys[key]...), g.pick(keys[key]...))
	case 4:
		return expr(key, metav1.LabelSelectorOpNotIn, g.pick(keys[key]...))
	case 5:
		return expr(key, metav1.LabelSelectorOpExists)
	case 6:
		return expr(key, metav1.LabelSelectorOpDoesNotExist)
	case 7:
		s := expr(key, metav1.LabelSelectorOpIn, g.pick(keys[key]...))
		s.MatchLabels = map[string]string{g.pick(ks...): g.pick("1", "2", "x")}
		return s
	default:
		if g.r.IntN(3) == 0 {
			return expr(key, "Near", "x") // invalid: selects nothing
		}
		return expr(key, metav1.LabelSelectorOpIn, keys[key]...)
	}
}

var (
	targetKeys   = map[string][]string{"region": {"a", "b", "c"}, "tier": {"x", "y"}, "env": {"p", "s"}}
	locationKeys = map[string][]string{"zone": {"1", "2", "3"}, "kind": {"site", "zone"}}
)

// TestRandomAgainstRecomputation applies thousands of random operations
// to an Engine and checks, after each, every placement's destinations,
// the exact list of changed placements, PlacementsOf and Stats against a
// recomputation from scratch.
func TestRandomAgainstRecomputation(t *testing.T) {
	steps := 4000
	if testing.Short() || raceEnabled {
		// The Engine has no concurrency for the race detector to check,
		// and under it the full run takes half a minute.
		steps = 500
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			randomRun(t, seed, steps)
		})
	}
}

func randomRun(t *testing.T, seed uint64, steps int) {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0))}
	e := New()
	w := &world{
		targets:    map[string]*v1alpha1.SyncTarget{},
		locations:  map[string]*v1alpha1.Location{},
		placements: map[PlacementRef]*v1alpha1.EdgePlacement{},
	}
	var allRefs []PlacementRef
	for _, s := range []string{"s0", "s1", "s2"} {
		for _, n := range []string{"p0", "p1", "p2", "p3", "p4"} {
			allRefs = append(allRefs, PlacementRef{Space: s, Name: n})
		}
	}
	before := map[PlacementRef][]v1alpha1.Destination{}
	for step := range steps {
		var got []PlacementRef
		var what string
		switch op := g.r.IntN(100); {
		case op < 35:
			name := fmt.Sprint("st", g.r.IntN(30))
			uid := types.UID(fmt.Sprint("uid", g.uid))
			if old := w.targets[name]; old != nil && g.r.IntN(10) > 0 {
				uid = old.UID
			} else {
				g.uid++
			}
			st := &v1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: g.labels(targetKeys)}}
			if old := w.targets[name]; old != nil && g.r.IntN(5) == 0 {
				st.Labels = old.Labels // same labels: nothing (or only the UID) changes
			}
			what = fmt.Sprintf("SetSyncTarget(%s %s %v)", name, uid, st.Labels)
			w.targets[name] = st
			got = e.SetSyncTarget(st.DeepCopy())
		case op < 45:
			name := fmt.Sprint("st", g.r.IntN(30))
			what = "DeleteSyncTarget(" + name + ")"
			delete(w.targets, name)
			got = e.DeleteSyncTarget(name)
		case op < 60:
			name := fmt.Sprint("loc", g.r.IntN(8))
			l := &v1alpha1.Location{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: g.labels(locationKeys)},
				Spec:       v1alpha1.LocationSpec{InstanceSelector: g.selector(targetKeys)},
			}
			if old := w.locations[name]; old != nil {
				switch g.r.IntN(3) {
				case 0:
					l.Labels = old.Labels // only the selector changes
				case 1:
					l.Spec = old.Spec // only the labels change
				}
			}
			what = fmt.Sprintf("SetLocation(%s %v %v)", name, l.Labels, l.Spec.InstanceSelector)
			w.locations[name] = l
			got = e.SetLocation(l.DeepCopy())
		case op < 65:
			name := fmt.Sprint("loc", g.r.IntN(8))
			what = "DeleteLocation(" + name + ")"
			delete(w.locations, name)
			got = e.DeleteLocation(name)
		case op < 90:
			r := allRefs[g.r.IntN(len(allRefs))]
			p := &v1alpha1.EdgePlacement{}
			for range g.r.IntN(4) {
				p.Spec.LocationSelectors = append(p.Spec.LocationSelectors, g.selector(locationKeys))
			}
			what = fmt.Sprintf("SetPlacement(%s %v)", r, p.Spec.LocationSelectors)
			w.placements[r] = p
			got = e.SetPlacement(r, p.DeepCopy())
		default:
			r := allRefs[g.r.IntN(len(allRefs))]
			what = fmt.Sprintf("DeletePlacement(%s)", r)
			delete(w.placements, r)
			got = e.DeletePlacement(r)
		}

		var want []PlacementRef
		after := map[PlacementRef][]v1alpha1.Destination{}
		for _, r := range allRefs {
			after[r] = w.destinations(r)
			if !reflect.DeepEqual(before[r], after[r]) {
				want = append(want, r)
			}
			if d := e.Destinations(r); !reflect.DeepEqual(d, after[r]) {
				t.Fatalf("step %d, %s: destinations of %s:\n got %v\nwant %v", step, what, r, d, after[r])
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d, %s: changed = %v, want %v", step, what, got, want)
		}
		before = after
		for i := range 30 {
			name := fmt.Sprint("st", i)
			var wantOf []PlacementRef
			for _, r := range allRefs {
				if slices.ContainsFunc(after[r], func(d v1alpha1.Destination) bool { return d.SyncTargetName == name }) {
					wantOf = append(wantOf, r)
				}
			}
			if got := e.PlacementsOf(name); !slices.Equal(got, wantOf) {
				t.Fatalf("step %d, %s: PlacementsOf(%s) = %v, want %v", step, what, name, got, wantOf)
			}
		}
		if step%50 == 0 || step == steps-1 {
			if got, want := e.Stats(), w.stats(); got != want {
				t.Fatalf("step %d, %s: Stats = %+v, want %+v", step, what, got, want)
			}
		}
	}
	var sizes []string
	for _, r := range allRefs {
		sizes = append(sizes, fmt.Sprint(len(before[r])))
	}
	t.Logf("final destinations per placement: %s; %+v", strings.Join(sizes, " "), e.Stats())
}
