package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The same test bodies run against a virtual cluster (in-process) and a
// real kube-apiserver.
var bodies = []struct {
	name string
	run  func(*testing.T, *testCluster)
}{
	{"ApplyOrderPruneUnmanaged", testApplyOrderPruneUnmanaged},
	{"Drift", testDrift},
	{"Restart", testRestart},
	{"Unreachable", testUnreachable},
}

func TestVirtualCluster(t *testing.T) {
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) { b.run(t, newVirtualCluster(t)) })
	}
}

// TestKubeAPIServer runs the bodies against one real kube-apiserver (and
// etcd), each through its own gate; the bodies use distinct namespaces.
func TestKubeAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	kc := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) { b.run(t, gatedCluster(t, kc, false)) })
	}
}

func newVirtualCluster(t testing.TB) *testCluster {
	return startVirtualCluster(t, vcluster.Options{})
}

// startVirtualCluster runs a virtual cluster made with opts (named after
// the test, quiet) until the test ends; the syncer's side of it can be
// taken down (testCluster.setDown).
func startVirtualCluster(t testing.TB, opts vcluster.Options) *testCluster {
	opts.Name = "vc-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	opts.Logger = quiet
	vc, err := vcluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vc.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vcluster: %v", err)
		}
	})
	down := &atomic.Bool{}
	return &testCluster{
		admin: vc.RESTConfig(),
		syncerConfig: func() *rest.Config {
			rc := vc.RESTConfig()
			rc.Transport = gateTransport{base: rc.Transport, down: down}
			return rc
		},
		setDown:     down.Store,
		namespaceGC: true,
	}
}

var (
	gvrNS     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrCM     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrDeploy = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrCRD    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrGadget = schema.GroupVersionResource{Group: "test.canopy.dev", Version: "v1", Resource: "gadgets"}
)

func namespace(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
}

func configMap(ns, name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}, "data": data}
}

// deployment expands the destination's zone into its env and takes its
// replicas from a Customizer.
func deployment(ns, name string, replicas int64) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}},
		"spec": map[string]any{"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1",
					"env": []any{map[string]any{"name": "ZONE", "value": "%(zone)"}}}}}}}}
}

