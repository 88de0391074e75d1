package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/test/poll"
)

// TestClientGo drives one in-process root with client-go: typed, dynamic,
// informers, watches and lists. Subtests use their own namespaces and run in
// parallel.
func TestClientGo(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	runRootTests(t, r, []rootTest{
		{"configmap-crud", testConfigMapCRUD},
		{"deployment-status-scale", testDeploymentStatusScale},
		{"conflict", testConflict},
		{"dynamic-crd", testDynamicCRD},
		{"informer", testInformer},
		{"watch-resume", testWatchResume},
		{"paged-list", testPagedList},
		{"watch-list", testWatchList},
		{"watch-bad-resource-version", testWatchBadResourceVersion},
		{"gc-background", testGCBackground},
		{"gc-orphan", testGCOrphan},
		{"gc-foreground", testGCForeground},
		{"client-certificate", testClientCertificate},
	})
}

func testConfigMapCRUD(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-crud"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)

	created, err := cms.Create(ctx, configMap(ns, "c1", map[string]string{"app": "x"}, map[string]string{"a": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() || created.Namespace != ns {
		t.Errorf("create: missing server-set metadata: %+v", created.ObjectMeta)
	}
	if _, err := cms.Create(ctx, configMap(ns, "c1", nil, nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: want AlreadyExists, got %v", err)
	}
	got, err := cms.Get(ctx, "c1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion || got.Data["a"] != "1" {
		t.Errorf("get: %+v, created %+v", got, created)
	}
	got.Data["b"] = "2"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion || updated.UID != created.UID || updated.Data["b"] != "2" {
		t.Errorf("update: %+v", updated)
	}
	if !updated.CreationTimestamp.Equal(&created.CreationTimestamp) {
		t.Errorf("update changed creationTimestamp")
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "c1" || list.ResourceVersion == "" {
		t.Errorf("list: %d items, rv %q", len(list.Items), list.ResourceVersion)
	}
	if l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=y"}); err != nil || len(l.Items) != 0 {
		t.Errorf("list with a non-matching selector: %v %v", l, err)
	}
	// A delete with a stale uid precondition is refused.
	if err := cms.Delete(ctx, "c1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("not-the-uid"))}}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong uid precondition: want Conflict, got %v", err)
	}
	if err := cms.Delete(ctx, "c1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID, ResourceVersion: &updated.ResourceVersion}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cms.Get(ctx, "c1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: want NotFound, got %v", err)
	}
	if err := cms.Delete(ctx, "c1", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: want NotFound, got %v", err)
	}
	// Re-created under the same name it is a new object.
	again, err := cms.Create(ctx, configMap(ns, "c1", nil, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.UID == created.UID {
		t.Errorf("re-created object kept the old uid")
	}

	// deletecollection with a label selector.
	for i := range 3 {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("batch-%d", i), map[string]string{"batch": "yes"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=yes"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "c1" {
		t.Errorf("after deletecollection: %d items", len(l.Items))
	}
}

func testDeploymentStatusScale(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-deploy"
	createNamespace(t, cs, ns)
	deps := cs.AppsV1().Deployments(ns)

	d := deployment(ns, "d1", 2)
	d.Status.Replicas = 7 // ignored on create
	d, err := deps.Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 || d.Status.Replicas != 0 {
		t.Errorf("create: generation %d status.replicas %d, want 1 and 0", d.Generation, d.Status.Replicas)
	}
	// Defaults of apps/v1 Deployment.
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 10 ||
		d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("create: deployment defaults not applied: strategy %q revisionHistoryLimit %v progressDeadlineSeconds %v",
			d.Spec.Strategy.Type, d.Spec.RevisionHistoryLimit, d.Spec.ProgressDeadlineSeconds)
	}

	// Metadata-only update: generation stays.
	d.Labels["extra"] = "1"
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 {
		t.Errorf("label update bumped generation to %d", d.Generation)
	}

	// Status through the status subresource; spec changes there are ignored.
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2, ObservedGeneration: 1}
	d.Spec.Replicas = ptr.To[int32](9)
	if d, err = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	if d.Status.ReadyReplicas != 2 || *d.Spec.Replicas != 2 || d.Generation != 1 {
		t.Errorf("update status: status.readyReplicas %d spec.replicas %d generation %d, want 2, 2, 1", d.Status.ReadyReplicas, *d.Spec.Replicas, d.Generation)
	}

	// Spec through the main resource; status changes there are ignored.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
	d.Status.ReadyReplicas = 99
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 || d.Status.ReadyReplicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.26" {
		t.Errorf("spec update: generation %d status.readyReplicas %d image %s, want 2, 2, nginx:1.26", d.Generation, d.Status.ReadyReplicas, d.Spec.Template.Spec.Containers[0].Image)
	}

	// Scale subresource.
	sc, err := deps.GetScale(ctx, "d1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 2 || sc.Status.Selector != "app=d1" || sc.Name != "d1" || sc.Namespace != ns {
		t.Errorf("get scale: %+v", sc)
	}
	sc = &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d1", Namespace: ns, ResourceVersion: sc.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if sc, err = deps.UpdateScale(ctx, "d1", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	if sc.Spec.Replicas != 5 {
		t.Errorf("update scale returned spec.replicas %d", sc.Spec.Replicas)
	}
	if d, err = deps.Get(ctx, "d1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 5 || d.Generation != 3 {
		t.Errorf("after scale: spec.replicas %d generation %d, want 5 and 3", *d.Spec.Replicas, d.Generation)
	}
	// A scale with a stale resourceVersion conflicts.
	stale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d1", Namespace: ns, ResourceVersion: sc.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "d1", types.MergePatchType, []byte(`{"metadata":{"labels":{"bump":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.UpdateScale(ctx, "d1", stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update scale with a stale resourceVersion: want Conflict, got %v", err)
	}
	// Scale of a missing deployment.
	if _, err := deps.GetScale(ctx, "nosuch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get scale of a missing deployment: want NotFound, got %v", err)
	}

	if err := deps.Delete(ctx, "d1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.Get(ctx, "d1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: want NotFound, got %v", err)
	}
}

