package deploy

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/canopy-dev/canopy/test/kubecluster"
)

// TestRenderingsApplyDryRun applies every rendering of the chart and every
// overlay to a real kube-apiserver with server-side dry run: each object
// is valid for the API (schema, defaults, validation), not only YAML.
func TestRenderingsApplyDryRun(t *testing.T) {
	c := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	cs := c.Clientset(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, mapper := dynamicClient(t, c)
	for _, tc := range chartCases {
		t.Run("helm/"+tc.name, func(t *testing.T) {
			manifest, err := renderChart(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			applyAll(t, ctx, dyn, mapper, objects(t, manifest), true)
		})
	}
	for _, o := range overlays {
		t.Run("kustomize/"+o.name, func(t *testing.T) {
			objs := objects(t, buildOverlay(t, filepath.Join(kustomizeDir(t), "overlays", o.name)))
			applyAll(t, ctx, dyn, mapper, objs, true)
		})
	}
}

func dynamicClient(t testing.TB, c *kubecluster.Cluster) (dynamic.Interface, meta.RESTMapper) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
}

// applyAll server-side applies objs (into namespace canopy when
// namespaced), with dry run or for real.
func applyAll(t testing.TB, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	opts := metav1.ApplyOptions{FieldManager: "deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		r := dyn.Resource(m.Resource)
		var ri dynamic.ResourceInterface = r
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			ri = r.Namespace(ns)
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, opts); err != nil {
			t.Errorf("applying %s %s (dry run %v): %v", o.GetKind(), o.GetName(), dryRun, err)
		}
	}
}
