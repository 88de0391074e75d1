package kubeapi

// Answers that must be kube-apiserver's to the byte: the messages, codes
// and details test/differential found different once, and the managed
// fields of Update operations and of /scale writes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/layout"
)

// status returns the Status of an API error.
func status(t *testing.T, err error) metav1.Status {
	t.Helper()
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		t.Fatalf("want an API error, got %v", err)
	}
	return st.ErrStatus
}

// rawStatus sends a request to the server at url and decodes the Status
// it answers (for a success, a Status with the code only), with the
// warnings it sent.
func rawStatus(t *testing.T, url, method, path, contentType, body string, params ...string) (metav1.Status, []string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	q := req.URL.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Add(params[i], params[i+1])
	}
	req.URL.RawQuery = q.Encode()
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if st.Kind != "Status" {
		st = metav1.Status{Code: int32(resp.StatusCode)}
	}
	return st, resp.Header.Values("Warning")
}

// fidelityServer serves a fresh Server and returns a clientset for it and
// its URL, for raw requests.
func fidelityServer(t *testing.T) (*kubernetes.Clientset, string) {
	t.Helper()
	hs, _ := newTestServer(t, 1000)
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, QPS: -1}), hs.URL
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

// A dry-run create of a name that exists is a 409, as with kube's dry-run
// storage.
func TestDryRunCreateExisting(t *testing.T) {
	cs, _ := fidelityServer(t)
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(t.Context(), configMap("alpha", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := cms.Create(t.Context(), configMap("alpha", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsAlreadyExists(err) || err.Error() != `configmaps "alpha" already exists` {
		t.Errorf("dry-run create of an existing name: %v", err)
	}
}

// generateName works for custom resources: the name is generated before
// the custom resource's validation needs it.
func TestCustomResourceGenerateName(t *testing.T) {
	hs, _ := newTestServer(t, 100)
	createWidgetCRD(t, hs, layout.DefaultSpace, widgetCRD(""))
	dc := dynamic.NewForConfigOrDie(&rest.Config{Host: hs.URL})
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"generateName": "wgen-"}, "spec": map[string]any{"size": int64(2)},
	}}
	got, err := dc.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default").
		Create(t.Context(), w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if name := got.GetName(); !strings.HasPrefix(name, "wgen-") || len(name) != len("wgen-")+5 {
		t.Errorf("generated name %q", name)
	}
}

// Duplicate fields are strict decoding errors, reported with the unknown
// fields: 400 with kube's decoding message under Strict, warnings under
// Warn, nothing under Ignore; in JSON and in YAML, on create and update.
func TestStrictDuplicateFields(t *testing.T) {
	_, url := fidelityServer(t)
	const base = "/api/v1/namespaces/default/configmaps"
	dupJSON := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"k":"v"},"data":{"k":"w"}}`
	dupYAML := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\ndata:\n  k: w\n"
	for _, c := range []struct {
		name, ct, body, validation string
		code                       int32
		message                    string
		warnings                   []string
	}{
		{"json-strict", "application/json", dupJSON, "Strict", 400,
			`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data"`, nil},
		{"json-warn", "application/json", dupJSON, "Warn", 0, "", []string{`299 - "duplicate field \"data\""`}},
		{"json-ignore", "application/json", dupJSON, "Ignore", 0, "", nil},
		{"yaml-strict", "application/yaml", dupYAML, "Strict", 400,
			"ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 8: key \"data\" already set in map", nil},
		{"yaml-warn", "application/yaml", dupYAML, "Warn", 0, "", []string{`299 - "line 8: key \"data\" already set in map"`}},
		{"unknown-strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","bogus":1},"spec":{}}`, "Strict", 400,
			`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "metadata.bogus", unknown field "spec"`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := strings.ReplaceAll(c.body, "%s", c.name)
			st, warnings := rawStatus(t, url, "POST", base, c.ct, body, "fieldValidation", c.validation)
			if c.code == 0 {
				if st.Code != http.StatusCreated {
					t.Fatalf("want 201, got %+v", st)
				}
			} else if st.Code != c.code || st.Message != c.message {
				t.Errorf("got %d %q\nwant %d %q", st.Code, st.Message, c.code, c.message)
			}
			if !slices.Equal(warnings, c.warnings) {
				t.Errorf("warnings %q, want %q", warnings, c.warnings)
			}
		})
	}
	// Update: the same decoding.
	st, _ := rawStatus(t, url, "PUT", base+"/json-warn", "application/json", strings.ReplaceAll(dupJSON, "%s", "json-warn"), "fieldValidation", "Strict")
	if want := `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data"`; st.Code != 400 || st.Message != want {
		t.Errorf("update: %d %q, want 400 %q", st.Code, st.Message, want)
	}
}

