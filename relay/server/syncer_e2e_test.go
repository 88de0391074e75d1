package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/syncer"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// The MVI end to end: one EdgePlacement in the root's default space puts a
// Namespace, a ConfigMap and a Deployment with a Customizer on three
// edges under a region; each edge's syncer applies them, customized with
// its own values, to its virtual cluster, and its reports (the live
// Deployment, once the simulated kubelet made it available, and the
// DestinationStatus) reach the region. Deleting the placement deletes
// everything from the clusters.
func TestSyncerEndToEnd(t *testing.T) {
	stores := map[string]map[string]string{
		"store-1": {"shop": "yes", "zone": "a", "size": "small", "replicas": "1"},
		"store-2": {"shop": "yes", "zone": "b", "size": "large", "replicas": "3"},
		"store-3": {"shop": "yes", "zone": "c", "size": "large", "replicas": "2"},
	}
	pt := startPlacementTree(t, stores)
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "stores", "labels": map[string]any{"region": "eu"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"shop": "yes"}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, pt.wds, edgev1alpha1.CustomizersGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
		"metadata": map[string]any{"name": "per-store", "namespace": "shop"},
		"replacements": []any{
			map[string]any{"path": "/spec/replicas", "value": "%(replicas)"},
			// (A template in a label value would not pass the root's
			// validation: the Customizer sets it.)
			map[string]any{"path": "/metadata/labels/store", "value": `"%(syncTargetName)"`},
			map[string]any{"path": "/spec/template/spec/containers/0/env/-", "value": `{"name": "STORE", "value": "%(syncTargetName)-%(zone)"}`},
			map[string]any{"path": "/spec/template/spec/containers/0/resources", "value": `{"limits": {"cpu": "2"}}`,
				"destinationSelector": map[string]any{"matchLabels": map[string]any{"size": "large"}}},
		}})
	pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop",
			"annotations": map[string]any{edgev1alpha1.ExpandParametersAnnotation: "true"}},
		"data": map[string]any{"zone": "%(zone)", "region": "%(region)", "store": "%(syncTargetName)"}})
	pt.apply(t, pt.wds, deployGVR, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"},
			"annotations": map[string]any{edgev1alpha1.ExpandParametersAnnotation: "true", edgev1alpha1.CustomizerAnnotation: "per-store"}},
		"spec": map[string]any{"replicas": 1,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "shop:1.2",
					"env": []any{map[string]any{"name": "REGION", "value": "%(region)"}, map[string]any{"name": "ZONE", "value": "%(zone)"}}}}}}}})
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"region": "eu"}}},
			"downsync": []any{
				map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}},
				map[string]any{"apiGroup": "apps", "resources": []any{"deployments"}, "namespaces": []any{"shop"}},
			},
		}})

	clients := map[string]dynamic.Interface{}
	for name, e := range pt.edges {
		c, err := dynamic.NewForConfig(e.cluster.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	ctx := context.Background()
	poll.Until(t, "every cluster to hold its own version", func() error {
		for name, c := range clients {
			labels := stores[name]
			ns, err := c.Resource(nsGVR).Get(ctx, "shop", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: namespace: %v", name, err)
			}
			if ns.GetLabels()[syncer.ManagedLabel] != "true" {
				return fmt.Errorf("%s: namespace not managed: %v", name, ns.GetLabels())
			}
			cm, err := c.Resource(cmGVR).Namespace("shop").Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: configmap: %v", name, err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if want := map[string]string{"zone": labels["zone"], "region": "eu", "store": name}; fmt.Sprint(data) != fmt.Sprint(want) {
				return fmt.Errorf("%s: configmap data %v, want %v", name, data, want)
			}
			d, err := c.Resource(deployGVR).Namespace("shop").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: deployment: %v", name, err)
			}
			replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
			cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			env, _ := json.Marshal(cs[0].(map[string]any)["env"])
			cpu, _, _ := unstructured.NestedString(cs[0].(map[string]any), "resources", "limits", "cpu")
			wantEnv := fmt.Sprintf(`[{"name":"REGION","value":"eu"},{"name":"ZONE","value":"%s"},{"name":"STORE","value":"%s-%s"}]`, labels["zone"], name, labels["zone"])
			wantCPU := map[string]string{"small": "", "large": "2"}[labels["size"]]
			if fmt.Sprint(replicas) != labels["replicas"] || string(env) != wantEnv || cpu != wantCPU || d.GetLabels()["store"] != name {
				return fmt.Errorf("%s: replicas %d env %s cpu %q labels %v", name, replicas, env, cpu, d.GetLabels())
			}
			for k := range d.GetAnnotations() {
				if strings.HasPrefix(k, edgev1alpha1.GroupName+"/") {
					return fmt.Errorf("%s: deployment carries %s", name, k)
				}
			}
		}
		return nil
	})

	// Reports travel up: at the region, each edge's reports space holds
	// its DestinationStatus and its live Deployment, available.
	poll.Until(t, "reports at the region", func() error {
		for name := range pt.edges {
			space := layout.ReportsSpace(name)
			o, err := pt.region.Reports().Get(store.Key{Space: space, Resource: syncer.DestinationStatusResource, Name: name})
			if err != nil {
				return fmt.Errorf("%s: status: %v", name, err)
			}
			var ds syncer.DestinationStatus
			if err := json.Unmarshal(o.Data, &ds); err != nil || !ds.Status.Reachable || ds.Status.Applied != 3 || ds.Status.FailedCount != 0 || ds.Status.ObservedInboxRevision == 0 {
				return fmt.Errorf("%s: status %s", name, o.Data)
			}
			o, err = pt.region.Reports().Get(store.Key{Space: space, Resource: store.Resource{Group: "apps", Resource: "deployments"}, Namespace: "shop", Name: "web"})
			if err != nil {
				return fmt.Errorf("%s: deployment report: %v", name, err)
			}
			var d unstructured.Unstructured
			if err := d.UnmarshalJSON(o.Data); err != nil {
				return err
			}
			avail, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
			if fmt.Sprint(avail) != stores[name]["replicas"] {
				return fmt.Errorf("%s: reported availableReplicas %d", name, avail)
			}
		}
		return nil
	})

	// The placement goes: so does everything from every cluster.
	if err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "every cluster emptied", func() error {
		for name, c := range clients {
			for _, o := range []struct {
				gvr      schema.GroupVersionResource
				ns, name string
			}{{deployGVR, "shop", "web"}, {cmGVR, "shop", "settings"}, {nsGVR, "", "shop"}} {
				if _, err := c.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s: %s %s still there (%v)", name, o.gvr.Resource, o.name, err)
				}
			}
		}
		return nil
	})
}

