package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// applyClients serves a fresh Server and returns client-go clients for it.
func applyClients(t *testing.T) (*kubernetes.Clientset, dynamic.Interface, *rest.Config) {
	t.Helper()
	hs, _ := newTestServer(t, 1000)
	cfg := &rest.Config{Host: hs.URL, QPS: -1}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, dc, cfg
}

// managers returns "manager/operation[/subresource]" for each managedFields
// entry.
func managers(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		s := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// fieldsOf returns the fieldsV1 of manager's entry (operation op) as JSON.
func fieldsOf(t *testing.T, obj metav1.Object, manager string, op metav1.ManagedFieldsOperationType) string {
	t.Helper()
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == op && e.FieldsV1 != nil {
			return string(e.FieldsV1.Raw)
		}
	}
	t.Fatalf("no %s entry of %q in %v", op, manager, managers(obj))
	return ""
}

func TestApplyConfigMap(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")
	alice := metav1.ApplyOptions{FieldManager: "alice"}
	bob := metav1.ApplyOptions{FieldManager: "bob"}

	// Apply creates.
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithLabels(map[string]string{"app": "demo"}).WithData(map[string]string{"a": "1", "b": "2"}), alice)
	if err != nil {
		t.Fatalf("apply create: %v", err)
	}
	if cm.UID == "" || cm.Data["a"] != "1" || cm.Labels["app"] != "demo" {
		t.Fatalf("created: %+v", cm)
	}
	if got := managers(cm); !slices.Equal(got, []string{"alice/Apply"}) {
		t.Fatalf("managers after create: %v", got)
	}
	if f := fieldsOf(t, cm, "alice", metav1.ManagedFieldsOperationApply); f != `{"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:app":{}}}}` {
		t.Errorf("alice's fields: %s", f)
	}

	// Re-applying the same configuration writes nothing.
	again, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithLabels(map[string]string{"app": "demo"}).WithData(map[string]string{"a": "1", "b": "2"}), alice)
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("unchanged re-apply wrote: resourceVersion %s -> %s", cm.ResourceVersion, again.ResourceVersion)
	}

	// Another manager setting a field alice owns to another value conflicts.
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithData(map[string]string{"a": "9"}), bob)
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: want 409, got %v", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Message != `Apply failed with 1 conflict: conflict with "alice": .data.a` {
		t.Errorf("conflict message: %q", st.Message)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict ||
		st.Details.Causes[0].Field != ".data.a" || st.Details.Causes[0].Message != `conflict with "alice"` {
		t.Errorf("conflict details: %+v", st.Details)
	}

	// Same value: shared ownership, no conflict. Force: bob takes a.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithData(map[string]string{"b": "2"}), bob); err != nil {
		t.Fatalf("apply of an equal value: %v", err)
	}
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithData(map[string]string{"a": "9", "b": "2"}), metav1.ApplyOptions{FieldManager: "bob", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if cm.Data["a"] != "9" {
		t.Errorf("forced apply: data %v", cm.Data)
	}
	if f := fieldsOf(t, cm, "alice", metav1.ManagedFieldsOperationApply); strings.Contains(f, `"f:a"`) {
		t.Errorf("alice still owns data.a after bob forced it: %s", f)
	}

	// alice drops b and her label: b stays (bob owns it too), the label goes.
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithData(map[string]string{}), alice)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["b"] != "2" || cm.Data["a"] != "9" {
		t.Errorf("after alice dropped her fields: data %v", cm.Data)
	}
	if _, ok := cm.Labels["app"]; ok {
		t.Errorf("label app survived its only manager dropping it: %v", cm.Labels)
	}
	// bob drops a: nobody else owns it, it is removed.
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("cm", "default").WithData(map[string]string{"b": "2"}), bob)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["a"]; ok || cm.Data["b"] != "2" {
		t.Errorf("after bob dropped a: data %v", cm.Data)
	}

	// Server-side dry run stores nothing.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("dry", "default").WithData(map[string]string{"x": "y"}), metav1.ApplyOptions{FieldManager: "alice", DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run apply: %v", err)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run apply stored the object: %v", err)
	}
}

