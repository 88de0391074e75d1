package placement

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// annotationsAt returns the annotations of the downsync space's object at
// k (Space empty), or nil.
func (f *fixture) annotationsAt(k store.Key) map[string]any {
	k.Space = down
	o, err := f.st.Get(k)
	if err != nil {
		return nil
	}
	md, _ := jsonMap(o)["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	return ann
}

// A SyncTarget in two Locations is customized, for each placement's
// objects, with the Location that placement selected it through (as its
// slice records), not the first Location by name that holds it; two
// placements that reach it through different Locations with one
// customized object are in conflict, and the first by name wins.
func TestCustomizationUsesTheSelectedLocation(t *testing.T) {
	f := newFixture(t)
	f.target("s1", map[string]string{"shop": "yes"})
	f.target("s2", map[string]string{"shop": "yes"})
	f.location("red", map[string]string{"color": "red"}, map[string]string{"shop": "yes"})
	f.location("region-1", map[string]string{"region": "1"}, map[string]string{"shop": "yes"})
	f.namespace(ws, "app")
	expand := map[string]string{v1alpha1.ExpandParametersAnnotation: "true"}
	f.configMap(ws, "app", "via-region", map[string]string{"p": "region"}, expand)
	f.configMap(ws, "app", "via-red", map[string]string{"p": "red"}, expand)
	f.configMap(ws, "app", "plain", map[string]string{"p": "red"}, nil)
	byLabel := func(v string) map[string]any {
		return map[string]any{"resources": []any{"configmaps"}, "labelSelectors": []any{map[string]any{"matchLabels": map[string]any{"p": v}}}}
	}
	f.placement(ws, "a-region", map[string]string{"region": "1"}, byLabel("region"))
	// locationsAre: the objects' Location overrides and the SyncTargets'
	// Locations read want.
	locationsAre := func(want string) func() error {
		return func() error {
			var out []string
			for _, n := range []string{"via-region", "via-red", "plain", "both"} {
				ann := f.annotationsAt(store.Key{Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: n})
				out = append(out, fmt.Sprintf("%s:%v", n, ann[v1alpha1.LocationOverridesAnnotation]))
			}
			for _, d := range []string{"s1", "s2"} {
				out = append(out, fmt.Sprintf("%s:%v", d, f.annotationsAt(store.Key{Resource: syncTargetsRes, Name: d})[v1alpha1.LocationAnnotation]))
			}
			if got := strings.Join(out, " "); got != want {
				return errors.New(got)
			}
			return nil
		}
	}

	// One placement, through region-1. The SyncTargets name the first
	// Location by name that holds them, red; the object names region-1,
	// the Location it was placed through, for both; both Locations travel.
	f.waitDownsync("configmaps/app/via-region→s1,s2", "namespaces//app→s1,s2",
		"synctargets//s1→s1", "synctargets//s2→s2", "locations//red→s1,s2", "locations//region-1→s1,s2")
	want := "via-region:s1=region-1,s2=region-1 via-red:<nil> plain:<nil> both:<nil> s1:red s2:red"
	poll.Until(t, "the Locations of the objects", locationsAre(want))

	// Another placement, through red: its objects need no override; an
	// object that is not customized never does.
	f.placement(ws, "b-red", map[string]string{"color": "red"}, byLabel("red"))
	f.waitDownsync("configmaps/app/via-region→s1,s2", "configmaps/app/via-red→s1,s2",
		"configmaps/app/plain→s1,s2", "namespaces//app→s1,s2",
		"synctargets//s1→s1", "synctargets//s2→s2", "locations//region-1→s1,s2", "locations//red→s1,s2")
	poll.Until(t, "the Locations of the objects", locationsAre(want))

	// Both place one customized object: they disagree on the Location at
	// each destination, both report it, and a-region (first by name)
	// wins: its Location applies.
	f.configMap(ws, "app", "both", map[string]string{"p": "region"}, expand)
	f.placement(ws, "b-red", map[string]string{"color": "red"}, byLabel("red"), map[string]any{
		"resources": []any{"configmaps"}, "objectNames": []any{"both"}})
	for _, p := range []string{"a-region", "b-red"} {
		st := f.waitStatus(ws, p, "two conflicts", func(s v1alpha1.EdgePlacementStatus) bool { return s.ConflictCount == 2 })
		for i, d := range []string{"s1", "s2"} {
			c := st.Conflicts[i]
			if c.Destination != d || c.Winner != "a-region" || c.Object.Name != "both" || !slices.Equal(c.Placements, []string{"a-region", "b-red"}) ||
				!strings.Contains(c.Message, "through Location region-1") {
				t.Fatalf("%s conflict %d = %+v", p, i, c)
			}
		}
	}
	want = "via-region:s1=region-1,s2=region-1 via-red:<nil> plain:<nil> both:s1=region-1,s2=region-1 s1:red s2:red"
	poll.Until(t, "the winner's Location", locationsAre(want))

	// The object stops being customized: the Location no longer matters,
	// so there is no conflict.
	f.configMap(ws, "app", "both", map[string]string{"p": "region"}, nil)
	for _, p := range []string{"a-region", "b-red"} {
		f.waitStatus(ws, p, "no conflict", func(s v1alpha1.EdgePlacementStatus) bool { return s.ConflictCount == 0 })
	}
}
