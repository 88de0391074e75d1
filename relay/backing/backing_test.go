package backing_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/inproc"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var (
	cmGVR    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	epGVR    = schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: v1alpha1.Version, Resource: v1alpha1.ResourceEdgePlacements}
	spaceGVR = schema.GroupVersionResource{Group: "canopy.dev", Version: "v1alpha1", Resource: "spaces"}
)

// adminClient is a dynamic client of the root's space as its admin.
func adminClient(t *testing.T, server, token string, ca []byte, space string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(&rest.Config{Host: server + "/spaces/" + space, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCopyAndWriteBack backs a space with a real kube-apiserver: the
// workload CRDs are installed there, a placement's objects are copied
// into the root's store (and nothing that no clause names), the root's
// /spaces/<name>/ answers from the backend, and what Canopy writes into
// the space (here an EdgePlacement's status) goes back to the backend.
func TestCopyAndWriteBack(t *testing.T) {
	backend := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	root := inproc.StartRoot(t, "root", t.TempDir(), nil)
	ctx := context.Background()
	kc, err := os.ReadFile(backend.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	token, ca := rootCredentials(t, root.KubeconfigPath())
	system := adminClient(t, root.Server(), token, ca, layout.SystemSpace)
	if _, err := system.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(layout.SystemSecretsNamespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "backend"},
		"stringData": map[string]any{"kubeconfig": string(kc)}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := system.Resource(spaceGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": "team"},
		"spec": map[string]any{"kind": "wds", "backend": "kube", "kubeconfigSecret": map[string]any{"name": "backend"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the space Ready", func() error { return condition(ctx, system, "team", "Ready", "True") })
	poll.Until(t, "the space Reachable", func() error { return condition(ctx, system, "team", "Reachable", "True") })

	bc, err := dynamic.NewForConfig(backend.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	create := func(gvr schema.GroupVersionResource, ns string, obj map[string]any) {
		t.Helper()
		if _, err := bc.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(nsGVR, "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	create(cmGVR, "shop", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings"}, "data": map[string]any{"color": "blue"}})
	create(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "shop", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "unnamed"}})
	create(epGVR, "", map[string]any{"apiVersion": v1alpha1.GroupName + "/" + v1alpha1.Version, "kind": "EdgePlacement", "metadata": map[string]any{"name": "fleet"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"env": "prod"}}},
			"downsync": []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}}}}})

	st := root.Store()
	key := store.Key{Space: "team", Resource: store.Resource{Resource: "configmaps"}, Namespace: "shop", Name: "settings"}
	poll.Until(t, "the ConfigMap copied into the space", func() error {
		o, err := st.Get(key)
		if err != nil {
			return err
		}
		if !strings.Contains(string(o.Data), `"color":"blue"`) {
			return fmt.Errorf("copy %s", o.Data)
		}
		return nil
	})
	if _, err := st.Get(store.Key{Space: "team", Resource: store.Resource{Resource: "secrets"}, Namespace: "shop", Name: "unnamed"}); err == nil {
		t.Fatal("a Secret no downsync clause names was copied")
	}
	// A change and a deletion in the backend follow.
	if _, err := bc.Resource(cmGVR).Namespace("shop").Patch(ctx, "settings", "application/merge-patch+json", []byte(`{"data":{"color":"red"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the change copied", func() error {
		o, err := st.Get(key)
		if err != nil || !strings.Contains(string(o.Data), `"color":"red"`) {
			return fmt.Errorf("%v", err)
		}
		return nil
	})

	// The root's /spaces/team/ is the backend.
	team := adminClient(t, root.Server(), token, ca, "team")
	l, err := team.Resource(cmGVR).Namespace("shop").List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "settings" {
		t.Fatalf("configmaps through the root: %v, %v", l, err)
	}

	// Placement writes the EdgePlacement's status (no destination
	// matched); it reaches the backend.
	poll.Until(t, "the EdgePlacement's status in the backend", func() error {
		ep, err := bc.Resource(epGVR).Get(ctx, "fleet", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(ep.Object, "status", "conditions")
		if len(conds) == 0 {
			return fmt.Errorf("no conditions: %v", ep.Object["status"])
		}
		return nil
	})

	if err := bc.Resource(cmGVR).Namespace("shop").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the deletion copied", func() error {
		if _, err := st.Get(key); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// condition checks a Space's condition.
func condition(ctx context.Context, system dynamic.Interface, space, typ, status string) error {
	sp, err := system.Resource(spaceGVR).Get(ctx, space, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(sp.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			if m["status"] != status {
				return fmt.Errorf("%s %s: %s", typ, m["status"], m["message"])
			}
			return nil
		}
	}
	return fmt.Errorf("no %s condition: %v", typ, conds)
}

// rootCredentials reads the admin token and CA of a root's kubeconfig.
func rootCredentials(t *testing.T, path string) (string, []byte) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return rc.BearerToken, rc.CAData
}