// Bad query options are kube's 422 naming the options type, with a cause.
func TestInvalidOptions(t *testing.T) {
	cs, url := fidelityServer(t)
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"o"}}`
	if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("beta", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, path, body, contentType string
		params                                []string
		message                               string
	}{
		{"fieldValidation", "POST", "/api/v1/namespaces/default/configmaps", cm, "application/json", []string{"fieldValidation", "Bogus"},
			`CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"`},
		{"dryRun", "POST", "/api/v1/namespaces/default/configmaps", cm, "application/json", []string{"dryRun", "Bogus"},
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All"`},
		{"update", "PUT", "/api/v1/namespaces/default/configmaps/beta", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"beta"}}`, "application/json", []string{"dryRun", "Bogus"},
			`UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All"`},
		{"patch", "PATCH", "/api/v1/namespaces/default/configmaps/beta", `{}`, "application/merge-patch+json", []string{"fieldValidation", "Bogus"},
			`PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"`},
		{"propagationPolicy", "DELETE", "/api/v1/namespaces/default/configmaps/beta", "", "", []string{"propagationPolicy", "Sideways"},
			`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"`},
	} {
		st, _ := rawStatus(t, url, c.method, c.path, c.contentType, c.body, c.params...)
		if st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid || st.Message != c.message ||
			st.Details == nil || st.Details.Group != "meta.k8s.io" || len(st.Details.Causes) != 1 {
			t.Errorf("%s: got %d %s %q %+v\nwant 422 Invalid %q", c.name, st.Code, st.Reason, st.Message, st.Details, c.message)
		}
	}
}

