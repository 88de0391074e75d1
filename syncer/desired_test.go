package syncer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/customize"
)

// inboxObject builds an inbox object from a JSON-able map.
func inboxObject(t testing.TB, res store.Resource, obj map[string]any) *store.Object {
	t.Helper()
	u := unstructured.Unstructured{Object: obj}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Object{Key: store.Key{Space: "inbox", Resource: res, Namespace: u.GetNamespace(), Name: u.GetName()}, Revision: 7, Data: data}
}

var (
	resDeployments = store.Resource{Group: "apps", Resource: "deployments"}
	resConfigMaps  = store.Resource{Resource: "configmaps"}
	resNamespaces  = store.Resource{Resource: "namespaces"}
	resTargets     = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}
	resLocations   = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceLocations}
	resCustomizers = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceCustomizers}
)

func syncTargetObj(name, location string, labels map[string]any) map[string]any {
	return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget",
		"metadata": map[string]any{"name": name, "labels": labels, "annotations": map[string]any{
			v1alpha1.LocationAnnotation: location, v1alpha1.DestinationsAnnotation: name, v1alpha1.SourceAnnotation: "inventory"}},
		"status": map[string]any{"path": "root/r1/" + name}}
}

func locationObj(name string, labels map[string]any) map[string]any {
	return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"instanceSelector": map[string]any{}}}
}

func customizerObj(ns, name string, repl ...map[string]any) map[string]any {
	r := make([]any, len(repl))
	for i := range repl {
		r[i] = repl[i]
	}
	return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer",
		"metadata": map[string]any{"name": name, "namespace": ns}, "replacements": r}
}

// mviDeployment is the user guide's example, as the root places it.
func mviDeployment(dests string, extraAnn map[string]any) map[string]any {
	ann := map[string]any{
		v1alpha1.ExpandParametersAnnotation: "true",
		v1alpha1.CustomizerAnnotation:       "per-store",
		v1alpha1.DestinationsAnnotation:     dests,
		v1alpha1.SourceAnnotation:           "default",
		"keep":                              "me",
	}
	for k, v := range extraAnn {
		ann[k] = v
	}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "resourceVersion": "41", "uid": "root-uid",
			"labels": map[string]any{"app": "web", "store": "%(syncTargetName)"}, "annotations": ann},
		"spec": map[string]any{"replicas": 1,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "shop:1.2",
					"env": []any{map[string]any{"name": "REGION", "value": "%(region)"}, map[string]any{"name": "ZONE", "value": "%(zone)"}}}}}}},
		"status": map[string]any{"replicas": 9}}
}

// stores is a region-like inbox holding three destinations' inventory,
// so one inbox serves every self.
func storesInbox(t *testing.T, objs ...*store.Object) []*store.Object {
	in := []*store.Object{
		inboxObject(t, resTargets, syncTargetObj("store-1", "stores", map[string]any{"zone": "a", "size": "small", "replicas": "1"})),
		inboxObject(t, resTargets, syncTargetObj("store-2", "stores", map[string]any{"zone": "b", "size": "large", "replicas": "3"})),
		inboxObject(t, resTargets, syncTargetObj("store-3", "stores", map[string]any{"zone": "c", "size": "large", "replicas": "5"})),
		inboxObject(t, resLocations, locationObj("stores", map[string]any{"region": "eu"})),
		inboxObject(t, resCustomizers, customizerObj("shop", "per-store",
			map[string]any{"path": "/spec/replicas", "value": "%(replicas)"},
			map[string]any{"path": "/spec/template/spec/containers/0/env/-", "value": `{"name": "STORE", "value": "%(syncTargetName)-%(zone)"}`},
			map[string]any{"path": "/spec/template/spec/containers/0/resources", "value": `{"limits": {"cpu": "2"}}`,
				"destinationSelector": map[string]any{"matchLabels": map[string]any{"size": "large"}}})),
		inboxObject(t, resCustomizers, customizerObj("shop", "canary",
			map[string]any{"path": "/spec/template/spec/containers/0/image", "value": `"shop:1.3-%(zone)"`})),
	}
	return append(in, objs...)
}