func testConflict(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-conflict"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	orig, err := cms.Create(ctx, configMap(ns, "c", nil, map[string]string{"v": "0"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := orig.DeepCopy()
	first.Data["v"] = "1"
	if _, err := cms.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := orig.DeepCopy()
	stale.Data["v"] = "stale"
	_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: want Conflict, got %v", err)
	}
	got, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["v"] != "1" {
		t.Errorf("after the refused update: v=%q, want 1", got.Data["v"])
	}
	// Concurrent read-modify-write with retries: no update is lost.
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					c, err := cms.Get(ctx, "c", metav1.GetOptions{})
					if err != nil {
						t.Error(err)
						return
					}
					n, _ := strconv.Atoi(c.Data["n"])
					c.Data["n"] = strconv.Itoa(n + 1)
					c.Data[fmt.Sprintf("w%d", w)] = strconv.Itoa(i)
					if _, err = cms.Update(ctx, c, metav1.UpdateOptions{}); err == nil {
						break
					} else if !apierrors.IsConflict(err) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got, err = cms.Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.Data["n"] != strconv.Itoa(writers*each) {
		t.Errorf("optimistic concurrency lost updates: n=%s, want %d", got.Data["n"], writers*each)
	}
}

// gadgetCRD is a cluster-scoped CRD with a status subresource.
func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.e2e.canopy.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "e2e.canopy.dev",
			Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"count"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"count": {Type: "integer", Minimum: ptr.To(0.0)},
							"mode":  {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"fast"`)}, {Raw: []byte(`"slow"`)}}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"seen": {Type: "integer"},
						}},
					},
				}},
			}},
		},
	}
}

func testDynamicCRD(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ext, err := apiextensionsclient.NewForConfig(r.restConfig(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gadgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	poll.Until(t, "the gadgets CRD Established", func() error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets.e2e.canopy.dev", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established: %+v", crd.Status.Conditions)
	})
	res, err := cs.Discovery().ServerResourcesForGroupVersion("e2e.canopy.dev/v1")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var names []string
	for _, rs := range res.APIResources {
		names = append(names, rs.Name)
		if rs.Name == "gadgets" && (rs.Namespaced || rs.Kind != "Gadget") {
			t.Errorf("discovery of gadgets: %+v", rs)
		}
	}
	if !slices.Contains(names, "gadgets") || !slices.Contains(names, "gadgets/status") {
		t.Errorf("discovery of e2e.canopy.dev/v1: %v", names)
	}

	dc := r.dynamicClient(t, "default")
	gvr := schema.GroupVersionResource{Group: "e2e.canopy.dev", Version: "v1", Resource: "gadgets"}
	gadgets := dc.Resource(gvr)
	obj := func(name string, count int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.canopy.dev/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"count": count, "mode": "fast"},
		}}
	}
	g, err := gadgets.Create(ctx, obj("g1", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create gadget: %v", err)
	}
	if g.GetUID() == "" || g.GetGeneration() != 1 || g.GetNamespace() != "" {
		t.Errorf("create gadget: uid %q generation %d namespace %q", g.GetUID(), g.GetGeneration(), g.GetNamespace())
	}
	// Validation against the schema.
	for name, bad := range map[string]*unstructured.Unstructured{
		"negative": obj("bad1", -1),
		"missing":  {Object: map[string]any{"apiVersion": "e2e.canopy.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "bad2"}, "spec": map[string]any{}}},
		"enum":     {Object: map[string]any{"apiVersion": "e2e.canopy.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "bad3"}, "spec": map[string]any{"count": int64(1), "mode": "warp"}}},
	} {
		if _, err := gadgets.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("invalid gadget (%s): want Invalid, got %v", name, err)
		}
	}

	// Main resource ignores status, status subresource ignores spec.
	_ = unstructured.SetNestedField(g.Object, int64(2), "spec", "count")
	_ = unstructured.SetNestedField(g.Object, int64(5), "status", "seen")
	if g, err = gadgets.Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update gadget: %v", err)
	}
	if n, _, _ := unstructured.NestedInt64(g.Object, "spec", "count"); n != 2 || g.GetGeneration() != 2 {
		t.Errorf("update: spec.count %d generation %d, want 2 and 2", n, g.GetGeneration())
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(g.Object, "status", "seen"); found {
		t.Errorf("update of the main resource wrote status")
	}
	_ = unstructured.SetNestedField(g.Object, int64(5), "status", "seen")
	_ = unstructured.SetNestedField(g.Object, int64(99), "spec", "count")
	if g, err = gadgets.UpdateStatus(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update gadget status: %v", err)
	}
	if n, _, _ := unstructured.NestedInt64(g.Object, "spec", "count"); n != 2 {
		t.Errorf("update status wrote spec.count=%d", n)
	}
	if n, _, _ := unstructured.NestedInt64(g.Object, "status", "seen"); n != 5 || g.GetGeneration() != 2 {
		t.Errorf("update status: status.seen %d generation %d, want 5 and 2", n, g.GetGeneration())
	}

	// Patches: merge and JSON work; strategic merge is 415 for custom resources.
	if g, err = gadgets.Patch(ctx, "g1", types.MergePatchType, []byte(`{"spec":{"mode":"slow"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if m, _, _ := unstructured.NestedString(g.Object, "spec", "mode"); m != "slow" {
		t.Errorf("merge patch: mode %q", m)
	}
	if g, err = gadgets.Patch(ctx, "g1", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/count","value":3}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("json patch: %v", err)
	}
	if c, _, _ := unstructured.NestedInt64(g.Object, "spec", "count"); c != 3 {
		t.Errorf("json patch: count %d, want 3", c)
	}
	if _, err := gadgets.Patch(ctx, "g1", types.StrategicMergePatchType, []byte(`{"spec":{"count":4}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch of a custom resource: want 415, got %v", err)
	}
	if _, err := gadgets.Patch(ctx, "g1", types.MergePatchType, []byte(`{"spec":{"count":-5}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("patch to an invalid object: want Invalid, got %v", err)
	}

	if _, err := gadgets.Create(ctx, obj("g2", 7), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := gadgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.GetName())
	}
	if !slices.Equal(got, []string{"g1", "g2"}) || list.GetKind() != "GadgetList" {
		t.Errorf("list gadgets: kind %q names %v", list.GetKind(), got)
	}
	if n, _, _ := unstructured.NestedInt64(list.Items[0].Object, "spec", "count"); n != 3 {
		t.Errorf("listed g1: spec.count %d, want 3", n)
	}
	if err := gadgets.Delete(ctx, "g2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gadgets.Get(ctx, "g2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get deleted gadget: %v", err)
	}

	// Deleting the CRD deletes its objects and stops serving it.
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "gadgets.e2e.canopy.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the gadgets gone with their CRD", func() error {
		_, err := gadgets.List(ctx, metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("list gadgets after CRD deletion: %v", err)
		}
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets.e2e.canopy.dev", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD still there: %v", err)
		}
		return nil
	})
}