// Messages of bad requests.
func TestRequestErrorMessages(t *testing.T) {
	cs, url := fidelityServer(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")
	alpha, err := cms.Create(ctx, configMap("alpha", map[string]string{"a": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, code int32, reason metav1.StatusReason, message string) {
		t.Helper()
		st := status(t, err)
		if st.Code != code || st.Reason != reason || st.Message != message {
			t.Errorf("%s:\n got %d %s %q\nwant %d %s %q", what, st.Code, st.Reason, st.Message, code, reason, message)
		}
	}
	_, err = cms.List(ctx, metav1.ListOptions{LabelSelector: "app in (web"})
	check("label selector", err, 400, metav1.StatusReasonBadRequest, `unable to parse requirement: found '', expected: ',' or ')'`)
	_, err = cms.List(ctx, metav1.ListOptions{FieldSelector: "data.a=1"})
	check("field selector", err, 400, metav1.StatusReasonBadRequest, `"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"`)
	_, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"})
	check("field selector of pods", err, 400, metav1.StatusReasonBadRequest, `field label not supported: spec.bogus`)
	_, err = cms.List(ctx, metav1.ListOptions{Continue: "bm90LWpzb24"})
	check("continue", err, 400, metav1.StatusReasonBadRequest, `invalid continue token: continue key is not valid: invalid character 'o' in literal null (expecting 'u')`)

	// JSON patches: kube's generic 422 without details; a body that is not
	// JSON is "invalid JSON patch".
	st, _ := rawStatus(t, url, "PATCH", "/api/v1/namespaces/default/configmaps/alpha", string(types.JSONPatchType), `[{"op":"test","path":"/data/a","value":"nope"}]`)
	if st.Code != 422 || st.Message != "the server rejected our request due to an error in our request" || st.Details == nil || !reflect.DeepEqual(*st.Details, metav1.StatusDetails{}) {
		t.Errorf("failing JSON patch test: %+v", st)
	}
	st, _ = rawStatus(t, url, "PATCH", "/api/v1/namespaces/default/configmaps/alpha", string(types.MergePatchType), `{"data":`)
	if st.Code != 400 || st.Message != "invalid JSON patch" {
		t.Errorf("patch that is not JSON: %+v", st)
	}

	// Delete preconditions: kube's messages, naming the kind.
	err = cms.Delete(ctx, "alpha", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To[types.UID]("nope")}})
	check("uid precondition", err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on ConfigMap "alpha": the UID in the precondition (nope) does not match the UID in record (`+string(alpha.UID)+`). The object might have been deleted and then recreated`)
	if d := status(t, err).Details; d == nil || d.Kind != "ConfigMap" {
		t.Errorf("uid precondition details: %+v", d)
	}
	err = cms.Delete(ctx, "alpha", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("1")}})
	check("resourceVersion precondition", err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on ConfigMap "alpha": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (`+alpha.ResourceVersion+`). The object might have been modified`)

	// A strict merge patch that adds an unknown field: kube's 422 on
	// "patch", quoting the patched object as kube encodes it.
	st, _ = rawStatus(t, url, "PATCH", "/api/v1/namespaces/default/configmaps/alpha", string(types.MergePatchType), `{"extra":true}`, "fieldValidation", "Strict")
	cur, err := cms.Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	curJSON, _ := json.Marshal(cur)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(curJSON, &m)
	patched := `{"apiVersion":"v1","data":{"a":"1"},"extra":true,"kind":"ConfigMap","metadata":` + string(m["metadata"]) + `}`
	wantMsg := ` "" is invalid: patch: Invalid value: ` + strconvQuote(patched) + `: strict decoding error: unknown field "extra"`
	if st.Code != 422 || st.Message != wantMsg || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "patch" {
		t.Errorf("strict merge patch:\n got %d %q\nwant 422 %q", st.Code, st.Message, wantMsg)
	}

	// A strategic merge patch quotes the patch, as a Go map.
	st, _ = rawStatus(t, url, "PATCH", "/api/v1/namespaces/default/configmaps/alpha", string(types.StrategicMergePatchType), `{"extra":true}`, "fieldValidation", "Strict")
	if want := ` "" is invalid: patch: Invalid value: "map[extra:true]": strict decoding error: unknown field "extra"`; st.Code != 422 || st.Message != want {
		t.Errorf("strict strategic merge patch:\n got %d %q\nwant 422 %q", st.Code, st.Message, want)
	}

	// 415 lists the patch types as kube does.
	err = cs.CoreV1().RESTClient().Patch(types.PatchType("application/bogus")).Namespace("default").Resource("configmaps").Name("alpha").Body([]byte(`{}`)).Do(ctx).Error()
	check("415", err, 415, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml")
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s) // no HTML or non-ASCII here: the same as %q
	return string(b)
}

// A page of a list filtered by a selector has no remainingItemCount.
func TestListRemainingItemCount(t *testing.T) {
	cs, _ := fidelityServer(t)
	ctx := t.Context()
	for _, n := range []string{"a", "b", "c"} {
		cm := configMap(n, nil)
		cm.Labels = map[string]string{"app": "x"}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || l.RemainingItemCount == nil || *l.RemainingItemCount != 2 {
		t.Errorf("page without selector: remainingItemCount %v, %v", l.RemainingItemCount, err)
	}
	l, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: "app=x"})
	if err != nil || l.Continue == "" || l.RemainingItemCount != nil {
		t.Errorf("page with a selector: continue %q, remainingItemCount %v, %v", l.Continue, l.RemainingItemCount, err)
	}
}

// DELETE answers as kube's registries do: a namespace being deleted with
// 200 and no grace period, a custom resource with a Status.
func TestDeleteResponses(t *testing.T) {
	hs, _ := newTestServer(t, 1000)
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL})
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int
	res := cs.CoreV1().RESTClient().Delete().Resource("namespaces").Name("gone").Do(ctx).StatusCode(&code)
	raw, err := res.Raw()
	if err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	_ = json.Unmarshal(raw, &ns)
	if code != http.StatusOK || ns.DeletionTimestamp == nil || ns.DeletionGracePeriodSeconds != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("namespace delete: %d %s", code, raw)
	}

	createWidgetCRD(t, hs, layout.DefaultSpace, widgetCRD(""))
	dc := dynamic.NewForConfigOrDie(&rest.Config{Host: hs.URL})
	widgets := dc.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	w, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w2 := w.DeepCopy()
	w2.SetResourceVersion("")
	w2.SetUID("")
	w2.SetName("w2")
	created, err := widgets.Create(ctx, w2, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err = cs.CoreV1().RESTClient().Delete().AbsPath("/apis/example.com/v1/namespaces/default/widgets/w2").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	_ = json.Unmarshal(raw, &st)
	want := metav1.StatusDetails{Name: "w2", Group: "example.com", Kind: "widgets", UID: created.GetUID()}
	if st.Kind != "Status" || st.Status != metav1.StatusSuccess || st.Details == nil || !reflect.DeepEqual(*st.Details, want) {
		t.Errorf("custom resource delete: %s", raw)
	}
}

