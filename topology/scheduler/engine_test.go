package scheduler

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// lbls parses "k=v,k2=v2" ("" is no labels).
func lbls(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func mkTarget(name, uid, labels string) *v1alpha1.SyncTarget {
	return &v1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Labels: lbls(labels)}}
}

func mkLocation(name, labels string, sel metav1.LabelSelector) *v1alpha1.Location {
	return &v1alpha1.Location{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls(labels)},
		Spec:       v1alpha1.LocationSpec{InstanceSelector: sel},
	}
}

func mkPlacement(sels ...metav1.LabelSelector) *v1alpha1.EdgePlacement {
	return &v1alpha1.EdgePlacement{Spec: v1alpha1.EdgePlacementSpec{LocationSelectors: sels}}
}

// ml is a selector of matchLabels only.
func ml(s string) metav1.LabelSelector { return metav1.LabelSelector{MatchLabels: lbls(s)} }

// expr is a selector of one expression.
func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

var everything = metav1.LabelSelector{}

func ref(s string) PlacementRef {
	space, name, _ := strings.Cut(s, "/")
	return PlacementRef{Space: space, Name: name}
}

func refs(ss ...string) []PlacementRef {
	var out []PlacementRef
	for _, s := range ss {
		out = append(out, ref(s))
	}
	return out
}

// dests renders a placement's destinations as "target@location".
func dests(e *Engine, r string) []string {
	var out []string
	for _, d := range e.Destinations(ref(r)) {
		out = append(out, d.SyncTargetName+"@"+d.LocationName)
	}
	return out
}

func checkRefs(t *testing.T, what string, got []PlacementRef, want ...string) {
	t.Helper()
	if w := refs(want...); !slices.Equal(got, w) {
		t.Errorf("%s: changed = %v, want %v", what, got, w)
	}
}

func checkDests(t *testing.T, e *Engine, r string, want ...string) {
	t.Helper()
	if got := dests(e, r); !slices.Equal(got, want) {
		t.Errorf("destinations of %s = %v, want %v", r, got, want)
	}
}

// TestInstanceSelectors: which SyncTargets a Location holds.
func TestInstanceSelectors(t *testing.T) {
	targets := []*v1alpha1.SyncTarget{
		mkTarget("t1", "u1", "region=east,tier=edge"),
		mkTarget("t2", "u2", "region=west,tier=edge"),
		mkTarget("t3", "u3", "region=east,tier=core,gpu=yes"),
		mkTarget("t4", "u4", ""),
	}
	for _, tc := range []struct {
		name string
		sel  metav1.LabelSelector
		want []string
	}{
		{"empty selects all", everything, []string{"t1", "t2", "t3", "t4"}},
		{"matchLabels", ml("region=east"), []string{"t1", "t3"}},
		{"matchLabels, two keys", ml("region=east,tier=edge"), []string{"t1"}},
		{"matchLabels, no match", ml("region=north"), nil},
		{"In", expr("region", metav1.LabelSelectorOpIn, "east", "west"), []string{"t1", "t2", "t3"}},
		{"NotIn", expr("region", metav1.LabelSelectorOpNotIn, "east"), []string{"t2", "t4"}},
		{"Exists", expr("gpu", metav1.LabelSelectorOpExists), []string{"t3"}},
		{"DoesNotExist", expr("gpu", metav1.LabelSelectorOpDoesNotExist), []string{"t1", "t2", "t4"}},
		{"matchLabels and expression", metav1.LabelSelector{
			MatchLabels:      lbls("tier=edge"),
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"west"}}},
		}, []string{"t1"}},
		{"invalid operator selects none", expr("region", "Near", "east"), nil},
		{"In without values selects none", expr("region", metav1.LabelSelectorOpIn), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Targets before the Location, and the Location before the
			// targets: the two paths must agree.
			for _, targetsFirst := range []bool{true, false} {
				e := New()
				e.SetPlacement(ref("w/p"), mkPlacement(everything))
				if targetsFirst {
					for _, st := range targets {
						e.SetSyncTarget(st)
					}
				}
				e.SetLocation(mkLocation("loc", "", tc.sel))
				if !targetsFirst {
					for _, st := range targets {
						e.SetSyncTarget(st)
					}
				}
				var got []string
				for _, d := range e.Destinations(ref("w/p")) {
					got = append(got, d.SyncTargetName)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("targetsFirst=%v: got %v, want %v", targetsFirst, got, tc.want)
				}
			}
		})
	}
}

