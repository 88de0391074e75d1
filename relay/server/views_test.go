package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var (
	rolesGVR    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	bindingsGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

// viewClient is a dynamic client of path below the root's default space
// (views/<view> or views/<view>/partitions/<value>) as user ("": the
// admin).
func viewClient(t *testing.T, r *Root, path, user string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(&rest.Config{Host: r.server + "/spaces/default/" + path, BearerToken: r.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: r.ca.CertPEM}, Impersonate: rest.ImpersonationConfig{UserName: user}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seen records what an informer delivered: every object it was given,
// and what it holds now.
type seen struct {
	mu   sync.Mutex
	ever []*unstructured.Unstructured
	now  map[string]bool
}

// inform runs a dynamic informer on resource gvr of c until the test
// ends.
func inform(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource) *seen {
	t.Helper()
	s := &seen{now: map[string]bool{}}
	f := dynamicinformer.NewDynamicSharedInformerFactory(c, 0)
	inf := f.ForResource(gvr).Informer()
	note := func(o any, present bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		u := o.(*unstructured.Unstructured)
		s.mu.Lock()
		defer s.mu.Unlock()
		if present {
			s.ever = append(s.ever, u)
		}
		s.now[u.GetNamespace()+"/"+u.GetName()] = present
		if !present {
			delete(s.now, u.GetNamespace()+"/"+u.GetName())
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { note(o, true) },
		UpdateFunc: func(_, o any) { note(o, true) },
		DeleteFunc: func(o any) { note(o, false) },
	})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	return s
}

func (s *seen) holds(want ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []string
	for k := range s.now {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("holds %v, want %v", got, want)
	}
	return nil
}

// placeReportPolicy places ConfigMap reports/policy on every edge (a
// Location of every zone) with an upsync clause for ConfigMaps
// reports/report-*.
func placeReportPolicy(t *testing.T, pt *placementTree) {
	t.Helper()
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "all", "labels": map[string]any{"use": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "Exists"}}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "reports"}})
	pt.apply(t, pt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "policy", "namespace": "reports"}})
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "policies"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"reports"}}},
			"upsync":            []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"reports"}, "names": []any{"report-*"}}},
		}})
}