// sendInitialEvents needs no bookmarks (kube 1.37): the initial events come
// without the bookmark that would end them. Its options are checked as
// kube checks them.
func TestWatchInitialEventsWithoutBookmarks(t *testing.T) {
	cs, url := fidelityServer(t)
	ctx := t.Context()
	for _, n := range []string{"w1", "w2"} {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(wctx, "GET", url+
		"/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(sc.Bytes(), &ev)
		events = append(events, ev.Type)
	}
	if resp.StatusCode != http.StatusOK || !slices.Equal(events, []string{"ADDED", "ADDED"}) {
		t.Errorf("watch-list without bookmarks: %d %v", resp.StatusCode, events)
	}

	st, _ := rawStatus(t, url, "GET", "/api/v1/namespaces/default/configmaps", "", "",
		"watch", "true", "sendInitialEvents", "true", "resourceVersionMatch", "Exact", "allowWatchBookmarks", "true")
	want := `ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]`
	if st.Code != 422 || st.Message != want {
		t.Errorf("resourceVersionMatch=Exact: %d %q, want 422 %q", st.Code, st.Message, want)
	}
}

// Update operations record what kube records: struct fields the empty
// object already has (spec, template, strategy...) and an empty struct
// the client sent are not fields the manager set.
func TestManagedFieldsUpdatePath(t *testing.T) {
	cs, _ := fidelityServer(t)
	ctx := t.Context()
	// The typed client sends "spec": {}.
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mf", Labels: map[string]string{"a": "b"}}}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if f := fieldsOf(t, ns, "creator", metav1.ManagedFieldsOperationUpdate); !sameJSON(f, `{"f:metadata":{"f:labels":{".":{},"f:a":{},"f:kubernetes.io/metadata.name":{}}}}`) {
		t.Errorf("namespace: %s", f)
	}

	labels := map[string]string{"app": "web"}
	d, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}}, Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
			}}}},
		},
	}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver 1.37's record of the same create.
	const kube = `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}`
	if f := fieldsOf(t, d, "creator", metav1.ManagedFieldsOperationUpdate); !sameJSON(f, kube) {
		t.Errorf("deployment create:\n got %s\nwant %s", f, kube)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// Writes through /scale are recorded as kube's scale subresources record
// them.
func TestScaleManagedFields(t *testing.T) {
	cs, _ := fidelityServer(t)
	ctx := t.Context()
	deps := cs.AppsV1().Deployments("default")
	labels := map[string]string{"app": "s"}
	alice := appsv1ac.Deployment("s", "default").WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.27")))))
	if _, err := deps.Apply(ctx, alice, metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Fatal(err)
	}
	scale := func(name string, n int32, manager string) {
		t.Helper()
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		if _, err := deps.UpdateScale(ctx, name, sc, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody manages the replicas: kube records nothing for the scale
	// write, and alice may then apply replicas.
	scale("s", 2, "hpa")
	d, err := deps.Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(d); !slices.Equal(got, []string{"alice/Apply"}) || *d.Spec.Replicas != 2 {
		t.Errorf("after scaling replicas nobody managed: managers %v, replicas %d", got, *d.Spec.Replicas)
	}
	if _, err := deps.Apply(ctx, alice.WithSpec(alice.Spec.WithReplicas(5)), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Errorf("apply of replicas after the scale: %v", err)
	}

	// The creator manages the replicas: the scale write takes them over,
	// with subresource scale and no time, and the creator's entry loses
	// them.
	if _, err := deps.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "u"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}},
	}, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	scale("u", 3, "hpa")
	if d, err = deps.Get(ctx, "u", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := managers(d); !slices.Equal(got, []string{"creator/Update", "hpa/Update/scale"}) {
		t.Fatalf("managers after taking the replicas over: %v", got)
	}
	for _, e := range d.ManagedFields {
		switch e.Manager {
		case "hpa":
			if e.Time != nil || string(e.FieldsV1.Raw) != `{"f:spec":{"f:replicas":{}}}` {
				t.Errorf("hpa's entry: time %v, fields %s", e.Time, e.FieldsV1.Raw)
			}
		case "creator":
			if strings.Contains(string(e.FieldsV1.Raw), "f:replicas") {
				t.Errorf("creator still manages the replicas: %s", e.FieldsV1.Raw)
			}
		}
	}
	if d.ManagedFields[0].Manager != "hpa" {
		t.Errorf("the entry without a time sorts first: %v", managers(d))
	}
}
