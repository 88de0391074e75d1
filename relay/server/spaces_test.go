package server

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var spacesGVR = schema.GroupVersionResource{Group: "canopy.dev", Version: "v1alpha1", Resource: "spaces"}

// downsyncNames lists the names of the objects of the root's downsync
// space in namespace ns.
func downsyncNames(t *testing.T, r *Root, ns string) []string {
	t.Helper()
	lr, err := r.Store().List(store.ListOptions{Space: layout.DownsyncSpace})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range lr.Items {
		if o.Key.Namespace == ns || o.Key.Resource.Resource == "namespaces" && o.Key.Name == ns {
			out = append(out, o.Key.Resource.Resource+"/"+o.Key.Name)
		}
	}
	slices.Sort(out)
	return out
}

// A space created through the system space is a workload description
// space like the default one: it gets the workload CRDs, its placements
// reach the edges, and the admin kubeconfig gets its context; deleting it
// withdraws what it placed from the downsync space and the edges, and
// removes its objects and its context.
func TestSpaceCreatedPlacesAndDeleted(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}})
	ctx := context.Background()
	sys, err := pt.root.spaceClient(layout.SystemSpace)
	if err != nil {
		t.Fatal(err)
	}
	space := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": "team-a"}}}
	if _, err := sys.Resource(spacesGVR).Create(ctx, space, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wds, err := pt.root.spaceClient("team-a")
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the workload CRDs in the new space", func() bool {
		_, err := wds.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	poll.Until(t, "the admin kubeconfig to list system and team-a", func() error {
		_, err1 := pki.ReadKubeconfigForSpace(pt.root.KubeconfigPath(), "team-a")
		_, err2 := pki.ReadKubeconfigForSpace(pt.root.KubeconfigPath(), layout.SystemSpace)
		if err1 != nil {
			return err1
		}
		return err2
	})

	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "zone-a", "labels": map[string]any{"use": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": "a"}}}})
	pt.apply(t, wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}})
	pt.apply(t, wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "namespace": "team"}, "data": map[string]any{"k": "v"}})
	pt.apply(t, wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "team"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"team"}}},
		}})
	placed := []string{"configmaps/team/cfg", "namespaces//team"}
	pt.waitInboxes(t, "e1 to hold what team-a places", map[string][]string{"e1": placed})
	if got := downsyncNames(t, pt.root, "team"); !slices.Equal(got, []string{"configmaps/cfg", "namespaces/team"}) {
		t.Fatalf("downsync holds %v of team-a's", got)
	}

	if err := sys.Resource(spacesGVR).Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pt.waitInboxes(t, "e1 to lose what team-a placed", map[string][]string{})
	poll.True(t, "downsync without team-a's objects", func() bool { return len(downsyncNames(t, pt.root, "team")) == 0 })
	lr, err := pt.root.Store().List(store.ListOptions{Space: "team-a"})
	if err != nil || len(lr.Items) != 0 {
		var keys []string
		for _, o := range lr.Items {
			keys = append(keys, o.Key.String())
		}
		t.Errorf("the deleted space holds %v (%v)", keys, err)
	}
	if _, err := wds.Resource(cmGVR).Namespace("team").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a list in the deleted space: %v, want NotFound", err)
	}
	poll.True(t, "the admin kubeconfig to drop team-a", func() bool {
		_, err := pki.ReadKubeconfigForSpace(pt.root.KubeconfigPath(), "team-a")
		return err != nil
	})
	// The default space is untouched, and cannot be deleted.
	if err := sys.Resource(spacesGVR).Delete(ctx, layout.DefaultSpace, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete of the default space: %v, want Forbidden", err)
	}
	if _, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the default space after: %v", err)
	}
}
