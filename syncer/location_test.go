package syncer

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// An object customized through another Location than the SyncTarget's
// own (v1alpha1.LocationOverridesAnnotation) takes that Location's
// parameters; the others, and destinations it does not name, take the
// SyncTarget's Location. The annotation does not reach the cluster.
func TestDesiredLocationOverride(t *testing.T) {
	cm := func(name string, ann map[string]any) map[string]any {
		a := map[string]any{v1alpha1.ExpandParametersAnnotation: "true", v1alpha1.DestinationsAnnotation: "store-1,store-2"}
		for k, v := range ann {
			a[k] = v
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop", "annotations": a},
			"data":     map[string]any{"location": "%(locationName)", "region": "%(region)"}}
	}
	inbox := storesInbox(t,
		inboxObject(t, resLocations, locationObj("region-1", map[string]any{"region": "one"})),
		inboxObject(t, resConfigMaps, cm("own", nil)),
		inboxObject(t, resConfigMaps, cm("other", map[string]any{v1alpha1.LocationOverridesAnnotation: "store-2=region-1"})),
	)
	want := map[string]map[string]string{
		"store-1": {"own": "stores/eu", "other": "stores/eu"},
		"store-2": {"own": "stores/eu", "other": "region-1/one"},
	}
	for self, w := range want {
		out, errs := Desired(inbox, self)
		if len(errs) > 0 || len(out) != 2 {
			t.Fatalf("%s: %d objects, errors %v", self, len(out), errs)
		}
		for _, d := range out {
			data, _, _ := unstructured.NestedStringMap(d.Object.Object, "data")
			if got := data["location"] + "/" + data["region"]; got != w[d.Object.GetName()] {
				t.Errorf("%s: %s customized with %s, want %s", self, d.Object.GetName(), got, w[d.Object.GetName()])
			}
			if _, ok := d.Object.GetAnnotations()[v1alpha1.LocationOverridesAnnotation]; ok {
				t.Errorf("%s: the location overrides annotation reached the cluster", self)
			}
		}
	}
}