// Built-in kinds merge lists by their keys, as kube does: a second manager
// adds a container without owning or replacing the first.
func TestApplyDeploymentListMerge(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	deps := cs.AppsV1().Deployments("default")
	labels := map[string]string{"app": "web"}
	web := appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(2).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.25")))))
	d, err := deps.Apply(ctx, web, metav1.ApplyOptions{FieldManager: "team"})
	if err != nil {
		t.Fatalf("apply deployment: %v", err)
	}
	if d.Generation != 1 || *d.Spec.Replicas != 2 {
		t.Fatalf("created deployment: generation %d replicas %d", d.Generation, *d.Spec.Replicas)
	}
	sidecar := appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().
		WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("proxy").WithImage("envoy:1.30")))))
	d, err = deps.Apply(ctx, sidecar, metav1.ApplyOptions{FieldManager: "mesh"})
	if err != nil {
		t.Fatalf("apply sidecar: %v", err)
	}
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"app", "proxy"}) {
		t.Errorf("containers after the second manager's apply: %v, want [app proxy]", names)
	}
	if d.Generation != 2 {
		t.Errorf("generation after a spec change by apply: %d", d.Generation)
	}
	// Changing the other manager's container image conflicts, on that
	// container only.
	_, err = deps.Apply(ctx, appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().
		WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.27"))))), metav1.ApplyOptions{FieldManager: "mesh"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `.spec.template.spec.containers[name="app"].image`) || !strings.Contains(err.Error(), `conflict with "team"`) {
		t.Errorf("apply of another manager's image: want a conflict on containers[name=\"app\"].image with \"team\", got %v", err)
	}

	// Status: the main resource ignores it; the status subresource takes it
	// and records its manager with subresource status.
	withStatus := web.WithStatus(appsv1ac.DeploymentStatus().WithReplicas(7))
	if d, err = deps.Apply(ctx, withStatus, metav1.ApplyOptions{FieldManager: "team"}); err != nil {
		t.Fatal(err)
	}
	if d.Status.Replicas != 0 || strings.Contains(fieldsOf(t, d, "team", metav1.ManagedFieldsOperationApply), "f:status") {
		t.Errorf("apply of status through the main resource: status %+v, fields %s", d.Status, fieldsOf(t, d, "team", metav1.ManagedFieldsOperationApply))
	}
	d, err = deps.ApplyStatus(ctx, appsv1ac.Deployment("web", "default").WithStatus(appsv1ac.DeploymentStatus().WithReplicas(2).WithReadyReplicas(1)), metav1.ApplyOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatalf("apply status: %v", err)
	}
	if d.Status.Replicas != 2 || d.Status.ReadyReplicas != 1 || d.Generation != 2 {
		t.Errorf("after status apply: status %+v generation %d", d.Status, d.Generation)
	}
	if got := managers(d); !slices.Contains(got, "controller/Apply/status") {
		t.Errorf("managers after status apply: %v", got)
	}
	// The scale subresource records its writer with subresource scale;
	// an apply of replicas then conflicts with it, as with kube's HPA.
	sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 5
	if _, err := deps.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{FieldManager: "autoscaler"}); err != nil {
		t.Fatal(err)
	}
	if d, err = deps.Get(ctx, "web", metav1.GetOptions{}); err != nil || !slices.Contains(managers(d), "autoscaler/Update/scale") {
		t.Errorf("managers after a scale update: %v %v", managers(d), err)
	}
	_, err = deps.Apply(ctx, web, metav1.ApplyOptions{FieldManager: "team"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "autoscaler" with subresource "scale" using apps/v1: .spec.replicas`) {
		t.Errorf("apply of replicas after a scale update: want a conflict with the autoscaler, got %v", err)
	}
	err = cs.AppsV1().RESTClient().Patch(types.ApplyPatchType).Namespace("default").Resource("deployments").Name("web").SubResource("scale").
		Param("fieldManager", "autoscaler").Body([]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":3}}`)).Do(ctx).Error()
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("apply to /scale: want 415, got %v", err)
	}
	if _, err := deps.ApplyStatus(ctx, appsv1ac.Deployment("missing", "default").WithStatus(appsv1ac.DeploymentStatus().WithReplicas(1)), metav1.ApplyOptions{FieldManager: "controller"}); !apierrors.IsNotFound(err) {
		t.Errorf("status apply to a missing object: want 404, got %v", err)
	}
}