func desiredOnly(t *testing.T, inbox []*store.Object, self string) *unstructured.Unstructured {
	t.Helper()
	out, errs := Desired(inbox, self)
	if len(errs) > 0 {
		t.Fatalf("%s: errors %v", self, errs)
	}
	if len(out) != 1 {
		t.Fatalf("%s: %d objects, want 1", self, len(out))
	}
	return out[0].Object
}

func envValues(t *testing.T, u *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	env, _ := cs[0].(map[string]any)["env"].([]any)
	var parts []string
	for _, e := range env {
		m := e.(map[string]any)
		parts = append(parts, m["name"].(string)+"="+m["value"].(string))
	}
	return strings.Join(parts, ",")
}

// The MVI: one Deployment, three destinations, three results, each with
// its own parameters and only its Customizer rules.
func TestDesiredPerDestination(t *testing.T) {
	inbox := storesInbox(t, inboxObject(t, resDeployments, mviDeployment("store-1,store-2,store-3", nil)))
	want := map[string]struct {
		replicas int64
		env, cpu string
	}{
		"store-1": {1, "REGION=eu,ZONE=a,STORE=store-1-a", ""},
		"store-2": {3, "REGION=eu,ZONE=b,STORE=store-2-b", "2"},
		"store-3": {5, "REGION=eu,ZONE=c,STORE=store-3-c", "2"},
	}
	for self, w := range want {
		u := desiredOnly(t, inbox, self)
		if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != w.replicas {
			t.Errorf("%s: replicas %d, want %d", self, r, w.replicas)
		}
		if got := envValues(t, u); got != w.env {
			t.Errorf("%s: env %s, want %s", self, got, w.env)
		}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		cpu, _, _ := unstructured.NestedString(cs[0].(map[string]any), "resources", "limits", "cpu")
		if cpu != w.cpu {
			t.Errorf("%s: cpu %q, want %q", self, cpu, w.cpu)
		}
		if u.GetLabels()["store"] != self {
			t.Errorf("%s: label store=%q", self, u.GetLabels()["store"])
		}
		// Instructions and server metadata do not reach the cluster; the
		// user's own annotations do.
		if a := u.GetAnnotations(); len(a) != 1 || a["keep"] != "me" {
			t.Errorf("%s: annotations %v, want only keep=me", self, a)
		}
		if u.GetResourceVersion() != "" || u.GetUID() != "" || u.Object["status"] != nil {
			t.Errorf("%s: server-set fields survived: rv %q uid %q status %v", self, u.GetResourceVersion(), u.GetUID(), u.Object["status"])
		}
	}
}

// The root's per-destination Customizer choice wins over the object's
// annotation; an empty choice means none.
func TestDesiredOverrides(t *testing.T) {
	dep := mviDeployment("store-1,store-2,store-3", map[string]any{
		v1alpha1.CustomizerOverridesAnnotation: "store-2=shop/canary, store-3=",
		v1alpha1.ExpandParametersAnnotation:    "true",
	})
	inbox := storesInbox(t, inboxObject(t, resDeployments, dep))
	image := func(u *unstructured.Unstructured) string {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		return cs[0].(map[string]any)["image"].(string)
	}
	u1, u2, u3 := desiredOnly(t, inbox, "store-1"), desiredOnly(t, inbox, "store-2"), desiredOnly(t, inbox, "store-3")
	if r, _, _ := unstructured.NestedInt64(u1.Object, "spec", "replicas"); r != 1 || image(u1) != "shop:1.2" || !strings.Contains(envValues(t, u1), "STORE=") {
		t.Errorf("store-1 should use per-store: replicas %d image %s env %s", r, image(u1), envValues(t, u1))
	}
	if r, _, _ := unstructured.NestedInt64(u2.Object, "spec", "replicas"); r != 1 || image(u2) != "shop:1.3-b" || strings.Contains(envValues(t, u2), "STORE=") {
		t.Errorf("store-2 should use canary only: replicas %d image %s env %s", r, image(u2), envValues(t, u2))
	}
	if r, _, _ := unstructured.NestedInt64(u3.Object, "spec", "replicas"); r != 1 || image(u3) != "shop:1.2" || strings.Contains(envValues(t, u3), "STORE=") {
		t.Errorf("store-3 should use no customizer: replicas %d image %s env %s", r, image(u3), envValues(t, u3))
	}
	if _, ok := u3.GetAnnotations()[v1alpha1.CustomizerOverridesAnnotation]; ok {
		t.Error("the overrides annotation reached the cluster")
	}
}