// TestViewsAcrossDestinations: ConfigMaps the edges create come up
// through an upsync clause; a View partitioned by their provider label
// serves them from every destination, named <destination>.<name> and
// labelled with it. alice may read partition a only: her informer never
// receives another partition's object, and the whole view and partition
// b are 403 to her; bob reads the whole view. An object whose provider
// changes leaves partition b and enters a. Bad Views are 422.
func TestViewsAcrossDestinations(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}, "e2": {"zone": "b"}})
	ctx := context.Background()
	placeReportPolicy(t, pt)
	placed := []string{"configmaps/reports/policy", "namespaces//reports"}
	pt.waitInboxes(t, "both edges to hold the policy", map[string][]string{"e1": placed, "e2": placed})
	report := func(edge, name, provider string) {
		t.Helper()
		pt.apply(t, vclusterClient(t, pt.edges[edge]), cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "reports", "labels": map[string]any{"provider": provider}},
			"data":     map[string]any{"violations": "0"}})
	}
	poll.Until(t, "the namespace at both edges", func() error {
		for _, e := range []string{"e1", "e2"} {
			if _, err := vclusterClient(t, pt.edges[e]).Resource(nsGVR).Get(ctx, "reports", metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	report("e1", "report-1", "a")
	report("e1", "report-2", "b")
	report("e2", "report-1", "a")

	pt.apply(t, pt.wds, edgev1alpha1.ViewsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "View",
		"metadata": map[string]any{"name": "reports"},
		"spec":     map[string]any{"version": "v1", "resource": "configmaps", "partitionKey": map[string]any{"label": "provider"}}})
	for _, b := range []struct{ user, resource, name string }{{"alice", "views/partitions", "reports/a"}, {"bob", "views", "reports"}} {
		pt.apply(t, pt.wds, rolesGVR, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "read-" + b.user, "labels": map[string]any{edgev1alpha1.SpaceRBACLabel: "true"}},
			"rules": []any{map[string]any{"apiGroups": []any{edgev1alpha1.GroupName}, "resources": []any{b.resource},
				"resourceNames": []any{b.name}, "verbs": []any{"get", "list", "watch"}}}})
		pt.apply(t, pt.wds, bindingsGVR, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "read-" + b.user, "labels": map[string]any{edgev1alpha1.SpaceRBACLabel: "true"}},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-" + b.user},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": b.user}}})
	}

	alice := inform(t, viewClient(t, pt.root, "views/reports/partitions/a", "alice"), cmGVR)
	bob := inform(t, viewClient(t, pt.root, "views/reports", "bob"), cmGVR)
	bobB := inform(t, viewClient(t, pt.root, "views/reports/partitions/b", "bob"), cmGVR)
	poll.Until(t, "alice's partition a", func() error { return alice.holds("reports/e1.report-1", "reports/e2.report-1") })
	poll.Until(t, "bob's whole view", func() error {
		return bob.holds("reports/e1.report-1", "reports/e1.report-2", "reports/e2.report-1")
	})
	poll.Until(t, "bob's partition b", func() error { return bobB.holds("reports/e1.report-2") })
	bob.mu.Lock()
	for _, u := range bob.ever {
		if d := u.GetLabels()[edgev1alpha1.DestinationLabel]; d == "" || u.GetName()[:len(d)+1] != d+"." {
			t.Errorf("%s: destination label %q", u.GetName(), d)
		}
	}
	bob.mu.Unlock()
	for _, path := range []string{"views/reports", "views/reports/partitions/b", "views/reports/partitions/none"} {
		_, err := viewClient(t, pt.root, path, "alice").Resource(cmGVR).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("alice lists %s: %v, want Forbidden", path, err)
		}
	}
	poll.Until(t, "the View's status", func() error {
		v, err := pt.wds.Resource(edgev1alpha1.ViewsGVR).Get(ctx, "reports", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(v.Object, "status", "objects"); n != 3 {
			return fmt.Errorf("status.objects %d", n)
		}
		return nil
	})

	// report-2 moves from provider b to a: it leaves b, enters a.
	if _, err := vclusterClient(t, pt.edges["e1"]).Resource(cmGVR).Namespace("reports").Patch(ctx, "report-2", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"provider":"a"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "report-2 in partition a", func() error {
		return alice.holds("reports/e1.report-1", "reports/e1.report-2", "reports/e2.report-1")
	})
	poll.Until(t, "report-2 out of partition b", func() error { return bobB.holds() })
	alice.mu.Lock()
	for _, u := range alice.ever {
		if p := u.GetLabels()["provider"]; p != "a" {
			t.Errorf("alice was given %s of provider %q", u.GetName(), p)
		}
	}
	alice.mu.Unlock()

	// Bad Views: 422 naming the field.
	for _, c := range []struct {
		spec  map[string]any
		field string
	}{
		{map[string]any{"version": "v1", "resource": "nopes"}, "spec.resource"},
		{map[string]any{"version": "v1", "resource": "configmaps", "selector": map[string]any{"matchLabels": map[string]any{"a": "b c"}}}, "spec.selector"},
		{map[string]any{"version": "v1", "resource": "configmaps", "partitionKey": map[string]any{"label": "Bad Key!"}}, "spec.partitionKey.label"},
		{map[string]any{"version": "v1", "resource": "configmaps", "partitionKey": map[string]any{"field": "spec..x"}}, "spec.partitionKey.field"},
	} {
		_, err := pt.wds.Resource(edgev1alpha1.ViewsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "View", "metadata": map[string]any{"name": "bad"}, "spec": c.spec}}, metav1.CreateOptions{})
		var se *apierrors.StatusError
		if !apierrors.IsInvalid(err) || !errors.As(err, &se) || !causeNames(se, c.field) {
			t.Errorf("View %v: %v, want a 422 naming %s", c.spec, err, c.field)
		}
	}
}

// causeNames reports whether a Status names field among its causes.
func causeNames(se *apierrors.StatusError, field string) bool {
	if se.ErrStatus.Details == nil {
		return false
	}
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

// A View's resourceVersions are the root's revisions, kept across a
// restart: a watch from a version listed before the root restarted
// resumes, and delivers what changed after.
func TestViewWatchResumesAfterRootRestart(t *testing.T) {
	root, cfg, stop := startStoppableRoot(t)
	pt := startPlacementTreeUnder(t, root, map[string]map[string]string{"e1": {"zone": "a"}})
	ctx := context.Background()
	placeReportPolicy(t, pt)
	pt.apply(t, pt.wds, edgev1alpha1.ViewsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "View",
		"metadata": map[string]any{"name": "reports"}, "spec": map[string]any{"version": "v1", "resource": "configmaps"}})
	edge := vclusterClient(t, pt.edges["e1"])
	poll.Until(t, "the namespace at e1", func() error {
		_, err := edge.Resource(nsGVR).Get(ctx, "reports", metav1.GetOptions{})
		return err
	})
	report := func(violations string) {
		t.Helper()
		pt.apply(t, edge, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "report-1", "namespace": "reports"}, "data": map[string]any{"violations": violations}})
	}
	report("0")
	var listed string
	poll.Until(t, "the view to serve e1.report-1", func() error {
		l, err := viewClient(t, pt.root, "views/reports", "").Resource(cmGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 || l.Items[0].GetName() != "e1.report-1" {
			return fmt.Errorf("%d objects", len(l.Items))
		}
		listed = l.GetResourceVersion()
		return nil
	})

	pt.root = reopenRoot(t, cfg, pt.root, stop)
	poll.Until(t, "the view served again", func() error {
		_, err := viewClient(t, pt.root, "views/reports", "").Resource(cmGVR).List(ctx, metav1.ListOptions{})
		return err
	})
	poll.True(t, "e1 linked again", func() bool { dests, _ := pt.root.down.Subtree(); return len(dests) == 1 })
	report("1")
	w, err := viewClient(t, pt.root, "views/reports", "").Resource(cmGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: listed})
	if err != nil {
		t.Fatalf("a watch from %s, listed before the restart: %v", listed, err)
	}
	defer w.Stop()
	deadline := time.After(poll.Timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				t.Fatalf("a watch from %s: %v %v", listed, ev.Type, ev.Object)
			}
			if v, _, _ := unstructured.NestedString(u.Object, "data", "violations"); v == "1" {
				return
			}
		case <-deadline:
			t.Fatal("no event with violations 1 from a watch begun before the restart")
		}
	}
}