// Creates, updates and patches record their manager: the fieldManager
// parameter, else the User-Agent's product name.
func TestManagedFieldsOnWrites(t *testing.T) {
	cs, _, cfg := applyClients(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); !slices.Equal(got, []string{"creator/Update"}) {
		t.Fatalf("managers after create: %v", got)
	}
	if f := fieldsOf(t, cm, "creator", metav1.ManagedFieldsOperationUpdate); f != `{"f:data":{".":{},"f:a":{}}}` {
		t.Errorf("creator's fields: %s", f)
	}

	uaCfg := rest.CopyConfig(cfg)
	uaCfg.UserAgent = "my-controller/v1.2 (linux/amd64)"
	uaCS := kubernetes.NewForConfigOrDie(uaCfg)
	cm.Data["b"] = "2"
	cm, err = uaCS.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); !slices.Equal(got, []string{"creator/Update", "my-controller/Update"}) {
		t.Fatalf("managers after update: %v", got)
	}
	if f := fieldsOf(t, cm, "my-controller", metav1.ManagedFieldsOperationUpdate); f != `{"f:data":{"f:b":{}}}` {
		t.Errorf("updater's fields: %s", f)
	}

	// An update that changes nothing writes nothing (managed fields
	// timestamps included).
	same, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != cm.ResourceVersion || !slices.Equal(managers(same), managers(cm)) {
		t.Errorf("no-op update wrote: rv %s -> %s, managers %v", cm.ResourceVersion, same.ResourceVersion, managers(same))
	}

	cm, err = cms.Patch(ctx, "w", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); !slices.Equal(got, []string{"creator/Update", "my-controller/Update", "patcher/Update"}) {
		t.Errorf("managers after patch: %v", got)
	}

	// An apply later takes over fields without conflict only with force.
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("w", "default").WithData(map[string]string{"a": "changed"}), metav1.ApplyOptions{FieldManager: "applier"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `Apply failed with 1 conflict: conflict with "creator" using v1: .data.a`) {
		t.Errorf("apply over an Update manager's field: want kube's conflict naming creator, got %v", err)
	}

	// Resets: an empty list, or a list of one empty entry, clears them.
	for _, patch := range []string{`{"metadata":{"managedFields":[{}]}}`, `[{"op":"replace","path":"/metadata/managedFields","value":[]}]`} {
		pt := types.MergePatchType
		if strings.HasPrefix(patch, "[") {
			pt = types.JSONPatchType
			if _, err := cms.Patch(ctx, "w", types.MergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{FieldManager: "again"}); err != nil {
				t.Fatal(err)
			}
		}
		cm, err = cms.Patch(ctx, "w", pt, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("reset with %s: %v", patch, err)
		}
		if len(cm.ManagedFields) != 0 {
			t.Errorf("after reset with %s: %v", patch, managers(cm))
		}
	}
	// With none recorded, updates record nothing until the next apply (as
	// for objects that predate managed fields).
	cm, err = cms.Patch(ctx, "w", types.MergePatchType, []byte(`{"data":{"d":"4"}}`), metav1.PatchOptions{FieldManager: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 0 {
		t.Errorf("update of an object without managed fields recorded: %v", managers(cm))
	}
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("w", "default").WithData(map[string]string{"e": "5"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); !slices.Equal(got, []string{"applier/Apply", "before-first-apply/Update"}) {
		t.Errorf("managers after the first apply: %v", got)
	}

	// Explicit managedFields in an update replace the recorded ones.
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:a":{}}}`)}}}
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); !slices.Equal(got, []string{"someone/Apply"}) {
		t.Errorf("managers after setting them: %v", got)
	}

	// A fieldManager kube refuses is refused.
	long := strings.Repeat("m", 129)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "long"}}, metav1.CreateOptions{FieldManager: long}); !apierrors.IsInvalid(err) {
		t.Errorf("create with a 129-byte fieldManager: want 422, got %v", err)
	}
}

