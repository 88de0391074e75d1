package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/kubeapi"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// relay render customizes with the Location the placement selected the
// destination through, as the edge does, when the SyncTarget is in
// several: here prod, not aaa (the first by name).
func TestRenderWithTheSelectedLocation(t *testing.T) {
	dir := t.TempDir()
	root, err := server.Open(server.Config{Name: "root", DataDir: dir, APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-root.Ready()
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
	inv, wds := client(kubeapi.InventorySpace), client(kubeapi.DefaultSpace)
	create := func(c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for { // the CRDs are installed as the root starts
			if _, err = c.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
	}
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

	var out []byte
	deadline := time.Now().Add(20 * time.Second)
	for { // until the object is placed with its Location
		out, err = render(context.Background(), kubeconfig, "default", "s1", "configmaps", "shop", "web")
		if err == nil && strings.Contains(string(out), "location: prod") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !strings.Contains(string(out), "location: prod") {
		t.Fatalf("render for s1: %v\n%s\nwant location: prod", err, out)
	}
}
