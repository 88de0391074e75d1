package placement

import (
	"fmt"
	"slices"
	"testing"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// viewsHere returns "name@destination placed-copy=<label>" for every
// ConfigMap of namespace app in the workload space's views space, sorted.
func (f *fixture) viewsHere() []string {
	lr, err := f.st.List(store.ListOptions{Space: layout.ViewsSpace(ws), Resource: store.Resource{Resource: "configmaps"}, Namespace: "app"})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range lr.Items {
		out = append(out, fmt.Sprintf("%s@%s placed-copy=%s", o.Key.Name, o.Labels[v1alpha1.DestinationLabel], o.Labels[v1alpha1.PlacedCopyLabel]))
	}
	slices.Sort(out)
	return out
}

// liveCopyReport puts what destination dest reports as its live copy of
// placed ConfigMap app/name, which a View gathers.
func (f *fixture) liveCopyReport(dest, name, value string) {
	f.put(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: reports.ForwardedName(dest, name)},
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": value},
			"metadata": map[string]any{"annotations": map[string]any{v1alpha1.DestinationAnnotation: dest, v1alpha1.ViewedAnnotation: "true"}}})
}

// A View of source Placed marks the placed objects of its resource
// (v1alpha1.ViewedAnnotation, so that edges report their copies) and
// gathers the copies of destinations where its space places them, and no
// others; an upsync clause naming the same objects neither writes a copy
// into the space nor counts it. Without the View, the mark and the copies
// go.
func TestPlacedViewGathersLiveCopies(t *testing.T) {
	f := newFixture(t)
	f.put(store.Key{Resource: layout.SpaceResource, Name: "reports-r1"}, map[string]any{"spec": map[string]any{"kind": layout.SpaceKindMailbox}})
	f.target("s1", map[string]string{"env": "prod"})
	f.target("s2", map[string]string{"env": "prod"})
	f.target("s3", map[string]string{"env": "dev"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "placed", nil, nil)
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")},
			"upsync":   []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"app"}}}}})
	placed := store.Key{Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "placed"}
	marked := func(what string, want bool) {
		t.Helper()
		poll.Until(t, what, func() error {
			if got := f.annotationsAt(placed)[v1alpha1.ViewedAnnotation] == "true"; got != want {
				return fmt.Errorf("marked %v", got)
			}
			if f.annotationsAt(store.Key{Resource: namespacesRes, Name: "app"})[v1alpha1.ViewedAnnotation] != nil {
				return fmt.Errorf("the Namespace is marked")
			}
			return nil
		})
	}
	gathered := func(what string, want ...string) {
		t.Helper()
		poll.Until(t, what, func() error {
			if got := f.viewsHere(); !slices.Equal(got, want) {
				return fmt.Errorf("%v", got)
			}
			return nil
		})
	}
	f.waitDownsync("configmaps/app/placed→s1,s2", "namespaces//app→s1,s2", "synctargets//s1→s1", "synctargets//s2→s2", "locations//prod→s1,s2")
	marked("placed unmarked without a View", false)

	view := store.Key{Space: ws, Resource: viewsRes, Name: "live"}
	f.put(view, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "View",
		"spec": map[string]any{"version": "v1", "resource": "configmaps", "source": "Placed"}})
	marked("placed marked", true)
	f.liveCopyReport("s1", "placed", "live-1")
	f.liveCopyReport("s3", "placed", "not placed there")
	f.liveCopyReport("s2", "gone", "never placed")
	f.upsyncReport("s2", "up-1", "upsynced")
	gathered("s1's copy", "s1.placed@s1 placed-copy=true")
	poll.Until(t, "the View's status", func() error {
		o, err := f.st.Get(view)
		if err != nil {
			return err
		}
		if n := jsonMap(o)["status"].(map[string]any)["objects"]; n != float64(1) {
			return fmt.Errorf("status.objects %v", n)
		}
		return nil
	})
	if got := f.upsyncedHere(); !slices.Equal(got, []string{"up-1=upsynced@s2"}) {
		t.Fatalf("upsynced into the space: %v", got)
	}

	f.del(view)
	marked("placed unmarked again", false)
	gathered("no copies without the View")
}
