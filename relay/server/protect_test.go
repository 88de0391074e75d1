package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// placeShop places the ConfigMaps names of namespace shop on every
// SyncTarget of zone a, through the Location "zone-a" and the
// EdgePlacement "shop".
func (pt *placementTree) placeShop(t *testing.T, names ...string) {
	t.Helper()
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "zone-a", "labels": map[string]any{"use": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": "a"}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	objectNames := make([]any, len(names))
	for i, name := range names {
		objectNames[i] = name
		pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop"}, "data": map[string]any{"k": "v"}})
	}
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}, "objectNames": objectNames}},
		}})
}

// inboxDeletions records every workload object deleted from the inboxes
// of edges (what their syncers then delete from their clusters), from now
// on.
func inboxDeletions(t *testing.T, edges map[string]*Child) func() []string {
	t.Helper()
	var mu sync.Mutex
	var deleted []string
	for name, e := range edges {
		w, err := e.Store().Watch(t.Context(), store.WatchOptions{Space: layout.InboxSpace, Since: e.Store().Revision()})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.Events() {
				if ev.Type == store.Deleted && ev.Object.Key.Resource.Group != edgev1alpha1.GroupName {
					mu.Lock()
					deleted = append(deleted, name+": "+ev.Object.Key.String())
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), deleted...)
	}
}

// wantForbidden checks that err is a 403 whose message says why.
func wantForbidden(t *testing.T, what string, err error, why string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %v; want 403 Forbidden saying %q", what, err, why)
	}
}

// TestCanopyOwnsItsCRDsAndConnectedSyncTargets: what the root installs,
// and the SyncTargets of connected edges, cannot be deleted through the
// API (delete or deletecollection): a 403 says why and what to do, and
// the edges never delete what they applied. An edge is retired by
// stopping it, then deleting its SyncTarget, which stays deleted until
// the edge connects again.
func TestCanopyOwnsItsCRDsAndConnectedSyncTargets(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}, "e2": {"zone": "a"}})
	ctx := context.Background()
	pt.placeShop(t, "cfg")
	placed := []string{"configmaps/shop/cfg", "namespaces//shop"}
	pt.waitInboxes(t, "zone a to hold the placed objects", map[string][]string{"e1": placed, "e2": placed})
	deletions := inboxDeletions(t, pt.edges)

	// Canopy's CRDs, in the workload space and in the inventory.
	wdsCRDs, invCRDs := pt.wds.Resource(crdGVR), pt.inv.Resource(crdGVR)
	epCRD := edgev1alpha1.CRDName(edgev1alpha1.ResourceEdgePlacements)
	wantForbidden(t, "deleting the EdgePlacement CRD", wdsCRDs.Delete(ctx, epCRD, metav1.DeleteOptions{}),
		`would delete every EdgePlacement of space "default"`)
	dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	wantForbidden(t, "deleting the EdgePlacement CRD in a dry run", wdsCRDs.Delete(ctx, epCRD, dryRun), "Canopy installs this CRD")
	wantForbidden(t, "deleting every CRD of the default space", wdsCRDs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		"Canopy installs this CRD")
	wantForbidden(t, "deleting the SyncTarget CRD", invCRDs.Delete(ctx, edgev1alpha1.CRDName(edgev1alpha1.ResourceSyncTargets), metav1.DeleteOptions{}),
		`would delete every SyncTarget of space "inventory"`)
	wantForbidden(t, "deleting the Location CRD", invCRDs.Delete(ctx, edgev1alpha1.CRDName(edgev1alpha1.ResourceLocations), metav1.DeleteOptions{}),
		"Canopy installs this CRD")
	for _, c := range []struct {
		space string
		res   []string
	}{{layout.DefaultSpace, edgev1alpha1.WorkloadResources}, {layout.InventorySpace, edgev1alpha1.InventoryResources}} {
		for _, res := range c.res {
			crd, err := pt.root.Store().Get(store.Key{Space: c.space, Resource: crdStoreResource, Name: edgev1alpha1.CRDName(res)})
			if err != nil {
				t.Errorf("the CRD of %s in %s after the refused deletes: %v", res, c.space, err)
			} else if strings.Contains(string(crd.Data), "deletionTimestamp") {
				t.Errorf("the CRD of %s in %s is being deleted after the refused deletes", res, c.space)
			}
		}
	}
	if _, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Get(ctx, "shop", metav1.GetOptions{}); err != nil {
		t.Errorf("the EdgePlacement after the refused deletes of its CRD: %v", err)
	}

	// A connected edge's SyncTarget.
	targets := pt.inv.Resource(edgev1alpha1.SyncTargetsGVR)
	wantForbidden(t, "deleting e1's SyncTarget", targets.Delete(ctx, "e1", metav1.DeleteOptions{}),
		"its edge relay is connected (path root/r1/e1)")
	wantForbidden(t, "deleting every SyncTarget", targets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		"to retire the edge, stop its relay, then delete its SyncTarget")
	if l, err := targets.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Fatalf("SyncTargets after the refused deletes: %v (%v), want e1 and e2", l, err)
	}

	// Nothing the edges applied was deleted: a later change reaches them
	// after whatever the refused deletes would have caused.
	pt.placeShop(t, "cfg", "more")
	placed = []string{"configmaps/shop/cfg", "configmaps/shop/more", "namespaces//shop"}
	pt.waitInboxes(t, "the next change to reach zone a", map[string][]string{"e1": placed, "e2": placed})
	if d := deletions(); len(d) > 0 {
		t.Errorf("the edges deleted %v", d)
	}

	// Retiring e2: stopped, then its SyncTarget deleted. It stays deleted
	// (a change of the fleet is seen after it), and its objects leave the
	// placement.
	pt.stops["e2"]()
	poll.True(t, "e2 disconnected", func() bool {
		st, err := targets.Get(ctx, "e2", metav1.GetOptions{})
		if err != nil {
			return false
		}
		connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
		return !connected
	})
	if err := targets.Delete(ctx, "e2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the SyncTarget of e2, stopped: %v", err)
	}
	pt.addEdge(t, "e3", map[string]string{"zone": "b"})
	poll.True(t, "e3's SyncTarget", func() bool { _, err := targets.Get(ctx, "e3", metav1.GetOptions{}); return err == nil })
	if _, err := targets.Get(ctx, "e2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("e2's SyncTarget after it was retired: %v, want NotFound", err)
	}
	poll.True(t, "the placement to match e1 alone", func() bool {
		p, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false
		}
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "matchedDestinations")
		return n == 1
	})

	// e2 connects again: it brings its SyncTarget back.
	cfg := pt.edges["e2"].cfg
	cfg.JoinToken = ""
	pt.startEdge(t, cfg)
	poll.True(t, "e2's SyncTarget back, connected", func() bool {
		st, err := targets.Get(ctx, "e2", metav1.GetOptions{})
		if err != nil {
			return false
		}
		connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
		return connected && st.GetLabels()["zone"] == "a"
	})
}

