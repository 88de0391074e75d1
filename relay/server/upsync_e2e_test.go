package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/placement"
)

// Through the tree: a ConfigMap created in an edge's cluster that the
// placement's upsync clause names (up-*) appears in the workload space
// the placement is in, annotated with its destination; the same one
// created at a second edge is a conflict the placement reports, the first
// destination by name keeping its version.
func TestUpsyncReachesTheWorkloadSpace(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"shop": "yes"}, "e2": {"shop": "yes"}})
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "shops", "labels": map[string]any{"shops": "all"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"shop": "yes"}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"}, "data": map[string]any{"k": "v"}})
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"shops": "all"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}}},
			"upsync":            []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}, "names": []any{"up-*"}}},
		}})
	ctx := context.Background()
	create := func(edge, name, value string) {
		t.Helper()
		c, err := dynamic.NewForConfig(pt.edges[edge].cluster.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the namespace at "+edge, func() error {
			_, err := c.Resource(nsGVR).Get(ctx, "shop", metav1.GetOptions{})
			return err
		})
		if _, err := c.Resource(cmGVR).Namespace("shop").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "shop"},
			"data": map[string]any{"k": value}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	upsynced := func(what, want string) {
		t.Helper()
		poll.Until(t, what, func() error {
			cm, err := pt.wds.Resource(cmGVR).Namespace("shop").Get(ctx, "up-1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			v, _, _ := unstructured.NestedString(cm.Object, "data", "k")
			got := v + "@" + cm.GetAnnotations()["edge.canopy.dev/destination"]
			if got != want || cm.GetLabels()[edgev1alpha1.UpsyncedLabel] != "true" {
				return fmt.Errorf("%s, labels %v", got, cm.GetLabels())
			}
			return nil
		})
	}
	create("e2", "up-1", "from e2")
	create("e2", "down-1", "never")
	upsynced("e2's up-1 in the workload space", "from e2@e2")
	create("e1", "up-1", "from e1")
	upsynced("e1's up-1 kept", "from e1@e1")
	poll.Until(t, "the conflict in the placement's status", func() error {
		p, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == placement.ConditionUpsynced {
				if msg := fmt.Sprint(m["message"]); m["status"] != "False" || !strings.Contains(msg, "configmaps shop/up-1 upsynced by e1, e2; e1's is kept") {
					return fmt.Errorf("%s: %s", m["status"], msg)
				}
				return nil
			}
		}
		return fmt.Errorf("no %s condition in %v", placement.ConditionUpsynced, conds)
	})
	if _, err := pt.wds.Resource(cmGVR).Namespace("shop").Get(ctx, "down-1", metav1.GetOptions{}); err == nil {
		t.Fatal("down-1, which the clause does not name, reached the workload space")
	}
}