// TestLocationSelectors: which Locations a placement selects.
func TestLocationSelectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		sels []metav1.LabelSelector
		want []string
	}{
		{"no selectors select none", nil, nil},
		{"empty selector selects all", []metav1.LabelSelector{everything}, []string{"t-core@core", "t-east@east", "t-west@west"}},
		{"matchLabels", []metav1.LabelSelector{ml("region=east")}, []string{"t-east@east"}},
		{"any selector matching selects", []metav1.LabelSelector{ml("region=east"), ml("kind=dc")}, []string{"t-core@core", "t-east@east"}},
		{"In", []metav1.LabelSelector{expr("region", metav1.LabelSelectorOpIn, "west", "south")}, []string{"t-west@west"}},
		{"NotIn", []metav1.LabelSelector{expr("region", metav1.LabelSelectorOpNotIn, "west")}, []string{"t-core@core", "t-east@east"}},
		{"Exists", []metav1.LabelSelector{expr("kind", metav1.LabelSelectorOpExists)}, []string{"t-core@core"}},
		{"DoesNotExist", []metav1.LabelSelector{expr("kind", metav1.LabelSelectorOpDoesNotExist)}, []string{"t-east@east", "t-west@west"}},
		{"invalid selector selects none, the valid one still does", []metav1.LabelSelector{expr("region", "Bogus", "x"), ml("region=west")}, []string{"t-west@west"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			e.SetLocation(mkLocation("east", "region=east", ml("at=east")))
			e.SetLocation(mkLocation("west", "region=west", ml("at=west")))
			e.SetLocation(mkLocation("core", "kind=dc", ml("at=core")))
			e.SetSyncTarget(mkTarget("t-east", "1", "at=east"))
			e.SetSyncTarget(mkTarget("t-west", "2", "at=west"))
			e.SetSyncTarget(mkTarget("t-core", "3", "at=core"))
			got := e.SetPlacement(ref("w/p"), mkPlacement(tc.sels...))
			if len(tc.want) > 0 {
				checkRefs(t, "SetPlacement", got, "w/p")
			} else {
				checkRefs(t, "SetPlacement", got)
			}
			checkDests(t, e, "w/p", tc.want...)
		})
	}
}

func TestInvalidSelectorsAreReported(t *testing.T) {
	e := New()
	e.SetSyncTarget(mkTarget("t1", "u1", "a=1"))
	e.SetLocation(mkLocation("bad", "x=1", expr("a", "Near", "1")))
	e.SetLocation(mkLocation("good", "x=2", ml("a=1")))
	if err := e.LocationError("bad"); !errors.Is(err, ErrInvalidSelector) || !strings.Contains(err.Error(), "location bad") {
		t.Errorf("LocationError(bad) = %v", err)
	}
	if err := e.LocationError("good"); err != nil {
		t.Errorf("LocationError(good) = %v", err)
	}
	e.SetPlacement(ref("w/p"), mkPlacement(everything, metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}))
	errs := e.Errors(ref("w/p"))
	if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidSelector) || !strings.Contains(errs[0].Error(), "locationSelectors[1]") {
		t.Errorf("Errors = %v", errs)
	}
	checkDests(t, e, "w/p", "t1@good")
	if s := e.Stats(); s.InvalidSelectors != 2 {
		t.Errorf("InvalidSelectors = %d, want 2", s.InvalidSelectors)
	}

	// Fixing the Location's selector makes it hold t1, before "good".
	checkRefs(t, "fix location", e.SetLocation(mkLocation("bad", "x=1", ml("a=1"))), "w/p")
	checkDests(t, e, "w/p", "t1@bad")
	checkRefs(t, "fix placement", e.SetPlacement(ref("w/p"), mkPlacement(everything)))
	if errs := e.Errors(ref("w/p")); errs != nil {
		t.Errorf("Errors after fix = %v", errs)
	}
	if s := e.Stats(); s.InvalidSelectors != 0 {
		t.Errorf("InvalidSelectors = %d, want 0", s.InvalidSelectors)
	}
}

