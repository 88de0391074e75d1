package server

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// placementTree is a root, one region and edges with labels, all
// announced.
type placementTree struct {
	root   *Root
	region *Child
	edges  map[string]*Child
	stops  map[string]func()
	wds    dynamic.Interface
	inv    dynamic.Interface
}

func startPlacementTree(t *testing.T, edges map[string]map[string]string) *placementTree {
	t.Helper()
	return startPlacementTreeUnder(t, startTestRoot(t), edges)
}

// startPlacementTreeUnder is startPlacementTree under a root that is
// already serving (one a test restarts, say).
func startPlacementTreeUnder(t *testing.T, root *Root, edges map[string]map[string]string) *placementTree {
	t.Helper()
	token := joinToken(t, root)
	region := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(),
		Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	poll.True(t, "region serving", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	pt := &placementTree{root: root, region: region, edges: map[string]*Child{}, stops: map[string]func(){}}
	for name, labels := range edges {
		pt.startEdge(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
			Parents: []string{region.LinkAddr()}, JoinToken: token, VirtualCluster: true, InMemory: true, Labels: labels})
	}
	poll.True(t, "every edge announced", func() bool {
		dests, _ := root.down.Subtree()
		return len(dests) == len(edges)
	})
	pt.connect(t, len(edges))
	return pt
}

// connect makes pt's clients of the root's default and inventory spaces,
// once the workload CRDs are installed, and waits for n SyncTargets.
func (pt *placementTree) connect(t *testing.T, n int) {
	t.Helper()
	poll.True(t, "the workload CRDs", func() bool { return pt.root.startupCRDsReady() == nil })
	var err error
	if pt.wds, err = pt.root.spaceClient(layout.DefaultSpace); err != nil {
		t.Fatal(err)
	}
	if pt.inv, err = pt.root.spaceClient(layout.InventorySpace); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "SyncTargets for every edge", func() bool {
		l, err := pt.inv.Resource(edgev1alpha1.SyncTargetsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == n
	})
}

// addEdge starts another edge under the region.
func (pt *placementTree) addEdge(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	pt.startEdge(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
		Parents: []string{pt.region.LinkAddr()}, JoinToken: joinToken(t, pt.root), VirtualCluster: true, InMemory: true, Labels: labels})
}

func (pt *placementTree) startEdge(t *testing.T, cfg ChildConfig) {
	t.Helper()
	c, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	pt.edges[cfg.Name], pt.stops[cfg.Name] = c, serveInBackground(t, cfg.Name, c.Serve)
}

// restartEdge stops an edge and starts it again (same identity) with other
// labels.
func (pt *placementTree) restartEdge(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	pt.stops[name]()
	cfg := pt.edges[name].cfg
	cfg.Labels, cfg.JoinToken = labels, ""
	pt.startEdge(t, cfg)
}

func (pt *placementTree) apply(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	applyTB(t, c, gvr, obj)
}

// inbox lists an edge's workload objects (not Canopy's own) as
// "resource/ns/name".
func inbox(c *Child) []string {
	lr, _ := c.Store().List(store.ListOptions{Space: layout.InboxSpace})
	var out []string
	for _, o := range lr.Items {
		if o.Key.Resource.Group == edgev1alpha1.GroupName {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s/%s", o.Key.Resource.Resource, o.Key.Namespace, o.Key.Name))
	}
	slices.Sort(out)
	return out
}

// waitInboxes waits until every edge holds exactly want[edge] (nil:
// nothing), and its inbox equals its mailbox at the region.
func (pt *placementTree) waitInboxes(t *testing.T, what string, want map[string][]string) {
	t.Helper()
	poll.Until(t, what, func() error {
		for name, e := range pt.edges {
			got := inbox(e)
			if !slices.Equal(got, want[name]) {
				return fmt.Errorf("%s holds %v, want %v", name, got, want[name])
			}
			mb, err1 := tree.RoutedContentHash(pt.region.Store(), layout.InboxSpace, pt.region.Mailboxes().Routing(name))
			in, err2 := tree.ContentHash(e.Store(), layout.InboxSpace)
			if err1 != nil || err2 != nil || mb != in {
				return fmt.Errorf("%s's inbox differs from its mailbox", name)
			}
		}
		return nil
	})
}

var (
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// Placement through the tree: an EdgePlacement in the default space puts
// the selected objects (and their namespace) on the SyncTargets of the
// Locations it selects, through the region, and nowhere else; moving the
// Location, changing the clauses and deleting the placement move and
// remove exactly what they should.
func TestPlacementThroughTheTree(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{
		"e1": {"zone": "a"}, "e2": {"zone": "b"}, "e3": {"zone": "a"},
	})
	location := func(zone string) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
			"metadata": map[string]any{"name": "chosen", "labels": map[string]any{"use": "yes"}},
			"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": zone}}}}
	}
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, location("a"))
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	for _, name := range []string{"cfg", "extra"} {
		pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop", "labels": map[string]any{"app": name}}, "data": map[string]any{"k": "v"}})
	}
	placement := func(names ...any) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": "shop"},
			"spec": map[string]any{
				"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
				"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}, "objectNames": names}},
			}}
	}
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, placement("cfg"))
	placed := []string{"configmaps/shop/cfg", "namespaces//shop"}
	pt.waitInboxes(t, "zone a to hold the placed objects", map[string][]string{"e1": placed, "e3": placed})

	// The status says how many destinations matched; the slices list them.
	poll.True(t, "MATCHED 2", func() bool {
		p, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Get(context.Background(), "shop", metav1.GetOptions{})
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "matchedDestinations")
		return err == nil && n == 2
	})
	sl, err := pt.wds.Resource(edgev1alpha1.SinglePlacementSlicesGVR).List(context.Background(), metav1.ListOptions{LabelSelector: edgev1alpha1.PlacementLabel + "=shop"})
	if err != nil || len(sl.Items) != 1 {
		t.Fatalf("slices of the placement: %v (%v)", sl, err)
	}
	if dests, _, _ := unstructured.NestedSlice(sl.Items[0].Object, "destinations"); len(dests) != 2 {
		t.Fatalf("slice destinations = %v", dests)
	}

	// The Location moves to zone b: e1 and e3 delete, e2 receives.
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, location("b"))
	pt.waitInboxes(t, "zone b to hold the placed objects", map[string][]string{"e2": placed})

	// A destination joins zone b: it receives what the zone has. Another
	// leaves it (restarted with other labels): it loses it.
	pt.addEdge(t, "e4", map[string]string{"zone": "b"})
	pt.waitInboxes(t, "e4 to join zone b", map[string][]string{"e2": placed, "e4": placed})
	pt.restartEdge(t, "e2", map[string]string{"zone": "c"})
	pt.waitInboxes(t, "e2 to leave zone b", map[string][]string{"e4": placed})

	// The clause widens: the second object joins.
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, placement("cfg", "extra"))
	pt.waitInboxes(t, "both objects in zone b", map[string][]string{"e4": {"configmaps/shop/cfg", "configmaps/shop/extra", "namespaces//shop"}})

	// The placement goes: so does everything it placed.
	if err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Delete(context.Background(), "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pt.waitInboxes(t, "nothing placed", map[string][]string{})
}