// Autonomy: an edge restarted while its parent is unreachable enforces the
// inbox on its disk. Its virtual cluster is new and empty after the
// restart (it lives in memory), so everything the syncer manages must be
// put back, from the inbox and the syncer's records alone; an object then
// deleted in the cluster is put back too.
func TestEdgeEnforcesInboxWhileParentIsDown(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	cfg := ChildConfig{Role: pki.RoleEdge, Name: "edge-1", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()}, JoinToken: token, VirtualCluster: true}
	c, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, "edge-1", c.Serve)
	for i := range 5 {
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: fmt.Sprintf("cm-%d", i)}
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default","annotations":{%q:"edge-1"}},"data":{"i":"%d"}}`, i, edgev1alpha1.DestinationsAnnotation, i)
		if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	clusterHolds := func(c *Child) func() error {
		cs, err := dynamic.NewForConfig(c.cluster.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		return func() error {
			l, err := cs.Resource(cmGVR).Namespace("default").List(context.Background(), metav1.ListOptions{LabelSelector: syncer.ManagedLabel + "=true"})
			if err != nil || len(l.Items) != 5 {
				return fmt.Errorf("managed configmaps: %v (%v)", l, err)
			}
			return nil
		}
	}
	poll.Until(t, "the first cluster to hold the configmaps", clusterHolds(c))
	stop()

	cfg.Parents, cfg.JoinToken = []string{"127.0.0.1:1"}, ""
	c2 := startTestChild(t, cfg)
	poll.Until(t, "the new cluster to hold the configmaps, parent down", clusterHolds(c2))
	if c2.Uplink().Connected() {
		t.Fatal("connected to a parent that does not exist")
	}
	// The fresh cluster's objects were restored either as drift or as
	// plain applies, depending on timing; a deletion now is drift.
	reported := func() (syncer.DestinationStatus, string) {
		var ds syncer.DestinationStatus
		o, err := c2.Store().Get(store.Key{Space: layout.OutboxSpace, Resource: syncer.DestinationStatusResource, Name: "edge-1"})
		if err != nil {
			return ds, err.Error()
		}
		if err := json.Unmarshal(o.Data, &ds); err != nil {
			return ds, err.Error()
		}
		return ds, string(o.Data)
	}
	var before int64
	poll.Until(t, "the edge's status report", func() error {
		ds, why := reported()
		before = ds.Status.DriftCorrections
		if ds.Status.Applied != 5 {
			return errors.New(why)
		}
		return nil
	})
	cs, _ := dynamic.NewForConfig(c2.cluster.RESTConfig())
	if err := cs.Resource(cmGVR).Namespace("default").Delete(context.Background(), "cm-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "cm-3 restored, reported", func() error {
		if err := clusterHolds(c2)(); err != nil {
			return err
		}
		if ds, why := reported(); ds.Status.Applied != 5 || ds.Status.DriftCorrections <= before {
			return errors.New(why)
		}
		return nil
	})
}