// The PATCH options and media types of apply.
func TestApplyRequests(t *testing.T) {
	hs, _ := newTestServer(t, 100)
	send := func(method, path, ct, body string) (int, metav1.Status) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp.StatusCode, st
	}
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r\ndata:\n  k: v\n"
	path := "/api/v1/namespaces/default/configmaps/r"

	cases := []struct {
		name, query, ct, body string
		code                  int
		msg                   string
	}{
		{"no fieldManager", "", "application/apply-patch+yaml", cm, 422, `fieldManager: Required value: is required for apply patch`},
		{"cbor", "?fieldManager=m", "application/apply-patch+cbor", cm, 415, "application/apply-patch+yaml"},
		{"force on a merge patch", "?force=true", "application/merge-patch+json", `{"data":{"k":"w"}}`, 422, `force: Forbidden: may not be specified for non-apply patch`},
		{"wrong name", "?fieldManager=m", "application/apply-patch+yaml", strings.Replace(cm, "name: r", "name: s", 1), 400, "the name of the object (s) does not match the name on the URL (r)"},
		{"wrong namespace", "?fieldManager=m", "application/apply-patch+yaml", strings.Replace(cm, "name: r", "name: r\n  namespace: other", 1), 400, "the namespace of the provided object does not match"},
		{"no apiVersion", "?fieldManager=m", "application/apply-patch+yaml", "kind: ConfigMap\nmetadata: {name: r}\n", 400, "invalid object type"},
		{"unknown field", "?fieldManager=m", "application/apply-patch+yaml", cm + "bogus: 1\n", 400, ".bogus: field not declared in schema"},
		{"managedFields set", "?fieldManager=m", "application/apply-patch+yaml", strings.Replace(cm, "name: r", "name: r\n  managedFields: [{manager: x}]", 1), 400, "metadata.managedFields must be nil"},
		{"duplicate field, Strict", "?fieldManager=m&fieldValidation=Strict", "application/apply-patch+yaml", cm + "data: {}\n", 400, "error strict decoding patch"},
		{"duplicate field in JSON, Strict", "?fieldManager=m&fieldValidation=Strict", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"r"},"data":{},"data":{}}`, 400, `error strict decoding patch: duplicate field "data"`},
		{"duplicate field, Ignore", "?fieldManager=m&fieldValidation=Ignore&dryRun=All", "application/apply-patch+yaml", cm + "data: {}\n", 201, ""},
		{"YAML flow style", "?fieldManager=m&dryRun=All", "application/apply-patch+yaml", "{apiVersion: v1, kind: ConfigMap, metadata: {name: r}}", 201, ""},
		{"not YAML", "?fieldManager=m", "application/apply-patch+yaml", "{", 400, "error decoding patch"},
		{"no such namespace", "?fieldManager=m", "application/apply-patch+yaml", strings.Replace(cm, "name: r", "name: r\n  namespace: nope", 1), 404, `namespaces "nope" not found`},
		{"create", "?fieldManager=m", "application/apply-patch+yaml", cm, 201, ""},
		{"update", "?fieldManager=m", "application/apply-patch+yaml; charset=utf-8", strings.Replace(cm, "k: v", "k: w", 1), 200, ""},
	}
	for _, c := range cases {
		path := path
		if c.code == 404 {
			path = strings.Replace(path, "/default/", "/nope/", 1)
		}
		code, st := send("PATCH", path+c.query, c.ct, c.body)
		if code != c.code || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, code, st.Message, c.code, c.msg)
		}
	}

	// Cluster-scoped kinds: a namespace in the configuration is dropped,
	// as on create.
	code, st := send("PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/reader?fieldManager=m", "application/apply-patch+yaml",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules:\n- {apiGroups: [''], resources: [pods], verbs: [get]}\n")
	if code != 201 {
		t.Errorf("apply a ClusterRole: %d %s", code, st.Message)
	}
}

// Cluster-scoped built-in kinds, through typed ApplyConfigurations, and an
// object that predates managed fields (the default namespace).
func TestApplyClusterScoped(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	cr, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1ac.ClusterRole("reader").WithRules(
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods").WithVerbs("get", "list")), metav1.ApplyOptions{FieldManager: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Namespace != "" || len(cr.Rules) != 1 || !slices.Equal(managers(cr), []string{"ops/Apply"}) {
		t.Errorf("applied cluster role: %+v", cr)
	}
	ns, err := cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace("default").WithLabels(map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["team"] != "a" || ns.Labels["kubernetes.io/metadata.name"] != "default" {
		t.Errorf("applied namespace labels: %v", ns.Labels)
	}
	if got := managers(ns); !slices.Equal(got, []string{"before-first-apply/Update", "ops/Apply"}) {
		t.Errorf("managers of a namespace created without them, after an apply: %v", got)
	}
}

var gizmoGVR = schema.GroupVersionResource{Group: "test.canopy.dev", Version: "v1", Resource: "gizmos"}

// gizmoCRD has a keyed list (x-kubernetes-list-type: map), a set and a
// status subresource; scope is namespaced or cluster.
func gizmoCRD(scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.test.canopy.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "test.canopy.dev",
			Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer", Minimum: ptr.To(1.0)},
							"mode": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"fast"`)}},
							"ports": {Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"name"},
								Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
									Type: "object", Required: []string{"name"},
									Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "port": {Type: "integer"}},
								}}},
							"tags": {Type: "array", XListType: ptr.To("set"), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": str}},
					},
				}},
			}},
		},
	}
}

