package server

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// An edge in two Locations, red and region-1, customizes what each
// placement places with the Location that placement selected it through:
// %(locationName) expands to region-1 in what a placement selecting
// region-1 places, and to red in what one selecting red places, on the
// same cluster.
func TestCustomizationWithTheSelectedLocation(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"shop": "yes"}})
	for name, labels := range map[string]map[string]any{"red": {"color": "red"}, "region-1": {"region": "1"}} {
		pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"shop": "yes"}}}})
	}
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	for _, name := range []string{"by-region", "by-color"} {
		pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop",
				"annotations": map[string]any{edgev1alpha1.ExpandParametersAnnotation: "true"}},
			"data": map[string]any{"location": "%(locationName)"}})
	}
	for name, sel := range map[string]map[string]any{"by-region": {"region": "1"}, "by-color": {"color": "red"}} {
		pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"locationSelectors": []any{map[string]any{"matchLabels": sel}},
				"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}, "objectNames": []any{name}}},
			}})
	}
	c, err := dynamic.NewForConfig(pt.edges["e1"].cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "each ConfigMap customized with its placement's Location", func() error {
		got := map[string]string{}
		for _, name := range []string{"by-region", "by-color"} {
			cm, err := c.Resource(cmGVR).Namespace("shop").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			got[name], _, _ = unstructured.NestedString(cm.Object, "data", "location")
		}
		if got["by-region"] != "region-1" || got["by-color"] != "red" {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}