func gadgetCRD() map[string]any {
	return map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets.test.canopy.dev"},
		"spec": map[string]any{"group": "test.canopy.dev", "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}}}}}}}}
}

func gadget(ns, name string, size int64) map[string]any {
	return map[string]any{"apiVersion": "test.canopy.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"size": size}}
}

func managed(u *unstructured.Unstructured) bool { return u.GetLabels()[ManagedLabel] == "true" }

// firstIndex is the index of the first entry containing s (-1: none).
func firstIndex(entries []string, s string) int {
	return slices.IndexFunc(entries, func(e string) bool { return strings.Contains(e, s) })
}

// CRDs first (Established before any custom resource), then namespaces,
// then the rest; a namespace that existed before is neither labelled nor
// deleted, and what lives in it but was not placed is untouched; what
// leaves the inbox is deleted in reverse order; reports follow.
func testApplyOrderPruneUnmanaged(t *testing.T, c *testCluster) {
	h := newHarness(t, c, "edge-a")
	ctx := context.Background()
	// Someone else's namespace, with an object of theirs.
	if _, err := h.admin.Resource(gvrNS).Create(ctx, &unstructured.Unstructured{Object: namespace("legacy")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.Resource(gvrCM).Namespace("legacy").Create(ctx, &unstructured.Unstructured{Object: configMap("legacy", "theirs", map[string]any{"a": "b"})}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The custom resource comes first in the inbox's order, the CRD last.
	objs := []map[string]any{
		gadget("shop", "g1", 3), namespace("shop"), namespace("legacy"),
		configMap("legacy", "ours", map[string]any{"zone": "placed"}), deployment("shop", "web", 2), gadgetCRD(),
	}
	h.put(objs...)
	h.start()
	st := h.waitStatus("5 objects applied", func(s DestinationState) bool { return s.Applied == 5 && s.Reachable })
	if st.FailedCount != 0 || st.ObservedInboxRevision != int64(h.cursor) || st.LastError != "" {
		t.Errorf("status %+v, want no failure and observed %d", st, h.cursor)
	}

	patches := h.reqs.writes("PATCH")
	for _, p := range patches {
		if !strings.HasSuffix(p, " 200") && !strings.HasSuffix(p, " 201") {
			t.Errorf("a failed apply: %s (all: %v)", p, patches)
		}
	}
	crd, ns := firstIndex(patches, "/customresourcedefinitions/gadgets"), firstIndex(patches, "/namespaces/shop ")
	g, web, ours := firstIndex(patches, "/gadgets/g1"), firstIndex(patches, "/deployments/web"), firstIndex(patches, "/configmaps/ours")
	if crd < 0 || ns < 0 || g < 0 || web < 0 || ours < 0 || !(crd < ns && ns < g && ns < web && ns < ours) {
		t.Errorf("apply order: %v", patches)
	}
	if i := firstIndex(patches, "/namespaces/legacy "); i >= 0 {
		t.Errorf("the pre-existing namespace was applied: %s", patches[i])
	}

	legacy, err := h.get(gvrNS, "", "legacy")
	if err != nil || managed(legacy) {
		t.Errorf("namespace legacy: managed=%v, %v", legacy != nil && managed(legacy), err)
	}
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{{gvrCRD, "", "gadgets.test.canopy.dev"}, {gvrNS, "", "shop"}, {gvrGadget, "shop", "g1"}, {gvrDeploy, "shop", "web"}, {gvrCM, "legacy", "ours"}} {
		u, err := h.get(o.gvr, o.ns, o.name)
		if err != nil || !managed(u) {
			t.Errorf("%s %s/%s: %v (labels %v)", o.gvr.Resource, o.ns, o.name, err, u.GetLabels())
			continue
		}
		for k := range u.GetAnnotations() {
			if strings.HasPrefix(k, v1alpha1.GroupName+"/") {
				t.Errorf("%s %s carries instruction %s", o.gvr.Resource, o.name, k)
			}
		}
	}
	web1, _ := h.get(gvrDeploy, "shop", "web")
	cs, _, _ := unstructured.NestedSlice(web1.Object, "spec", "template", "spec", "containers")
	if env := fmt.Sprint(cs[0].(map[string]any)["env"]); !strings.Contains(env, "z-edge-a") {
		t.Errorf("the deployment was not customized: env %s", env)
	}

	// Reports: each managed object's live state under its inbox key.
	poll.Until(t, "5 reports", func() error {
		if got := h.outboxKeys(); len(got) != 5 {
			return fmt.Errorf("outbox %v", got)
		}
		return nil
	})
	o, err := h.st.Get(store.Key{Space: "outbox", Resource: resDeployments, Namespace: "shop", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var rep unstructured.Unstructured
	if err := rep.UnmarshalJSON(o.Data); err != nil {
		t.Fatal(err)
	}
	if rep.GetUID() != web1.GetUID() || rep.GetManagedFields() != nil {
		t.Errorf("report of web: uid %s (live %s), managedFields %v", rep.GetUID(), web1.GetUID(), rep.GetManagedFields())
	}
	if s := h.s.Stats(); s.Managed != 5 || s.InSync != 5 || !s.Reachable {
		t.Errorf("stats %+v", s)
	}

	// Everything leaves the inbox.
	before := len(h.reqs.writes("DELETE"))
	h.remove(objs...)
	h.gone(gvrGadget, "shop", "g1")
	h.gone(gvrDeploy, "shop", "web")
	h.gone(gvrCM, "legacy", "ours")
	h.gone(gvrNS, "", "shop")
	h.gone(gvrCRD, "", "gadgets.test.canopy.dev")
	// The server may answer the last delete before its round trip is logged.
	var deletes []string
	poll.Until(t, "the CRD's delete logged", func() error {
		if deletes = h.reqs.writes("DELETE")[before:]; firstIndex(deletes, "/customresourcedefinitions/") < 0 {
			return fmt.Errorf("deletes %v", deletes)
		}
		return nil
	})
	dg, dw, dn, dc := firstIndex(deletes, "/gadgets/g1"), firstIndex(deletes, "/deployments/web"), firstIndex(deletes, "/namespaces/shop "), firstIndex(deletes, "/customresourcedefinitions/")
	if dg < 0 || dw < 0 || dn < 0 || dc < 0 || !(dg < dn && dw < dn && dn < dc) {
		t.Errorf("delete order: %v", deletes)
	}
	if i := firstIndex(deletes, "/namespaces/legacy "); i >= 0 {
		t.Errorf("the pre-existing namespace was deleted: %s", deletes[i])
	}
	if u, err := h.get(gvrNS, "", "legacy"); err != nil || u.GetDeletionTimestamp() != nil {
		t.Errorf("namespace legacy after prune: %v", err)
	}
	if _, err := h.get(gvrCM, "legacy", "theirs"); err != nil {
		t.Errorf("their configmap: %v", err)
	}
	h.waitStatus("nothing applied", func(s DestinationState) bool { return s.Applied == 0 && s.FailedCount == 0 })
	poll.Until(t, "no reports", func() error {
		if got := h.outboxKeys(); len(got) != 0 {
			return fmt.Errorf("outbox %v", got)
		}
		return nil
	})
	if s := h.s.Stats(); s.Managed != 0 || s.Deletes != 5 {
		t.Errorf("stats %+v", s)
	}
	if lr, _ := h.st.List(store.ListOptions{Space: "", Resource: AppliedResource}); len(lr.Items) != 0 {
		t.Errorf("%d records left", len(lr.Items))
	}
}

// A field the syncer set, edited or removed by someone else, is restored;
// a deleted object is recreated; each is counted once. Fields the syncer
// did not set are left alone.
func testDrift(t *testing.T, c *testCluster) {
	h := newHarness(t, c, "edge-d")
	ctx := context.Background()
	h.put(namespace("drift"), configMap("drift", "cm", map[string]any{"a": "1"}), deployment("drift", "web", 2))
	s := h.start()
	h.waitStatus("3 applied", func(s DestinationState) bool { return s.Applied == 3 })
	cms := h.admin.Resource(gvrCM).Namespace("drift")

	// Someone adds an annotation: not a field the syncer set.
	if _, err := cms.Patch(ctx, "cm", types.MergePatchType, []byte(`{"metadata":{"annotations":{"other":"x"}}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	// ... and changes a field it set.
	edit := func(what string, f func(*unstructured.Unstructured)) {
		t.Helper()
		cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f(cm)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "someone"}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	edit("edit data", func(cm *unstructured.Unstructured) { _ = unstructured.SetNestedField(cm.Object, "2", "data", "a") })
	poll.Until(t, "data.a restored", func() error {
		cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedString(cm.Object, "data", "a"); v != "1" {
			return fmt.Errorf("data.a = %q", v)
		}
		if cm.GetAnnotations()["other"] != "x" {
			return fmt.Errorf("the other annotation is gone: %v", cm.GetAnnotations())
		}
		return nil
	})
	// The count is taken once the restoring apply has returned, which may
	// be after the object is seen restored.
	poll.Until(t, "one drift correction counted", func() error {
		if n := s.Stats().DriftCorrections; n < 1 {
			return fmt.Errorf("drift corrections = %d", n)
		}
		return nil
	})
	if n := s.Stats().DriftCorrections; n != 1 {
		t.Errorf("drift corrections = %d, want 1", n)
	}

	// The ownership label is a field the syncer set too.
	edit("drop the label", func(cm *unstructured.Unstructured) {
		l := cm.GetLabels()
		delete(l, ManagedLabel)
		cm.SetLabels(l)
	})
	poll.Until(t, "label restored", func() error {
		cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		if err != nil || !managed(cm) {
			return fmt.Errorf("labels %v, %v", cm.GetLabels(), err)
		}
		return nil
	})

	// Scaled by hand: scaled back.
	deps := h.admin.Resource(gvrDeploy).Namespace("drift")
	if _, err := deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replicas restored", func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 2 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})

	// Deleted: recreated.
	old, _ := cms.Get(ctx, "cm", metav1.GetOptions{})
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "cm recreated", func() error {
		cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.GetUID() == old.GetUID() {
			return fmt.Errorf("not yet deleted")
		}
		return nil
	})
	st := h.waitStatus("4 corrections reported", func(s DestinationState) bool { return s.DriftCorrections == 4 })
	if st.Applied != 3 {
		t.Errorf("status %+v", st)
	}
	if n := s.Stats().DriftCorrections; n != 4 {
		t.Errorf("drift corrections = %d, want 4", n)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "canopy_syncer_drift_corrections_total" {
			found = true
			m := mf.GetMetric()[0]
			if m.GetCounter().GetValue() != 4 || m.GetLabel()[0].GetValue() != "edge-d" {
				t.Errorf("metric %v", m)
			}
		}
	}
	if !found {
		t.Error("no canopy_syncer_drift_corrections_total")
	}
}

// A restarted syncer knows from its store what it manages: it applies
// nothing that has not changed, restores what drifted while it was down,
// and still deletes what leaves the inbox.
func testRestart(t *testing.T, c *testCluster) {
	h := newHarness(t, c, "edge-r")
	ctx := context.Background()
	h.put(namespace("restart"), configMap("restart", "a", map[string]any{"v": "1"}), configMap("restart", "b", map[string]any{"v": "1"}))
	h.start()
	h.waitStatus("3 applied", func(s DestinationState) bool { return s.Applied == 3 })
	h.stop()

	// While it is down, someone edits a managed object.
	cms := h.admin.Resource(gvrCM).Namespace("restart")
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"v":"edited"}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	b, _ := cms.Get(ctx, "b", metav1.GetOptions{})
	patchesBefore := len(h.reqs.writes("PATCH"))

	s := h.start()
	poll.Until(t, "a restored", func() error {
		a, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedString(a.Object, "data", "v"); v != "1" {
			return fmt.Errorf("data.v = %q", v)
		}
		return nil
	})
	h.waitStatus("1 correction, 3 applied", func(st DestinationState) bool { return st.DriftCorrections == 1 && st.Applied == 3 })
	if got := h.reqs.writes("PATCH")[patchesBefore:]; len(got) != 1 || !strings.Contains(got[0], "/configmaps/a ") {
		t.Errorf("applies after the restart: %v, want only a's restoration", got)
	}
	if b2, _ := cms.Get(ctx, "b", metav1.GetOptions{}); b2.GetResourceVersion() != b.GetResourceVersion() {
		t.Errorf("b was written again: resourceVersion %s -> %s", b.GetResourceVersion(), b2.GetResourceVersion())
	}
	if st := s.Stats(); st.Managed != 3 || st.Applies != 1 {
		t.Errorf("stats after restart %+v", st)
	}

	h.remove(configMap("restart", "b", nil))
	h.gone(gvrCM, "restart", "b")
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("a: %v", err)
	}
}

// With the cluster's API unreachable the destination reports it, keeps
// retrying, and catches up when the API returns.
func testUnreachable(t *testing.T, c *testCluster) {
	h := newHarness(t, c, "edge-u")
	ctx := context.Background()
	h.put(namespace("gate"), configMap("gate", "one", nil))
	h.start()
	h.waitStatus("reachable, 2 applied", func(s DestinationState) bool { return s.Applied == 2 && s.Reachable })

	// Nothing changes, yet the probe notices.
	c.setDown(true)
	st := h.waitStatus("unreachable", func(s DestinationState) bool { return !s.Reachable })
	if st.LastError == "" || st.Applied != 2 {
		t.Errorf("status while down %+v", st)
	}
	// A change meanwhile fails, and is retried.
	h.put(configMap("gate", "two", map[string]any{"k": "v"}))
	h.waitStatus("the pass to fail", func(s DestinationState) bool {
		return !s.Reachable && s.LastError != "" && s.ObservedInboxRevision < int64(h.cursor)
	})
	if s := h.s.Stats(); s.Reachable {
		t.Errorf("stats while down %+v", s)
	}
	if _, err := h.get(gvrCM, "gate", "two"); !apierrors.IsNotFound(err) {
		t.Fatalf("two reached the cluster through a closed gate: %v", err)
	}

	c.setDown(false)
	st = h.waitStatus("reachable again, 3 applied", func(s DestinationState) bool { return s.Reachable && s.Applied == 3 })
	if st.ObservedInboxRevision != int64(h.cursor) || st.LastError != "" {
		t.Errorf("status after recovery %+v (cursor %d)", st, h.cursor)
	}
	if u, err := h.admin.Resource(gvrCM).Namespace("gate").Get(ctx, "two", metav1.GetOptions{}); err != nil || !managed(u) {
		t.Errorf("two after recovery: %v", err)
	}
}

// An inbox watch that falls behind (a watcher queue of one event) further
// than the store's history (four events, less than an InMemory child
// keeps) recovers: the syncer resumes where it can and lists the inbox
// where it cannot, and applies everything.
func TestInboxWatchBeyondHistory(t *testing.T) {
	h := newHarnessStore(t, newVirtualCluster(t), "edge-1", store.Options{HistorySize: 4, WatcherQueue: 1})
	h.start()
	h.put(namespace("hist"))
	const n = 40
	for i := range n {
		h.put(configMap("hist", fmt.Sprint("cm-", i), map[string]any{"i": fmt.Sprint(i)}))
	}
	h.put(configMap("hist", "cm-0", map[string]any{"i": "last"}))
	poll.Until(t, "every ConfigMap applied", func() error {
		for i := range n {
			u, err := h.get(gvrCM, "hist", fmt.Sprint("cm-", i))
			if err != nil {
				return err
			}
			want := fmt.Sprint(i)
			if i == 0 {
				want = "last"
			}
			if got, _, _ := unstructured.NestedString(u.Object, "data", "i"); got != want {
				return fmt.Errorf("cm-%d: data.i %q, want %q", i, got, want)
			}
		}
		return nil
	})
	h.waitStatus("the last cursor observed", func(s DestinationState) bool {
		return s.Applied == n+1 && s.ObservedInboxRevision == int64(h.cursor)
	})
}