func gizmo(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.canopy.dev/v1", "kind": "Gizmo", "metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func TestApplyCustomResource(t *testing.T) {
	for _, scope := range []apiextensionsv1.ResourceScope{apiextensionsv1.NamespaceScoped, apiextensionsv1.ClusterScoped} {
		t.Run(string(scope), func(t *testing.T) {
			_, dc, _ := applyClients(t)
			ctx := t.Context()
			crdObj, err := toUnstructuredMap(gizmoCRD(scope))
			if err != nil {
				t.Fatal(err)
			}
			crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
			// The CRD itself, by apply (its own typed schema).
			if _, err := crds.Apply(ctx, "gizmos.test.canopy.dev", &unstructured.Unstructured{Object: crdObj}, metav1.ApplyOptions{FieldManager: "installer"}); err != nil {
				t.Fatalf("apply CRD: %v", err)
			}
			ns := ""
			if scope == apiextensionsv1.NamespaceScoped {
				ns = "default"
			}
			gizmos := dynamic.ResourceInterface(dc.Resource(gizmoGVR))
			if ns != "" {
				gizmos = dc.Resource(gizmoGVR).Namespace(ns)
			}

			g, err := gizmos.Apply(ctx, "g", gizmo(ns, "g", map[string]any{
				"size":  int64(2),
				"ports": []any{map[string]any{"name": "http", "port": int64(80)}},
				"tags":  []any{"a"},
			}), metav1.ApplyOptions{FieldManager: "alice"})
			if err != nil {
				t.Fatalf("apply create: %v", err)
			}
			if mode, _, _ := unstructured.NestedString(g.Object, "spec", "mode"); mode != "fast" || g.GetGeneration() != 1 {
				t.Errorf("created gizmo: mode %q (default), generation %d", mode, g.GetGeneration())
			}
			rv := g.GetResourceVersion()
			if g, err = gizmos.Apply(ctx, "g", gizmo(ns, "g", map[string]any{
				"size":  int64(2),
				"ports": []any{map[string]any{"name": "http", "port": int64(80)}},
				"tags":  []any{"a"},
			}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil || g.GetResourceVersion() != rv {
				t.Errorf("unchanged re-apply: %v, rv %s -> %s", err, rv, g.GetResourceVersion())
			}

			// bob adds a port and a tag: keyed list and set merge.
			g, err = gizmos.Apply(ctx, "g", gizmo(ns, "g", map[string]any{
				"ports": []any{map[string]any{"name": "metrics", "port": int64(9090)}},
				"tags":  []any{"b"},
			}), metav1.ApplyOptions{FieldManager: "bob"})
			if err != nil {
				t.Fatalf("second manager: %v", err)
			}
			ports, _, _ := unstructured.NestedSlice(g.Object, "spec", "ports")
			tags, _, _ := unstructured.NestedStringSlice(g.Object, "spec", "tags")
			if len(ports) != 2 || !slices.Equal(tags, []string{"a", "b"}) {
				t.Errorf("after bob's apply: ports %v tags %v", ports, tags)
			}

			// Conflict on alice's port, then force.
			conflicting := gizmo(ns, "g", map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(8080)}}})
			_, err = gizmos.Apply(ctx, "g", conflicting, metav1.ApplyOptions{FieldManager: "bob"})
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice": .spec.ports[name="http"].port`) {
				t.Fatalf("conflicting apply: %v", err)
			}
			if _, err = gizmos.Apply(ctx, "g", conflicting, metav1.ApplyOptions{FieldManager: "bob", Force: true}); err != nil {
				t.Fatalf("forced apply: %v", err)
			}

			// A field the schema does not declare is a 400.
			if _, err := gizmos.Apply(ctx, "g", gizmo(ns, "g", map[string]any{"colour": "red"}), metav1.ApplyOptions{FieldManager: "bob"}); !apierrors.IsBadRequest(err) {
				t.Errorf("apply of an undeclared field: want 400, got %v", err)
			}
			// Validation still applies.
			if _, err := gizmos.Apply(ctx, "g", gizmo(ns, "g", map[string]any{"size": int64(0)}), metav1.ApplyOptions{FieldManager: "carol", Force: true}); !apierrors.IsInvalid(err) {
				t.Errorf("apply of an invalid value: want 422, got %v", err)
			}

			// Status through the status subresource only.
			st := gizmo(ns, "g", nil)
			st.Object["status"] = map[string]any{"phase": "Ready"}
			g, err = gizmos.ApplyStatus(ctx, "g", st, metav1.ApplyOptions{FieldManager: "controller"})
			if err != nil {
				t.Fatalf("apply status: %v", err)
			}
			if phase, _, _ := unstructured.NestedString(g.Object, "status", "phase"); phase != "Ready" {
				t.Errorf("status after status apply: %v", g.Object["status"])
			}
			if !slices.Contains(managers(g), "controller/Apply/status") {
				t.Errorf("managers after status apply: %v", managers(g))
			}
			st.Object["status"] = map[string]any{"phase": "Broken"}
			if g, err = gizmos.Apply(ctx, "g", st, metav1.ApplyOptions{FieldManager: "controller"}); err != nil {
				t.Fatal(err)
			}
			if phase, _, _ := unstructured.NestedString(g.Object, "status", "phase"); phase != "Ready" {
				t.Errorf("status changed through the main resource: %v", g.Object["status"])
			}
		})
	}
}

