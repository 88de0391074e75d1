package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// relay render customizes with the Location the placement selected the
// destination through, as the edge does, when the SyncTarget is in
// several: here prod, not aaa (the first by name).
func TestRenderWithTheSelectedLocation(t *testing.T) {
	rr := startRenderRoot(t)
	inv, wds, create := rr.inv, rr.wds, rr.create
	kubeconfig := filepath.Join(rr.dir, pki.AdminKubeconfigFile)
	create(inv, v1alpha1.SyncTargetsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget",
		"metadata": map[string]any{"name": "s1", "labels": map[string]any{"env": "prod"}}})
	for name, labels := range map[string]map[string]any{"aaa": {"first": "yes"}, "prod": {"env": "prod"}} {
		create(inv, v1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}})
	}
	create(wds, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop"}})
	create(wds, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "annotations": map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}},
		"data":     map[string]any{"location": "%(locationName)"}})
	create(wds, v1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"env": "prod"}}},
			"downsync": []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}}}}})

	poll.Until(t, "render for s1 with the Location", func() error { // once the object is placed
		out, err := render(context.Background(), kubeconfig, "default", "s1", "configmaps", "shop", "web")
		if err != nil || !strings.Contains(string(out), "location: prod") {
			return fmt.Errorf("%v\n%s\nwant location: prod", err, out)
		}
		return nil
	})
}