func testInformer(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := "cg-informer"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, configMap(ns, "pre", nil, map[string]string{"v": "0"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	events := make(chan string, 100)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			cm := obj.(*corev1.ConfigMap)
			events <- "add " + cm.Name + " " + cm.Data["v"]
		},
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.ConfigMap), obj.(*corev1.ConfigMap)
			if o.ResourceVersion == n.ResourceVersion {
				return // resync
			}
			events <- "update " + n.Name + " " + o.Data["v"] + "->" + n.Data["v"]
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			events <- "delete " + obj.(*corev1.ConfigMap).Name
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop on ctx
		factory.Shutdown()
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
	defer syncCancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("informer cache for %v did not sync", typ)
		}
	}
	if cm, err := inf.Lister().ConfigMaps(ns).Get("pre"); err != nil || cm.Data["v"] != "0" {
		t.Errorf("lister after sync: %v %v", cm, err)
	}

	live, err := cms.Create(ctx, configMap(ns, "live", nil, map[string]string{"v": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Data["v"] = "2"
	if _, err := cms.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pre, err := cms.Get(ctx, "pre", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pre.Data["v"] = "9"
	if _, err := cms.Update(ctx, pre, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []string{"add pre 0", "add live 1", "update live 1->2", "delete live", "update pre 0->9"}
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-events:
			got = append(got, e)
		case <-timeout:
			t.Fatalf("informer events: got %q, want %q", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("informer events: got %q, want %q", got, want)
	}
	poll.Until(t, "the informer to see live deleted", func() error {
		if _, err := inf.Lister().ConfigMaps(ns).Get("live"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("lister still has live: %v", err)
		}
		return nil
	})
}

// nextEvent reads one event from w or fails after timeout.
func nextEvent(t *testing.T, w watch.Interface, timeout time.Duration) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no watch event within %v", timeout)
	}
	panic("unreachable")
}

func testWatchResume(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-watch"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	c, err := cms.Create(ctx, configMap(ns, "r", nil, map[string]string{"v": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv1 := c.ResourceVersion
	var rvs []string
	for _, v := range []string{"2", "3"} {
		c.Data["v"] = v
		if c, err = cms.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, c.ResourceVersion)
	}

	// From rv1: the two later versions, in order, and then a live delete.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv1, FieldSelector: "metadata.name=r"})
	if err != nil {
		t.Fatalf("watch from %s: %v", rv1, err)
	}
	defer w.Stop()
	for i, v := range []string{"2", "3"} {
		ev := nextEvent(t, w, 10*time.Second)
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Modified || !ok || cm.Data["v"] != v || cm.ResourceVersion != rvs[i] {
			t.Fatalf("replayed event %d: %s %+v, want MODIFIED v=%s rv=%s", i, ev.Type, ev.Object, v, rvs[i])
		}
	}
	if err := cms.Delete(ctx, "r", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w, 10*time.Second); ev.Type != watch.Deleted || ev.Object.(*corev1.ConfigMap).Name != "r" {
		t.Errorf("live event: %s %+v, want DELETED r", ev.Type, ev.Object)
	}

	// A label-selected watch sees an object leave the selection as
	// DELETED and enter it as ADDED.
	if _, err := cms.Create(ctx, configMap(ns, "sel", map[string]string{"pick": "yes"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ls, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "pick=yes"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "pick=yes", ResourceVersion: ls.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	for _, step := range []struct {
		label string
		want  watch.EventType
	}{{"no", watch.Deleted}, {"yes", watch.Added}} {
		if _, err := cms.Patch(ctx, "sel", types.MergePatchType, []byte(`{"metadata":{"labels":{"pick":"`+step.label+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, ws, 10*time.Second); ev.Type != step.want || ev.Object.(*corev1.ConfigMap).Name != "sel" {
			t.Errorf("label pick=%s under a pick=yes watch: %s %+v, want %s", step.label, ev.Type, ev.Object, step.want)
		}
	}
	if err := cms.Delete(ctx, "sel", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// From "0": the current state as ADDED events first.
	if _, err := cms.Create(ctx, configMap(ns, "z", nil, map[string]string{"v": "z"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w0, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("watch from 0: %v", err)
	}
	defer w0.Stop()
	if ev := nextEvent(t, w0, 10*time.Second); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "z" {
		t.Errorf("watch from 0: first event %s %+v, want ADDED z", ev.Type, ev.Object)
	}

	// From a list's resourceVersion: only what happens afterwards.
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	if _, err := cms.Create(ctx, configMap(ns, "after", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, wl, 10*time.Second); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "after" {
		t.Errorf("watch from the list's resourceVersion: first event %s %+v, want ADDED after", ev.Type, ev.Object)
	}
}

func testPagedList(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-paged"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	const total = 250
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%03d", i), nil, map[string]string{"i": strconv.Itoa(i)}), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		return
	}

	var names []string
	var listRV string
	opts := metav1.ListOptions{Limit: 100}
	for page := 0; ; page++ {
		l, err := cms.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if page == 0 {
			listRV = l.ResourceVersion
			if l.RemainingItemCount == nil || *l.RemainingItemCount != total-100 {
				t.Errorf("first page: remainingItemCount %v, want %d", l.RemainingItemCount, total-100)
			}
			// Changes after the first page are not in later pages: the
			// pages are one snapshot.
			if _, err := cms.Create(ctx, configMap(ns, "zz-late", nil, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := cms.Delete(ctx, "cm-249", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if l.ResourceVersion != listRV {
			t.Errorf("page %d: resourceVersion %s, first page had %s", page, l.ResourceVersion, listRV)
		}
		if want := min(100, total-100*page); len(l.Items) != want {
			t.Errorf("page %d: %d items, want %d", page, len(l.Items), want)
		}
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		if l.Continue == "" {
			break
		}
		if page > 5 {
			t.Fatalf("more pages than expected")
		}
		opts.Continue = l.Continue
	}
	if len(names) != total || !sort.StringsAreSorted(names) || slices.Contains(names, "zz-late") || names[total-1] != "cm-249" {
		t.Errorf("paged list: %d names, sorted %v, first %q last %q (want cm-000..cm-249 as of the first page)",
			len(names), sort.StringsAreSorted(names), names[0], names[len(names)-1])
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("paged list returned duplicates")
	}
	// A fresh list sees the changes.
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != total || l.Items[len(l.Items)-1].Name != "zz-late" {
		t.Errorf("fresh list: %d items, last %q", len(l.Items), l.Items[len(l.Items)-1].Name)
	}
	// A bogus continue token is a 400... or 410 for an expired one.
	if _, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: "not-a-token"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list with a bogus continue token: want 400, got %v", err)
	}
}

func testWatchList(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-watchlist"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	var maxRV uint64
	for _, n := range []string{"a", "b", "c"} {
		c, err := cms.Create(ctx, configMap(ns, n, nil, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseUint(c.ResourceVersion, 10, 64)
		maxRV = max(maxRV, rv)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatalf("watch-list: %v", err)
	}
	defer w.Stop()
	var added []string
	for {
		ev := nextEvent(t, w, 10*time.Second)
		if ev.Type == watch.Bookmark {
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark before the initial-events-end bookmark: %+v", m)
				continue
			}
			if rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64); rv < maxRV {
				t.Errorf("initial-events-end bookmark at rv %d, before the objects' rv %d", rv, maxRV)
			}
			break
		}
		if ev.Type != watch.Added {
			t.Fatalf("watch-list: %s before the initial-events-end bookmark", ev.Type)
		}
		added = append(added, ev.Object.(*corev1.ConfigMap).Name)
	}
	sort.Strings(added)
	if !slices.Equal(added, []string{"a", "b", "c"}) {
		t.Errorf("watch-list initial events: %v", added)
	}
	if _, err := cms.Create(ctx, configMap(ns, "d", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextEvent(t, w, 10*time.Second)
		if ev.Type == watch.Bookmark {
			continue
		}
		if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "d" {
			t.Errorf("after the bookmark: %s %+v, want ADDED d", ev.Type, ev.Object)
		}
		break
	}

	// sendInitialEvents without allowWatchBookmarks is accepted, as by
	// kube-apiserver 1.37: the initial events come without the bookmark
	// that ends them.
	w2, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatalf("sendInitialEvents without allowWatchBookmarks: %v", err)
	}
	defer w2.Stop()
	added = nil
	for len(added) < 4 {
		ev := nextEvent(t, w2, 10*time.Second)
		if ev.Type != watch.Added {
			t.Fatalf("initial events without bookmarks: %s %+v, want ADDED", ev.Type, ev.Object)
		}
		added = append(added, ev.Object.(*corev1.ConfigMap).Name)
	}
	sort.Strings(added)
	if !slices.Equal(added, []string{"a", "b", "c", "d"}) {
		t.Errorf("initial events without bookmarks: %v", added)
	}
	select {
	case ev := <-w2.ResultChan():
		t.Errorf("after the initial events without bookmarks: %s %+v, want nothing", ev.Type, ev.Object)
	case <-time.After(500 * time.Millisecond):
	}
}

func testWatchBadResourceVersion(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-badrv"
	createNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", l.ResourceVersion, err)
	}

	// Unparsable: 400.
	if _, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "abc"}); !apierrors.IsBadRequest(err) {
		t.Errorf("watch from resourceVersion abc: want 400 BadRequest, got %v", err)
	}

	// Far in the future: the watch must not deliver events that happen now
	// as if they were after that revision. kube-apiserver waits a few
	// seconds and answers 504 ResourceVersionTooLarge; an error or a closed
	// watch is fine, a delivered event is not.
	future := strconv.FormatUint(rv+1_000_000, 10)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := cms.Watch(wctx, metav1.ListOptions{ResourceVersion: future})
	if err != nil {
		t.Logf("watch from a future resourceVersion refused: %v", err)
		return
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, configMap(ns, "now", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	window := time.After(2 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Error:
				t.Logf("watch from a future resourceVersion ended with %v", apierrors.FromObject(ev.Object))
				return
			case watch.Bookmark:
				continue
			default:
				t.Fatalf("watch from resourceVersion %s delivered %s %v (revision is about %d)", future, ev.Type, ev.Object, rv)
			}
		case <-window:
			return
		}
	}
}

// ownedConfigMap is a ConfigMap owned by the deployment.
func ownedConfigMap(ns, name string, owner *appsv1.Deployment, block bool) *corev1.ConfigMap {
	cm := configMap(ns, name, nil, map[string]string{"owned": "yes"})
	cm.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: owner.Name, UID: owner.UID,
		BlockOwnerDeletion: ptr.To(block),
	}}
	return cm
}

func testGCBackground(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-gc-bg"
	createNamespace(t, cs, ns)
	owner, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "owner", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ownedConfigMap(ns, "dependent", owner, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An object without owners is left alone.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "unowned", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("background deletion: owner still there: %v", err)
	}
	poll.Until(t, "the dependent collected", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("dependent not collected: %v", err)
		}
		return nil
	})
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "unowned", metav1.GetOptions{}); err != nil {
		t.Errorf("an unrelated object was collected: %v", err)
	}
}

func testGCOrphan(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-gc-orphan"
	createNamespace(t, cs, ns)
	owner, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "owner", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ownedConfigMap(ns, "dependent", owner, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the owner deleted", func() error {
		_, err := cs.AppsV1().Deployments(ns).Get(ctx, "owner", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("owner still there: %v", err)
		}
		return nil
	})
	poll.Until(t, "the dependent orphaned", func() error {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("orphaned dependent was deleted: %v", err)
		}
		if len(cm.OwnerReferences) != 0 {
			return fmt.Errorf("orphan still has owner references %+v", cm.OwnerReferences)
		}
		return nil
	})
}

func testGCForeground(t *testing.T, _ *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "cg-gc-fg"
	createNamespace(t, cs, ns)
	owner, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "owner", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The dependent holds a finalizer so that the test controls when it
	// goes: the owner must stay until then.
	dep := ownedConfigMap(ns, "dependent", owner, true)
	dep.Finalizers = []string{"e2e.canopy.dev/hold"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	// Right after the delete call the owner is marked, with the
	// foregroundDeletion finalizer.
	o, err := cs.AppsV1().Deployments(ns).Get(ctx, "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("foreground deletion removed the owner at once: %v", err)
	}
	if o.DeletionTimestamp == nil || !slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("owner in foreground deletion: deletionTimestamp %v finalizers %v", o.DeletionTimestamp, o.Finalizers)
	}
	poll.Until(t, "the dependent in foreground deletion", func() error {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.DeletionTimestamp == nil {
			return fmt.Errorf("dependent not being deleted yet")
		}
		return nil
	})
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "owner", metav1.GetOptions{}); err != nil {
		t.Fatalf("owner disappeared while its blocking dependent still exists: %v", err)
	}

	// Record the order of the deletions from here on.
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmw, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cmw.Stop()
	dw, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "dependent", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deletedRV := func(w watch.Interface) uint64 {
		t.Helper()
		for {
			ev := nextEvent(t, w, 20*time.Second)
			if ev.Type == watch.Deleted {
				m, _ := meta.Accessor(ev.Object)
				rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
				if err != nil {
					t.Fatalf("deleted event resourceVersion %q", m.GetResourceVersion())
				}
				return rv
			}
		}
	}
	depRV, ownerRV := deletedRV(cmw), deletedRV(dw)
	if depRV >= ownerRV {
		t.Errorf("foreground deletion: dependent deleted at revision %d, owner at %d; the dependent must go first", depRV, ownerRV)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("owner after foreground deletion: %v", err)
	}
}
