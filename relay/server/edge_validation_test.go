package server

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// expr is one matchExpressions requirement, as JSON would hold it.
func expr(key, op string, values ...string) map[string]any {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	e := map[string]any{"key": key, "operator": op}
	if len(values) > 0 {
		e["values"] = vs
	}
	return map[string]any{"matchExpressions": []any{e}}
}

var goodSelector = map[string]any{"matchLabels": map[string]any{"region": "eu"}}

// badEdgeObjects are objects of edge.canopy.dev that their CRD schemas
// accept but that must be refused, by resource, with the field path the
// refusal names.
func badEdgeObjects() []struct {
	gvr   schema.GroupVersionResource
	obj   map[string]any
	field string
} {
	placement := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": "bad"}, "spec": spec}
	}
	location := func(sel map[string]any) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
			"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"instanceSelector": sel}}
	}
	customizer := func(value string) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
			"metadata":     map[string]any{"name": "bad", "namespace": "default"},
			"replacements": []any{map[string]any{"path": "/data/x", "value": value}}}
	}
	ep, loc, cust := edgev1alpha1.EdgePlacementsGVR, edgev1alpha1.LocationsGVR, edgev1alpha1.CustomizersGVR
	return []struct {
		gvr   schema.GroupVersionResource
		obj   map[string]any
		field string
	}{
		{ep, placement(map[string]any{"locationSelectors": []any{expr("region", "Bogus", "eu")}}), "spec.locationSelectors[0].matchExpressions[0].operator"},
		{ep, placement(map[string]any{"locationSelectors": []any{expr("bad key!", "Exists")}}), "spec.locationSelectors[0].matchExpressions[0].key"},
		{ep, placement(map[string]any{"locationSelectors": []any{expr("region", "In")}}), "spec.locationSelectors[0].matchExpressions[0].values"},
		{ep, placement(map[string]any{"locationSelectors": []any{goodSelector, expr("region", "Bogus", "eu")}}), "spec.locationSelectors[1].matchExpressions[0].operator"},
		{ep, placement(map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"bad key!": "x"}}}}), "spec.locationSelectors[0].matchLabels"},
		{ep, placement(map[string]any{"locationSelectors": []any{goodSelector}, "downsync": []any{
			map[string]any{"resources": []any{"configmaps"}, "namespaceSelector": expr("team", "NotIn")}}}), "spec.downsync[0].namespaceSelector.matchExpressions[0].values"},
		{ep, placement(map[string]any{"locationSelectors": []any{goodSelector}, "downsync": []any{
			map[string]any{"resources": []any{"configmaps"}},
			map[string]any{"resources": []any{"secrets"}, "labelSelectors": []any{goodSelector, expr("app", "Exists", "web")}}}}), "spec.downsync[1].labelSelectors[1].matchExpressions[0].values"},
		{ep, placement(map[string]any{"locationSelectors": []any{goodSelector}, "upsync": []any{
			map[string]any{"resources": []any{"configmaps"}, "names": []any{"up-*"}},
			map[string]any{"resources": []any{"secrets"}, "names": []any{"ok", "up-[a"}}}}), "spec.upsync[1].names[1]"},
		{loc, location(expr("zone", "Bogus", "a")), "spec.instanceSelector.matchExpressions[0].operator"},
		{loc, location(expr("bad key!", "Exists")), "spec.instanceSelector.matchExpressions[0].key"},
		{loc, location(expr("zone", "In")), "spec.instanceSelector.matchExpressions[0].values"},
		{cust, customizer(`"eu-%(zone"`), "replacements[0].value"},
		{cust, customizer(`eu`), "replacements[0].value"},
	}
}

// validateEdgeKinds refuses each bad object, naming its field.
func TestValidateEdgeKinds(t *testing.T) {
	for _, b := range badEdgeObjects() {
		errs := validateEdgeKinds("default", b.gvr.GroupResource(), &unstructured.Unstructured{Object: b.obj}, nil)
		if len(errs) != 1 || errs[0].Field != b.field {
			t.Errorf("%s %v: %v, want one error at %s", b.gvr.Resource, b.obj, errs, b.field)
		}
	}
}

// Through the root's API: every bad selector of an EdgePlacement or a
// Location, and a Customizer whose template is malformed, is refused with
// 422 naming the field, on create and on update, and nothing is stored;
// valid ones are stored.
func TestEdgeSelectorsAreValidated(t *testing.T) {
	r := startTestRoot(t)
	poll.True(t, "the CRDs", func() bool { return r.crds.ready() == nil })
	clients := map[string]dynamic.Interface{}
	for _, sp := range []string{layout.DefaultSpace, layout.InventorySpace} {
		c, err := r.spaceClient(sp)
		if err != nil {
			t.Fatal(err)
		}
		clients[sp] = c
	}
	client := func(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
		c := clients[layout.DefaultSpace]
		if gvr == edgev1alpha1.LocationsGVR {
			c = clients[layout.InventorySpace]
		}
		if ns != "" {
			return c.Resource(gvr).Namespace(ns)
		}
		return c.Resource(gvr)
	}
	ctx := context.Background()
	for _, b := range badEdgeObjects() {
		u := &unstructured.Unstructured{Object: b.obj}
		ri := client(b.gvr, u.GetNamespace())
		_, err := ri.Create(ctx, u, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), b.field) {
			t.Errorf("create %s %v: %v, want 422 naming %s", b.gvr.Resource, b.obj, err, b.field)
		}
		if _, err := ri.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused %s was stored: %v", b.gvr.Resource, err)
		}
	}

	// Valid objects are stored; turning them bad by an update is refused.
	good := map[schema.GroupVersionResource]map[string]any{
		edgev1alpha1.EdgePlacementsGVR: {"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": "bad"},
			"spec": map[string]any{"locationSelectors": []any{goodSelector, expr("tier", "NotIn", "test")}, "downsync": []any{
				map[string]any{"resources": []any{"configmaps"}, "namespaceSelector": expr("team", "Exists"),
					"labelSelectors": []any{expr("app", "In", "web", "db")}}},
				"upsync": []any{map[string]any{"resources": []any{"configmaps"}, "names": []any{"up-*", "db-?", "[ab]-x", "exact", "*"}}}}},
		edgev1alpha1.LocationsGVR: {"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
			"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"instanceSelector": expr("zone", "DoesNotExist")}},
		edgev1alpha1.CustomizersGVR: {"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
			"metadata":     map[string]any{"name": "bad", "namespace": "default"},
			"replacements": []any{map[string]any{"path": "/data/x", "value": `"eu-%(zone)"`}}},
	}
	for gvr, obj := range good {
		u := &unstructured.Unstructured{Object: obj}
		if _, err := client(gvr, u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a valid %s: %v", gvr.Resource, err)
		}
	}
	for _, b := range badEdgeObjects() {
		u := &unstructured.Unstructured{Object: b.obj}
		ri := client(b.gvr, u.GetNamespace())
		// (The root writes a placement's status meanwhile: read again on
		// a conflict.)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := ri.Get(ctx, "bad", metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
			return err
		})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), b.field) {
			t.Errorf("update %s %v: %v, want 422 naming %s", b.gvr.Resource, b.obj, err, b.field)
		}
	}
}
