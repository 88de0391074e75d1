package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/inproc"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// renderRoot is a root in this process, for relay render's tests: its
// data directory, and clients of its inventory and default spaces.
type renderRoot struct {
	t        *testing.T
	dir      string
	inv, wds dynamic.Interface
}

func startRenderRoot(t *testing.T) *renderRoot {
	t.Helper()
	dir := t.TempDir()
	inproc.StartRoot(t, "root", dir, nil)
	kubeconfig := filepath.Join(dir, pki.AdminKubeconfigFile)
	client := func(space string) dynamic.Interface {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: space})
		rc, err := cc.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		return dynamic.NewForConfigOrDie(rc)
	}
	return &renderRoot{t: t, dir: dir, inv: client(layout.InventorySpace), wds: client(layout.DefaultSpace)}
}

// create creates obj through c, waiting for its CRD to be served.
func (r *renderRoot) create(c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	r.t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	poll.Until(r.t, "create "+u.GetName(), func() error { // the CRDs are installed as the root starts
		_, err := c.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	})
}

// relay render shows, for each destination, the object as its edge will
// apply it: customized with that destination's parameters and Customizer,
// and a missing parameter as the edge would report it.
func TestRender(t *testing.T) {
	rr := startRenderRoot(t)
	inv, wds, create := rr.inv, rr.wds, rr.create
	kubeconfig := filepath.Join(rr.dir, pki.AdminKubeconfigFile)
	for name, replicas := range map[string]string{"store-1": "1", "store-2": "3", "bare": ""} {
		labels := map[string]any{"env": "prod"}
		if replicas != "" {
			labels["replicas"] = replicas
		}
		create(inv, v1alpha1.SyncTargetsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget",
			"metadata": map[string]any{"name": name, "labels": labels}})
	}
	create(inv, v1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "prod", "labels": map[string]any{"env": "prod"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}})
	create(wds, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop"}})
	create(wds, v1alpha1.CustomizersGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
		"metadata":     map[string]any{"name": "per-store", "namespace": "shop"},
		"replacements": []any{map[string]any{"path": "/data/replicas", "value": `"%(replicas)"`}}})
	create(wds, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "annotations": map[string]any{v1alpha1.CustomizerAnnotation: "per-store"}},
		"data":     map[string]any{"replicas": "template"}})
	create(wds, v1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"env": "prod"}}},
			"downsync": []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}}}}})

	var out []byte
	poll.Until(t, "render for store-2", func() (err error) {
		out, err = render(context.Background(), kubeconfig, "default", "store-2", "configmaps", "shop", "web")
		return err
	})
	if !strings.Contains(string(out), `replicas: "3"`) || strings.Contains(string(out), "edge.canopy.dev/") {
		t.Fatalf("render for store-2:\n%s\nwant replicas 3 and no Canopy annotations", out)
	}
	if _, err := render(context.Background(), kubeconfig, "default", "bare", "configmaps", "shop", "web"); err == nil || !strings.Contains(err.Error(), `"replicas"`) {
		t.Fatalf("render for a destination without the parameter: %v, want the missing parameter named", err)
	}
	if _, err := render(context.Background(), kubeconfig, "default", "nowhere", "configmaps", "shop", "web"); err == nil || !strings.Contains(err.Error(), "not placed on nowhere") {
		t.Fatalf("render for a destination the object is not placed on: %v", err)
	}
}