// TestPlacedView: a View of source Placed serves each destination's live
// copy of the objects placed there (the Deployment as its cluster runs
// it, status included; a label someone added there), beside a View of
// upsynced ConfigMaps that never shows a placed one. Deleting the View
// withdraws the copies from the views space; deleting a placed object
// withdraws its copies.
func TestPlacedView(t *testing.T) {
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"zone": "a"}, "e2": {"zone": "b"}})
	ctx := context.Background()
	placeReportPolicy(t, pt)
	pt.apply(t, pt.wds, deployGVR, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "reports"},
		"spec": map[string]any{"replicas": 2, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "web:1"}}}}}})
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "apps"},
		"spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"use": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "apps", "resources": []any{"deployments"}, "namespaces": []any{"reports"}}},
		}})
	view := func(name, group, resource, source string) {
		pt.apply(t, pt.wds, edgev1alpha1.ViewsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "View",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"apiGroup": group, "version": "v1", "resource": resource, "source": source}})
	}
	view("deployments", "apps", "deployments", "Placed")
	view("policies", "", "configmaps", "Placed")
	view("reports", "", "configmaps", "Upsynced")
	edge := vclusterClient(t, pt.edges["e1"])
	poll.Until(t, "the namespace at e1", func() error {
		_, err := edge.Resource(nsGVR).Get(ctx, "reports", metav1.GetOptions{})
		return err
	})
	pt.apply(t, edge, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "report-1", "namespace": "reports"}})

	list := func(view string, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
		l, err := viewClient(t, pt.root, "views/"+view, "").Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	names := func(items []unstructured.Unstructured) []string {
		var out []string
		for _, u := range items {
			out = append(out, u.GetName())
		}
		slices.Sort(out)
		return out
	}
	poll.Until(t, "both destinations' running Deployments", func() error {
		items, err := list("deployments", deployGVR)
		if err != nil {
			return err
		}
		if got := names(items); !slices.Equal(got, []string{"e1.web", "e2.web"}) {
			return fmt.Errorf("serves %v", got)
		}
		for _, u := range items {
			if n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); n != 2 {
				return fmt.Errorf("%s: readyReplicas %d", u.GetName(), n)
			}
			if u.GetLabels()[edgev1alpha1.PlacedCopyLabel] != "true" || u.GetAnnotations()[edgev1alpha1.ViewedAnnotation] != "" {
				return fmt.Errorf("%s: labels %v, annotations %v", u.GetName(), u.GetLabels(), u.GetAnnotations())
			}
		}
		return nil
	})
	if _, err := edge.Resource(cmGVR).Namespace("reports").Patch(ctx, "policy", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"seen":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the placed ConfigMaps as the edges hold them", func() error {
		items, err := list("policies", cmGVR)
		if err != nil {
			return err
		}
		if got := names(items); !slices.Equal(got, []string{"e1.policy", "e2.policy"}) {
			return fmt.Errorf("serves %v", got)
		}
		for _, u := range items {
			if seen := u.GetLabels()["seen"]; (u.GetName() == "e1.policy") != (seen == "yes") {
				return fmt.Errorf("%s: labels %v", u.GetName(), u.GetLabels())
			}
		}
		return nil
	})
	poll.Until(t, "the upsynced view without placed copies", func() error {
		items, err := list("reports", cmGVR)
		if err != nil {
			return err
		}
		if got := names(items); !slices.Equal(got, []string{"e1.report-1"}) {
			return fmt.Errorf("serves %v", got)
		}
		return nil
	})
	poll.Until(t, "the Views' status", func() error {
		for name, want := range map[string]int64{"deployments": 2, "policies": 2, "reports": 1} {
			v, err := pt.wds.Resource(edgev1alpha1.ViewsGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n, _, _ := unstructured.NestedInt64(v.Object, "status", "objects"); n != want {
				return fmt.Errorf("%s: status.objects %d, want %d", name, n, want)
			}
		}
		return nil
	})

	// Without the View of placed ConfigMaps, their copies leave the views
	// space; without the Deployment, its copies do.
	if err := pt.wds.Resource(edgev1alpha1.ViewsGVR).Delete(ctx, "policies", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pt.wds.Resource(deployGVR).Namespace("reports").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "no placed copies in the views space", func() error {
		l, err := pt.root.store.List(store.ListOptions{Space: layout.ViewsSpace("default")})
		if err != nil {
			return err
		}
		var got []string
		for _, o := range l.Items {
			got = append(got, o.Key.Name)
		}
		if !slices.Equal(got, []string{"e1.report-1"}) {
			return fmt.Errorf("holds %v", got)
		}
		return nil
	})
}