// TestSeveralLocationsPerTarget: a target reached through several
// Locations is one destination, reported with the first Location by name.
func TestSeveralLocationsPerTarget(t *testing.T) {
	e := New()
	e.SetSyncTarget(mkTarget("t1", "u1", "region=east,tier=edge"))
	e.SetSyncTarget(mkTarget("t2", "u2", "region=east,tier=core"))
	e.SetLocation(mkLocation("b-region", "kind=region", ml("region=east")))
	e.SetLocation(mkLocation("a-edge", "kind=tier", ml("tier=edge")))
	e.SetPlacement(ref("w/both"), mkPlacement(everything))
	e.SetPlacement(ref("w/region"), mkPlacement(ml("kind=region")))
	e.SetPlacement(ref("w/tier"), mkPlacement(ml("kind=tier")))
	checkDests(t, e, "w/both", "t1@a-edge", "t2@b-region")
	checkDests(t, e, "w/region", "t1@b-region", "t2@b-region")
	checkDests(t, e, "w/tier", "t1@a-edge")
	if s := e.Stats(); s.Memberships != 3 || s.Destinations != 5 || s.Selections != 4 {
		t.Errorf("Stats = %+v", s)
	}
	checkRefs(t, "PlacementsOf(t1)", e.PlacementsOf("t1"), "w/both", "w/region", "w/tier")
	checkRefs(t, "PlacementsOf(t2)", e.PlacementsOf("t2"), "w/both", "w/region")

	// A new Location first by name that holds t2: only the placements
	// selecting it and reaching t2 change (w/tier reaches t1 only).
	checkRefs(t, "SetLocation(0-core)", e.SetLocation(mkLocation("0-core", "kind=tier", ml("tier=core"))), "w/both", "w/tier")
	checkDests(t, e, "w/both", "t1@a-edge", "t2@0-core")
	checkDests(t, e, "w/tier", "t1@a-edge", "t2@0-core")

	// Deleting a-edge: t1 stays in w/both through b-region, leaves w/tier;
	// w/region is untouched.
	checkRefs(t, "DeleteLocation(a-edge)", e.DeleteLocation("a-edge"), "w/both", "w/tier")
	checkDests(t, e, "w/both", "t1@b-region", "t2@0-core")
	checkDests(t, e, "w/tier", "t2@0-core")
	checkDests(t, e, "w/region", "t1@b-region", "t2@b-region")
	checkRefs(t, "DeleteLocation(unknown)", e.DeleteLocation("nowhere"))
}