// BenchmarkApply measures one server-side apply through the server's
// handler (no network): a change that is written, and a re-apply that
// changes nothing. MergePatch is the same change as a merge patch, for
// the cost of the field manager on an ordinary write.
func BenchmarkApply(b *testing.B) {
	cases := []struct {
		name, path, create string
		apply              func(i int) string
		merge              func(i int) string
	}{
		{
			name: "ConfigMap", path: "/api/v1/namespaces/default/configmaps/bench",
			apply: func(i int) string {
				return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench","labels":{"app":"bench"}},"data":{"a":"1","b":"2","counter":"%d"}}`, i)
			},
			merge: func(i int) string { return fmt.Sprintf(`{"data":{"counter":"%d"}}`, i) },
		},
		{
			name: "Deployment", path: "/apis/apps/v1/namespaces/default/deployments/bench",
			apply: func(i int) string {
				return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bench","labels":{"app":"bench"}},
"spec":{"replicas":%d,"selector":{"matchLabels":{"app":"bench"}},"template":{"metadata":{"labels":{"app":"bench"}},
"spec":{"containers":[{"name":"app","image":"nginx:1.25","ports":[{"containerPort":80}],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}},{"name":"sidecar","image":"envoy:1.30"}]}}}}`, 1+i%5)
			},
			merge: func(i int) string { return fmt.Sprintf(`{"spec":{"replicas":%d}}`, 1+i%5) },
		},
	}
	for _, c := range cases {
		st := newBenchStore(b)
		srv := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
		if err := srv.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
			b.Fatal(err)
		}
		patch := func(b *testing.B, ct, query, body string, want int) {
			req := httptest.NewRequest("PATCH", c.path+query, strings.NewReader(body))
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != want {
				b.Fatalf("%s: %d %s", c.name, rec.Code, rec.Body)
			}
		}
		patch(b, "application/apply-patch+yaml", "?fieldManager=bench", c.apply(0), http.StatusCreated)
		b.Run(c.name+"/change", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				patch(b, "application/apply-patch+yaml", "?fieldManager=bench", c.apply(i+1), http.StatusOK)
			}
		})
		b.Run(c.name+"/unchanged", func(b *testing.B) {
			body := c.apply(7)
			patch(b, "application/apply-patch+yaml", "?fieldManager=bench", body, http.StatusOK)
			for b.Loop() {
				patch(b, "application/apply-patch+yaml", "?fieldManager=bench", body, http.StatusOK)
			}
		})
		b.Run(c.name+"/merge-patch", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				patch(b, "application/merge-patch+json", "?fieldManager=other", c.merge(i+1), http.StatusOK)
			}
		})
	}
}

func newBenchStore(b *testing.B) *store.Store {
	b.Helper()
	st := store.New(store.Options{HistorySize: 100, Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	b.Cleanup(st.Close)
	return st
}