// The C2P shape (seed 001): a policy CRD and cluster-scoped policies of
// it, placed by one EdgePlacement through a region onto two edges; each
// edge's syncer applies the CRD first (until Established), then the
// policies; a policy dropped from the placement leaves both clusters.
func TestPolicyCRDThroughTheTree(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"c1": {"policy": "yes"}, "c2": {"policy": "yes"}})
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "governed", "labels": map[string]any{"policy": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"policy": "yes"}}}})
	crdGVRv1 := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	pt.apply(t, pt.wds, crdGVRv1, map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "policies.c2p.example.com"},
		"spec": map[string]any{"group": "c2p.example.com", "scope": "Cluster",
			"names": map[string]any{"plural": "policies", "singular": "policy", "kind": "Policy", "listKind": "PolicyList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{"rule": map[string]any{"type": "string"}}}}}}}}}})
	policyGVR := schema.GroupVersionResource{Group: "c2p.example.com", Version: "v1", Resource: "policies"}
	poll.True(t, "the WDS to serve policies", func() bool {
		_, err := pt.wds.Resource(policyGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
	for _, name := range []string{"no-root", "signed-images"} {
		pt.apply(t, pt.wds, policyGVR, map[string]any{"apiVersion": "c2p.example.com/v1", "kind": "Policy",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"rule": name}})
	}
	placement := func(policies ...any) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement", "metadata": map[string]any{"name": "c2p"},
			"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"policy": "yes"}}},
				"downsync": []any{
					map[string]any{"apiGroup": "apiextensions.k8s.io", "resources": []any{"customresourcedefinitions"}, "objectNames": []any{"policies.c2p.example.com"}},
					map[string]any{"apiGroup": "c2p.example.com", "resources": []any{"policies"}, "objectNames": policies},
				}}}
	}
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, placement("no-root", "signed-images"))
	clusterPolicies := func(c *Child) (names []string, why string) {
		dc, err := dynamic.NewForConfig(c.cluster.RESTConfig())
		if err != nil {
			return nil, err.Error()
		}
		l, err := dc.Resource(policyGVR).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil, err.Error()
		}
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		return names, fmt.Sprint(names)
	}
	for _, want := range [][]string{{"no-root", "signed-images"}, {"signed-images"}} {
		if len(want) == 1 {
			pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, placement("signed-images"))
		}
		for _, name := range []string{"c1", "c2"} {
			poll.Until(t, name+" to hold "+strings.Join(want, ","), func() error {
				if got, why := clusterPolicies(pt.edges[name]); strings.Join(got, ",") != strings.Join(want, ",") {
					return errors.New(why)
				}
				return nil
			})
		}
	}
}

// Reported state through the tree: each edge evaluates the placement's
// StatusCollector on its Deployment (with the simulated kubelet making it
// ready), the region merges the three partials into one, and the root
// writes one CombinedStatus whose sum covers the three destinations, and
// turns the placement Synced and Ready.
func TestStatusThroughTheTree(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{
		"s1": {"app": "yes", "replicas": "1"}, "s2": {"app": "yes", "replicas": "2"}, "s3": {"app": "yes", "replicas": "3"}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, pt.wds, edgev1alpha1.CustomizersGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
		"metadata":     map[string]any{"name": "scale", "namespace": "shop"},
		"replacements": []any{map[string]any{"path": "/spec/replicas", "value": "%(replicas)"}}})
	pt.placeCollected(t, map[string]any{edgev1alpha1.CustomizerAnnotation: "scale"})

	// One row: COUNT 3, SUM of ready replicas 1+2+3.
	pt.waitCombined(t, "a CombinedStatus over the three destinations", 3, 6)
	poll.Until(t, "the placement Synced and Ready", func() error {
		p, err := pt.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		b, _ := json.Marshal(conds)
		synced, _, _ := unstructured.NestedInt64(p.Object, "status", "syncedDestinations")
		if synced != 3 || !strings.Contains(string(b), `"status":"True","type":"Synced"`) ||
			!strings.Contains(string(b), `"status":"True","type":"Ready"`) {
			return fmt.Errorf("%d synced destinations, conditions %s", synced, b)
		}
		return nil
	})
}