func TestTargetInNoLocation(t *testing.T) {
	e := New()
	e.SetLocation(mkLocation("east", "", ml("region=east")))
	e.SetPlacement(ref("w/p"), mkPlacement(everything))
	checkRefs(t, "SetSyncTarget", e.SetSyncTarget(mkTarget("lonely", "u", "region=north")))
	checkRefs(t, "PlacementsOf", e.PlacementsOf("lonely"))
	checkRefs(t, "relabel", e.SetSyncTarget(mkTarget("lonely", "u", "region=south")))
	checkRefs(t, "DeleteSyncTarget", e.DeleteSyncTarget("lonely"))
	checkRefs(t, "DeleteSyncTarget(unknown)", e.DeleteSyncTarget("nobody"))
	if s := e.Stats(); s.SyncTargets != 0 || s.Destinations != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// inventory is a fixture: two regions, a placement per region, one for
// both, and an unrelated one.
func inventory() *Engine {
	e := New()
	e.SetLocation(mkLocation("east", "region=east", ml("region=east")))
	e.SetLocation(mkLocation("west", "region=west", ml("region=west")))
	e.SetLocation(mkLocation("lab", "region=lab", ml("lab=yes")))
	e.SetSyncTarget(mkTarget("t1", "u1", "region=east"))
	e.SetSyncTarget(mkTarget("t2", "u2", "region=west"))
	e.SetSyncTarget(mkTarget("t3", "u3", "region=west"))
	e.SetSyncTarget(mkTarget("t9", "u9", "lab=yes"))
	e.SetPlacement(ref("a/east"), mkPlacement(ml("region=east")))
	e.SetPlacement(ref("a/west"), mkPlacement(ml("region=west")))
	e.SetPlacement(ref("b/all"), mkPlacement(expr("region", metav1.LabelSelectorOpIn, "east", "west")))
	e.SetPlacement(ref("b/lab"), mkPlacement(ml("region=lab")))
	return e
}

func TestSyncTargetChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    func(e *Engine) []PlacementRef
		want  []string
		check func(t *testing.T, e *Engine)
	}{
		{"moves east to west", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t1", "u1", "region=west"))
		}, []string{"a/east", "a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/east")
			checkDests(t, e, "a/west", "t1@west", "t2@west", "t3@west")
			checkDests(t, e, "b/all", "t1@west", "t2@west", "t3@west")
		}},
		{"moves out of every Location", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t2", "u2", "region=north"))
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/west", "t3@west")
			checkRefs(t, "PlacementsOf", e.PlacementsOf("t2"))
		}},
		{"moves into a Location", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t9", "u9", "lab=yes,region=east"))
		}, []string{"a/east", "b/all", "b/lab"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/east", "t1@east", "t9@east")
			checkDests(t, e, "b/lab", "t9@lab")
		}},
		{"new label, same Locations: labels are part of the destination", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t3", "u3", "region=west,rack=7"))
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			for _, d := range e.Destinations(ref("a/west")) {
				if d.SyncTargetName == "t3" && d.Labels["rack"] != "7" {
					t.Errorf("labels of t3 = %v", d.Labels)
				}
			}
		}},
		{"nothing that matters changed", func(e *Engine) []PlacementRef {
			st := mkTarget("t3", "u3", "region=west")
			st.Annotations = map[string]string{"note": "x"}
			st.Status.Connected = true
			return e.SetSyncTarget(st)
		}, nil, nil},
		{"UID change", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t1", "u1-again", "region=east"))
		}, []string{"a/east", "b/all"}, func(t *testing.T, e *Engine) {
			if d := e.Destinations(ref("a/east")); len(d) != 1 || d[0].SyncTargetUID != "u1-again" {
				t.Errorf("destinations = %v", d)
			}
		}},
		{"delete", func(e *Engine) []PlacementRef {
			return e.DeleteSyncTarget("t2")
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "b/all", "t1@east", "t3@west")
		}},
		{"new target", func(e *Engine) []PlacementRef {
			return e.SetSyncTarget(mkTarget("t4", "u4", "region=east,lab=yes"))
		}, []string{"a/east", "b/all", "b/lab"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := inventory()
			checkRefs(t, tc.name, tc.op(e), tc.want...)
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// TestDeleteAndRecreate: a SyncTarget deleted and re-created under the
// same name is a new destination (new UID), reported both times.
func TestDeleteAndRecreate(t *testing.T) {
	e := inventory()
	checkRefs(t, "delete", e.DeleteSyncTarget("t1"), "a/east", "b/all")
	checkDests(t, e, "a/east")
	checkRefs(t, "re-create", e.SetSyncTarget(mkTarget("t1", "u1-new", "region=east")), "a/east", "b/all")
	d := e.Destinations(ref("a/east"))
	if len(d) != 1 || d[0].SyncTargetUID != "u1-new" || d[0].LocationName != "east" {
		t.Errorf("destinations = %+v", d)
	}
}

func TestLocationChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    func(e *Engine) []PlacementRef
		want  []string
		check func(t *testing.T, e *Engine)
	}{
		{"selector widens", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("east", "region=east", expr("region", metav1.LabelSelectorOpIn, "east", "west")))
		}, []string{"a/east", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/east", "t1@east", "t2@east", "t3@east")
			checkDests(t, e, "b/all", "t1@east", "t2@east", "t3@east")
		}},
		{"selector narrows to nothing", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("west", "region=west", ml("region=nowhere")))
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/west")
		}},
		{"selector changes, same members", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("west", "region=west", expr("region", metav1.LabelSelectorOpIn, "west")))
		}, nil, nil},
		{"labels change: selected by other placements", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("lab", "region=east", ml("lab=yes")))
		}, []string{"a/east", "b/all", "b/lab"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/east", "t1@east", "t9@lab")
			checkDests(t, e, "b/lab")
		}},
		{"labels and selector change at once", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("lab", "region=west", ml("region=east")))
		}, []string{"a/west", "b/lab"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/west", "t1@lab", "t2@west", "t3@west")
			// b/all now selects lab too, but reaches t1 through east
			// first: unchanged, so not reported.
			checkDests(t, e, "b/all", "t1@east", "t2@west", "t3@west")
		}},
		{"labels change, no placement cares", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("lab", "region=lab,floor=2", ml("lab=yes")))
		}, nil, nil},
		{"unchanged", func(e *Engine) []PlacementRef {
			l := mkLocation("east", "region=east", ml("region=east"))
			l.Annotations = map[string]string{"x": "y"}
			return e.SetLocation(l)
		}, nil, nil},
		{"new Location first by name", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("aaa", "region=west", ml("region=west")))
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/west", "t2@aaa", "t3@aaa")
		}},
		{"new Location last by name: no destination changes", func(e *Engine) []PlacementRef {
			return e.SetLocation(mkLocation("zzz", "region=west", ml("region=west")))
		}, nil, func(t *testing.T, e *Engine) {
			checkDests(t, e, "a/west", "t2@west", "t3@west")
		}},
		{"delete", func(e *Engine) []PlacementRef {
			return e.DeleteLocation("west")
		}, []string{"a/west", "b/all"}, func(t *testing.T, e *Engine) {
			checkDests(t, e, "b/all", "t1@east")
			if s := e.Stats(); s.Locations != 2 || s.Memberships != 2 {
				t.Errorf("Stats = %+v", s)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := inventory()
			checkRefs(t, tc.name, tc.op(e), tc.want...)
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestPlacementChanges(t *testing.T) {
	e := inventory()
	checkRefs(t, "unchanged", e.SetPlacement(ref("a/east"), mkPlacement(ml("region=east"))))
	checkRefs(t, "edit", e.SetPlacement(ref("a/east"), mkPlacement(ml("region=east"), ml("region=lab"))), "a/east")
	checkDests(t, e, "a/east", "t1@east", "t9@lab")
	checkRefs(t, "same Locations through other selectors", e.SetPlacement(ref("a/east"),
		mkPlacement(expr("region", metav1.LabelSelectorOpIn, "east", "lab"))))
	checkRefs(t, "no selectors", e.SetPlacement(ref("a/east"), mkPlacement()), "a/east")
	checkDests(t, e, "a/east")
	checkRefs(t, "delete without destinations", e.DeletePlacement(ref("a/east")))
	checkRefs(t, "delete", e.DeletePlacement(ref("b/all")), "b/all")
	checkRefs(t, "delete unknown", e.DeletePlacement(ref("b/all")))
	checkRefs(t, "PlacementsOf(t2)", e.PlacementsOf("t2"), "a/west")
	checkRefs(t, "new, matching nothing", e.SetPlacement(ref("c/none"), mkPlacement(ml("region=mars"))))
	checkRefs(t, "new", e.SetPlacement(ref("c/any"), mkPlacement(everything)), "c/any")
	checkDests(t, e, "c/any", "t1@east", "t2@west", "t3@west", "t9@lab")
	// The same name in another space is another placement.
	checkRefs(t, "other space", e.SetPlacement(ref("d/any"), mkPlacement(ml("region=lab"))), "d/any")
	checkDests(t, e, "c/any", "t1@east", "t2@west", "t3@west", "t9@lab")
	if s := e.Stats(); s.Placements != 5 || s.Destinations != 2+1+4+1 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestDestinationFields: every field of a Destination.
func TestDestinationFields(t *testing.T) {
	e := New()
	st := mkTarget("t1", "uid-1", "region=east,tier=edge")
	e.SetSyncTarget(st)
	st.Labels["region"] = "mutated by the caller" // the Engine keeps a copy
	e.SetLocation(mkLocation("east", "region=east", ml("tier=edge")))
	e.SetPlacement(ref("w/p"), mkPlacement(everything))
	want := []v1alpha1.Destination{{
		SyncTargetName: "t1", SyncTargetUID: "uid-1", LocationName: "east",
		Labels: map[string]string{"region": "east", "tier": "edge"},
	}}
	if got := e.Destinations(ref("w/p")); !reflect.DeepEqual(got, want) {
		t.Errorf("Destinations = %+v, want %+v", got, want)
	}
	if n := e.DestinationCount(ref("w/p")); n != 1 {
		t.Errorf("DestinationCount = %d", n)
	}
	if d := e.Destinations(ref("w/unknown")); d != nil {
		t.Errorf("Destinations(unknown) = %v", d)
	}
}

func TestDestinationsSorted(t *testing.T) {
	e := New()
	e.SetLocation(mkLocation("all", "", everything))
	e.SetPlacement(ref("w/p"), mkPlacement(everything))
	var want []string
	for i := range 200 {
		name := fmt.Sprintf("t%03d", (i*37)%200)
		e.SetSyncTarget(mkTarget(name, name, ""))
	}
	for i := range 200 {
		want = append(want, fmt.Sprintf("t%03d@all", i))
	}
	checkDests(t, e, "w/p", want...)
}