// TestCanopyCRDsAndSyncTargetsComeBack: a Canopy CRD, or a connected
// edge's SyncTarget, deleted around the API (as while the root was down,
// or by the garbage collector) is made again at once.
func TestCanopyCRDsAndSyncTargetsComeBack(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}})
	ctx := context.Background()
	for _, c := range []struct {
		space, resource string
	}{
		{layout.DefaultSpace, edgev1alpha1.ResourceEdgePlacements},
		{layout.DefaultSpace, edgev1alpha1.ResourceCombinedStatuses},
		{layout.InventorySpace, edgev1alpha1.ResourceSyncTargets},
		{layout.InventorySpace, edgev1alpha1.ResourceLocations},
	} {
		k := store.Key{Space: c.space, Resource: crdStoreResource, Name: edgev1alpha1.CRDName(c.resource)}
		gone, err := pt.root.Store().Delete(ctx, k, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		poll.True(t, fmt.Sprintf("the CRD of %s in %s back", c.resource, c.space), func() bool {
			o, err := pt.root.Store().Get(k)
			return err == nil && o.Revision > gone.Revision
		})
	}
	// The CRDs serve again.
	if _, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing EdgePlacements: %v", err)
	}

	// A CRD given an owner, which the garbage collector would follow to
	// delete it, loses it.
	crds := pt.wds.Resource(crdGVR)
	crd, err := crds.Get(ctx, edgev1alpha1.CRDName(edgev1alpha1.ResourceEdgePlacements), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "1234"}})
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the owner dropped from the EdgePlacement CRD", func() bool {
		crd, err := crds.Get(ctx, edgev1alpha1.CRDName(edgev1alpha1.ResourceEdgePlacements), metav1.GetOptions{})
		return err == nil && len(crd.GetOwnerReferences()) == 0
	})

	targets := pt.inv.Resource(edgev1alpha1.SyncTargetsGVR)
	st, err := targets.Get(ctx, "e1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pt.root.Store().Delete(ctx, store.Key{Space: layout.InventorySpace, Resource: store.Resource{Group: edgev1alpha1.GroupName, Resource: edgev1alpha1.ResourceSyncTargets}, Name: "e1"}, 0, ""); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "e1's SyncTarget back, connected", func() bool {
		again, err := targets.Get(ctx, "e1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		connected, _, _ := unstructured.NestedBool(again.Object, "status", "connected")
		return again.GetUID() != st.GetUID() && connected && again.GetLabels()["zone"] == "a"
	})
}
