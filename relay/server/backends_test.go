package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/backing"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The built-in inventory space moved to a kube backend by a patch of its
// Space: the joined destinations' SyncTargets are written there, a
// Location another tool creates there drives placement, and a SyncTarget
// made there for a cluster that has not joined shows no path. Moved back
// to the root's store, the space keeps what it held.
func TestInventoryBackedByKube(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}, "e2": {"zone": "b"}})
	backend := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	ctx := context.Background()
	sys := systemClient(t, pt.root)
	storeBackingKubeconfig(t, pt.root, t.TempDir(), "inventory", backend.Kubeconfig)
	patch := func(p string) {
		t.Helper()
		if _, err := sys.Resource(spacesGVR).Patch(ctx, layout.InventorySpace, types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"backend":"kube","kubeconfigSecret":{"name":"inventory"}}}`)
	waitSpaceCondition(t, sys, layout.InventorySpace, backing.ConditionReady, metav1.ConditionTrue, "")

	bc := dynamicFor(t, backend)
	poll.Until(t, "the joined destinations' SyncTargets in the backend", func() error {
		for name, zone := range map[string]string{"e1": "a", "e2": "b"} {
			st, err := bc.Resource(edgev1alpha1.SyncTargetsGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			path, _, _ := unstructured.NestedString(st.Object, "status", "path")
			if st.GetLabels()["zone"] != zone || path != "root/r1/"+name {
				return fmt.Errorf("%s: labels %v, path %q", name, st.GetLabels(), path)
			}
		}
		return nil
	})
	create := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		if _, err := bc.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "zone-a", "labels": map[string]any{"use": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": "a"}}}})
	create(edgev1alpha1.SyncTargetsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget",
		"metadata": map[string]any{"name": "e9", "labels": map[string]any{"zone": "a"}}, "spec": map[string]any{}})

	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}})
	pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "namespace": "team"}, "data": map[string]any{"k": "v"}})
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "team"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"team"}}},
		}})
	pt.waitInboxes(t, "e1, in the backend's Location, to hold the ConfigMap", map[string][]string{"e1": {"configmaps/team/cfg", "namespaces//team"}})
	poll.Until(t, "e9, made by another tool, shown with no path", func() error {
		st, err := bc.Resource(edgev1alpha1.SyncTargetsGVR).Get(ctx, "e9", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if path, _, _ := unstructured.NestedString(st.Object, "status", "path"); path != "<none>" {
			return fmt.Errorf("path %q", path)
		}
		return nil
	})
	// The root's inventory context is the backend.
	l, err := pt.inv.Resource(edgev1alpha1.LocationsGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "zone-a" {
		t.Fatalf("Locations through the root: %v, %v", l, err)
	}

	// Back to the root's store: the copy is the space's own.
	patch(`{"spec":{"backend":"embedded"}}`)
	poll.Until(t, "the root serving the inventory from its store", func() error {
		l, err := pt.inv.Resource(edgev1alpha1.SyncTargetsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		if slices.Sort(names); !slices.Equal(names, []string{"e1", "e2", "e9"}) {
			return fmt.Errorf("SyncTargets %v", names)
		}
		if _, err := pt.inv.Resource(edgev1alpha1.LocationsGVR).Get(ctx, "zone-a", metav1.GetOptions{}); err != nil {
			return err
		}
		return bc.Resource(edgev1alpha1.LocationsGVR).Delete(ctx, "zone-a", metav1.DeleteOptions{})
	})
	// Deleted in the former backend, zone-a stays: nothing copies it now.
	poll.Holds(t, "zone-a kept at the root", 2*time.Second, func() error {
		_, err := pt.root.Store().Get(store.Key{Space: layout.InventorySpace, Resource: store.Resource{Group: edgev1alpha1.GroupName, Resource: edgev1alpha1.ResourceLocations}, Name: "zone-a"})
		return err
	})
	pt.waitInboxes(t, "e1 to keep the ConfigMap", map[string][]string{"e1": {"configmaps/team/cfg", "namespaces//team"}})
}

// A workload description space moved from the root's store to a kube
// backend (its objects copied there first, but one) and back: what was
// copied stays at the destination all along, never withdrawn and placed
// again; what was not is withdrawn; moving back withdraws nothing.
func TestSpaceMovesBetweenBackends(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}})
	backend := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	ctx := context.Background()
	sys := systemClient(t, pt.root)
	pt.apply(t, sys, spacesGVR, map[string]any{"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": "team-a"}})
	poll.True(t, "team-a served", func() bool { return pt.root.crds.ready() == nil })
	wds, err := pt.root.spaceClient("team-a")
	if err != nil {
		t.Fatal(err)
	}
	bc := dynamicFor(t, backend)
	location := map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "zone-a", "labels": map[string]any{"use": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": "a"}}}}
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, location)
	objects := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}}},
		{cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "keep", "namespace": "team"}, "data": map[string]any{"k": "v"}}},
		{edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": "team"},
			"spec": map[string]any{
				"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
				"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"team"}}},
			}}},
	}
	poll.Until(t, "the workload CRDs in team-a", func() error {
		_, err := wds.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{})
		return err
	})
	for _, o := range objects {
		pt.apply(t, wds, o.gvr, o.obj)
	}
	pt.apply(t, wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "drop", "namespace": "team"}})
	pt.waitInboxes(t, "e1 to hold keep and drop", map[string][]string{"e1": {"configmaps/team/drop", "configmaps/team/keep", "namespaces//team"}})
	keepKey := store.Key{Space: layout.InboxSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "team", Name: "keep"}
	placed, err := pt.edges["e1"].Store().Get(keepKey)
	if err != nil {
		t.Fatal(err)
	}

	// Everything but drop copied to the backend, the workload CRDs
	// first, as user-guide.md says.
	storeBackingKubeconfig(t, pt.root, t.TempDir(), "team-a", backend.Kubeconfig)
	crds, err := wds.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds.Items {
		obj := map[string]any{"apiVersion": c.GetAPIVersion(), "kind": c.GetKind(), "metadata": map[string]any{"name": c.GetName()}, "spec": c.Object["spec"]}
		pt.apply(t, bc, crdGVR, obj)
	}
	poll.Until(t, "EdgePlacements served by the backend", func() error {
		_, err := bc.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{})
		return err
	})
	for _, o := range objects {
		pt.apply(t, bc, o.gvr, o.obj)
	}
	patch := func(p string) {
		t.Helper()
		if _, err := sys.Resource(spacesGVR).Patch(ctx, "team-a", types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"backend":"kube","kubeconfigSecret":{"name":"team-a"}}}`)
	waitSpaceCondition(t, sys, "team-a", backing.ConditionReady, metav1.ConditionTrue, "")
	pt.waitInboxes(t, "e1 to hold keep only", map[string][]string{"e1": {"configmaps/team/keep", "namespaces//team"}})
	if now, err := pt.edges["e1"].Store().Get(keepKey); err != nil || now.CreateRevision != placed.CreateRevision {
		t.Fatalf("keep at e1 after the move: %v (created at %d, was %d): withdrawn and placed again", err, now.CreateRevision, placed.CreateRevision)
	}
	if l, err := wds.Resource(cmGVR).Namespace("team").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("team-a through the root after the move: %v, %v; want the backend's keep", l, err)
	}

	patch(`{"spec":{"backend":"embedded"}}`)
	poll.Until(t, "team-a served by the root again", func() error {
		sp, err := sys.Resource(spacesGVR).Get(ctx, "team-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, has := sp.Object["status"]; has {
			return fmt.Errorf("status %v kept with the embedded backend", sp.Object["status"])
		}
		_, err = wds.Resource(cmGVR).Namespace("team").Get(ctx, "keep", metav1.GetOptions{})
		return err
	})
	if err := bc.Resource(cmGVR).Namespace("team").Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Holds(t, "keep at e1, whatever the former backend does", 2*time.Second, func() error {
		now, err := pt.edges["e1"].Store().Get(keepKey)
		if err != nil || now.CreateRevision != placed.CreateRevision {
			return fmt.Errorf("keep at e1: %v", err)
		}
		return nil
	})
}