// A missing parameter or Customizer fails that object only, with a
// reason, and nothing of it is returned.
func TestDesiredFailures(t *testing.T) {
	cm := func(name, value string, ann map[string]any) map[string]any {
		a := map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}
		for k, v := range ann {
			a[k] = v
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop", "annotations": a},
			"data":     map[string]any{"k": value}}
	}
	inbox := storesInbox(t,
		inboxObject(t, resNamespaces, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}),
		inboxObject(t, resConfigMaps, cm("ok", "%(zone)", nil)),
		inboxObject(t, resConfigMaps, cm("no-param", "%(zone)-%(floor)", nil)),
		inboxObject(t, resConfigMaps, cm("no-customizer", "x", map[string]any{v1alpha1.CustomizerAnnotation: "missing"})),
		inboxObject(t, resConfigMaps, cm("bad-ref", "x", map[string]any{v1alpha1.CustomizerAnnotation: "other/cust"})),
		inboxObject(t, resConfigMaps, cm("elsewhere", "x", map[string]any{v1alpha1.DestinationsAnnotation: "store-2,store-3"})),
	)
	out, errs := Desired(inbox, "store-1")
	var names []string
	for _, d := range out {
		names = append(names, d.Object.GetName())
		if d.Revision != 7 || d.Key.Space != "" {
			t.Errorf("%s: revision %d, key %v", d.Object.GetName(), d.Revision, d.Key)
		}
	}
	if strings.Join(names, ",") != "shop,ok" {
		t.Errorf("desired = %v, want [shop ok]", names)
	}
	if v, _, _ := unstructured.NestedString(out[1].Object.Object, "data", "k"); v != "a" {
		t.Errorf("ok: data.k = %q", v)
	}
	reasons := map[string]error{}
	for _, e := range errs {
		reasons[e.Key.Name] = e.Err
	}
	if len(reasons) != 3 {
		t.Fatalf("errors = %v", errs)
	}
	var pe *customize.ParameterError
	if err := reasons["no-param"]; !errors.As(err, &pe) || pe.Name != "floor" || pe.Where != "data.k" {
		t.Errorf("no-param: %v", err)
	}
	if err := reasons["no-customizer"]; !errors.Is(err, ErrCustomizerNotFound) || !strings.Contains(err.Error(), "shop/missing") {
		t.Errorf("no-customizer: %v", err)
	}
	if err := reasons["bad-ref"]; !errors.Is(err, ErrBadCustomizerRef) {
		t.Errorf("bad-ref: %v", err)
	}
	if got := (ObjectError{Key: store.Key{Resource: resConfigMaps, Namespace: "shop", Name: "x"}, Err: errors.New("why")}).Error(); got != "configmaps/shop/x: why" {
		t.Errorf("ObjectError = %q", got)
	}

	// Without its SyncTarget in the inbox, a destination has no
	// parameters: templates fail, plain objects do not.
	out, errs = Desired(inbox, "store-9")
	if len(out) != 1 || out[0].Object.GetName() != "shop" || len(errs) != 4 {
		t.Errorf("store-9: %d objects, errors %v", len(out), errs)
	}
}
