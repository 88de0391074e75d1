package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/test/kubecluster"
)

// rawResponse is an HTTP answer of the API and the Status it carries, if
// any.
type rawResponse struct {
	code   int
	body   []byte
	status metav1.Status
}

// rawRequest sends one request with the credentials of cfg (or with header
// overrides) to cfg.Host+path and decodes a Status body.
func rawRequest(t testing.TB, cfg *rest.Config, method, path, contentType string, body []byte, header http.Header) rawResponse {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, strings.TrimSuffix(cfg.Host, "/")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := rawResponse{code: resp.StatusCode, body: b}
	_ = json.Unmarshal(b, &r.status)
	return r
}

// TestBadInput sends malformed and forbidden requests, raw and through
// kubectl, and checks each gets kube's 4xx and stores nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	cs := r.clients(t, "default")
	cfg := r.restConfig(t, "default")
	ctx := t.Context()
	ns := "bad"
	createNamespace(t, cs, ns)
	kubecluster.Kubectl(t)

	// nothingStored lists configmaps everywhere and fails if any is named
	// name (or, with name empty, if namespace bad holds any).
	nothingStored := func(t *testing.T, name string) {
		t.Helper()
		l, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if (name == "" && it.Namespace == ns) || (name != "" && it.Name == name) {
				t.Errorf("stored after a refused request: %s/%s", it.Namespace, it.Name)
			}
		}
	}

	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"
	cmJSON := func(name, namespace string, extra string) []byte {
		meta := fmt.Sprintf(`"name":%q`, name)
		if namespace != "" {
			meta += fmt.Sprintf(`,"namespace":%q`, namespace)
		}
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{%s},"data":{"a":"1"}%s}`, meta, extra))
	}
	big := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":%q}}`, strings.Repeat("x", 3<<20+1024)))

	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		header      http.Header
		noAuth      bool
		code        int
		reason      metav1.StatusReason
		stored      string // the name that must not be stored
	}{
		{name: "malformed JSON", method: "POST", path: cmPath, contentType: "application/json",
			body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mj"`), code: 400, reason: metav1.StatusReasonBadRequest, stored: "mj"},
		{name: "malformed YAML", method: "POST", path: cmPath, contentType: "application/yaml",
			body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [my\n  namespace: bad\n"), code: 400, reason: metav1.StatusReasonBadRequest, stored: "my"},
		{name: "JSON that is not an object", method: "POST", path: cmPath, contentType: "application/json",
			body: []byte(`["not","an","object"]`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "kind does not match the path", method: "POST", path: cmPath, contentType: "application/json",
			body: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"wrongkind"},"stringData":{"a":"1"}}`), code: 400, reason: metav1.StatusReasonBadRequest, stored: "wrongkind"},
		{name: "namespace in body does not match the path", method: "POST", path: cmPath, contentType: "application/json",
			body: cmJSON("otherns", "default", ""), code: 400, reason: metav1.StatusReasonBadRequest, stored: "otherns"},
		{name: "unknown field with fieldValidation=Strict", method: "POST", path: cmPath + "?fieldValidation=Strict", contentType: "application/json",
			body: cmJSON("strict", "", `,"spec":{"x":1}`), code: 400, reason: metav1.StatusReasonBadRequest, stored: "strict"},
		{name: "invalid name", method: "POST", path: cmPath, contentType: "application/json",
			body: cmJSON("Bad_Name", "", ""), code: 422, reason: metav1.StatusReasonInvalid, stored: "Bad_Name"},
		{name: "group that is not served", method: "POST", path: "/apis/example.com/v1/namespaces/" + ns + "/gizmos", contentType: "application/json",
			body: []byte(`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g1"}}`), code: 404, reason: metav1.StatusReasonNotFound},
		{name: "resource that is not served", method: "POST", path: "/api/v1/namespaces/" + ns + "/gizmos", contentType: "application/json",
			body: []byte(`{"apiVersion":"v1","kind":"Gizmo","metadata":{"name":"g1"}}`), code: 404, reason: metav1.StatusReasonNotFound},
		{name: "body over 3 MiB", method: "POST", path: cmPath, contentType: "application/json",
			body: big, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge, stored: "big"},
		{name: "unsupported content type", method: "POST", path: cmPath, contentType: "text/plain",
			body: cmJSON("textplain", "", ""), code: 415, reason: metav1.StatusReasonUnsupportedMediaType, stored: "textplain"},
		{name: "bad token", method: "POST", path: cmPath, contentType: "application/json",
			body: cmJSON("badtoken", "", ""), header: http.Header{"Authorization": {"Bearer not-a-token"}}, code: 401, reason: metav1.StatusReasonUnauthorized, stored: "badtoken"},
		{name: "no credentials", method: "POST", path: cmPath, contentType: "application/json",
			body: cmJSON("anonymous", "", ""), noAuth: true, code: 401, reason: metav1.StatusReasonUnauthorized, stored: "anonymous"},
		{name: "no credentials, read", method: "GET", path: cmPath, noAuth: true, code: 401, reason: metav1.StatusReasonUnauthorized},
		{name: "denied verb", method: "POST", path: cmPath, contentType: "application/json",
			body: cmJSON("denied", "", ""), header: http.Header{"Impersonate-User": {"nobody"}}, code: 403, reason: metav1.StatusReasonForbidden, stored: "denied"},
		{name: "denied read", method: "GET", path: cmPath, header: http.Header{"Impersonate-User": {"nobody"}}, code: 403, reason: metav1.StatusReasonForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			if c.noAuth {
				cfg = rest.AnonymousClientConfig(cfg)
			}
			resp := rawRequest(t, cfg, c.method, c.path, c.contentType, c.body, c.header)
			if resp.code != c.code {
				t.Errorf("%s %s: HTTP %d, want %d: %.300s", c.method, c.path, resp.code, c.code, resp.body)
			}
			if resp.status.Kind != "Status" || int(resp.status.Code) != c.code || resp.status.Reason != c.reason {
				t.Errorf("%s %s: want a Status with code %d reason %s, got %.300s", c.method, c.path, c.code, c.reason, resp.body)
			}
			if c.reason == metav1.StatusReasonInvalid {
				var fields []string
				if resp.status.Details != nil {
					for _, cause := range resp.status.Details.Causes {
						fields = append(fields, cause.Field)
					}
				}
				if !strings.Contains(strings.Join(fields, ","), "metadata.name") {
					t.Errorf("invalid name: want a cause on metadata.name, got %v", fields)
				}
			}
			nothingStored(t, c.stored)
		})
	}

	t.Run("namespaced kind at the cluster-scope path", func(t *testing.T) {
		// kube-apiserver serves only list and watch at /api/v1/configmaps
		// and answers a POST with 405.
		resp := rawRequest(t, cfg, "POST", "/api/v1/configmaps", "application/json", cmJSON("clusterpath", "", ""), nil)
		if resp.code < 400 || resp.code > 499 {
			t.Errorf("POST /api/v1/configmaps: HTTP %d, want 4xx (kube: 405): %.300s", resp.code, resp.body)
		}
		nothingStored(t, "clusterpath")
		resp = rawRequest(t, cfg, "POST", "/api/v1/configmaps", "application/json", cmJSON("clusterpath2", ns, ""), nil)
		if resp.code < 400 || resp.code > 499 {
			t.Errorf("POST /api/v1/configmaps with a namespace in the body: HTTP %d, want 4xx: %.300s", resp.code, resp.body)
		}
		nothingStored(t, "clusterpath2")
	})

	t.Run("cluster-scoped object with a namespace", func(t *testing.T) {
		body := []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"e2e-ns-cleared","namespace":"bad"},"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}]}`)
		resp := rawRequest(t, cfg, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json", body, nil)
		if resp.code != 201 {
			t.Fatalf("create ClusterRole with a namespace: HTTP %d, want 201 (kube clears the namespace): %.300s", resp.code, resp.body)
		}
		var created metav1.PartialObjectMetadata
		if err := json.Unmarshal(resp.body, &created); err != nil {
			t.Fatal(err)
		}
		if created.Namespace != "" {
			t.Errorf("created ClusterRole has namespace %q", created.Namespace)
		}
		got, err := cs.RbacV1().ClusterRoles().Get(ctx, "e2e-ns-cleared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Namespace != "" {
			t.Errorf("stored ClusterRole has namespace %q", got.Namespace)
		}
		// Not reachable under a namespace path.
		if resp := rawRequest(t, cfg, "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/bad/clusterroles/e2e-ns-cleared", "", nil, nil); resp.code != 404 {
			t.Errorf("GET of a cluster-scoped object under a namespace: HTTP %d, want 404", resp.code)
		}
	})

	t.Run("stale resourceVersion on update", func(t *testing.T) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "stale", nil, map[string]string{"v": "1"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "stale", metav1.DeleteOptions{})
		staleRV := cm.ResourceVersion
		cm.Data["v"] = "2"
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		body := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"stale","namespace":%q,"resourceVersion":%q},"data":{"v":"stale"}}`, ns, staleRV))
		resp := rawRequest(t, cfg, "PUT", cmPath+"/stale", "application/json", body, nil)
		if resp.code != 409 || resp.status.Reason != metav1.StatusReasonConflict {
			t.Errorf("PUT with a stale resourceVersion: HTTP %d reason %s, want 409 Conflict: %.300s", resp.code, resp.status.Reason, resp.body)
		}
		// A merge patch pinned to the stale resourceVersion conflicts too.
		resp = rawRequest(t, cfg, "PATCH", cmPath+"/stale", "application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"v":"stale"}}`, staleRV)), nil)
		if resp.code != 409 {
			t.Errorf("PATCH pinned to a stale resourceVersion: HTTP %d, want 409: %.300s", resp.code, resp.body)
		}
		got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "stale", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["v"] != "2" {
			t.Errorf("after the refused writes: v=%q, want 2", got.Data["v"])
		}
	})

	t.Run("update of a missing object", func(t *testing.T) {
		resp := rawRequest(t, cfg, "PUT", cmPath+"/ghost", "application/json", cmJSON("ghost", ns, ""), nil)
		if resp.code != 404 {
			t.Errorf("PUT of a missing configmap: HTTP %d, want 404: %.300s", resp.code, resp.body)
		}
		nothingStored(t, "ghost")
	})

	t.Run("name in body does not match the path", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "named", nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "named", metav1.DeleteOptions{})
		resp := rawRequest(t, cfg, "PUT", cmPath+"/named", "application/json", cmJSON("other-name", ns, ""), nil)
		if resp.code != 400 {
			t.Errorf("PUT with a different name in the body: HTTP %d, want 400: %.300s", resp.code, resp.body)
		}
		nothingStored(t, "other-name")
	})

	t.Run("strategic merge patch of a custom resource", func(t *testing.T) {
		// Covered with kubectl and client-go elsewhere; here the raw code.
		r.mustKubectlIn(t, widgetCRD, "apply", "-f", "-")
		r.mustKubectl(t, "wait", "--for=condition=established", "crd/widgets.e2e.canopy.dev", "--timeout=30s")
		r.mustKubectlIn(t, widget(ns, "w1", 1, "red"), "apply", "-f", "-")
		resp := rawRequest(t, cfg, "PATCH", "/apis/e2e.canopy.dev/v1/namespaces/"+ns+"/widgets/w1", "application/strategic-merge-patch+json", []byte(`{"spec":{"size":2}}`), nil)
		if resp.code != 415 || resp.status.Reason != metav1.StatusReasonUnsupportedMediaType {
			t.Errorf("strategic merge patch of a widget: HTTP %d, want 415: %.300s", resp.code, resp.body)
		}
		if out := r.mustKubectl(t, "get", "widget", "w1", "-n", ns, "-o", "jsonpath={.spec.size}"); out != "1" {
			t.Errorf("widget size after the refused patch: %s", out)
		}
	})

	t.Run("kubectl", func(t *testing.T) {
		cases := []struct {
			name   string
			stdin  string
			args   []string
			errSub []string
			stored string
		}{
			{"malformed YAML", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [kmy\n", []string{"create", "-f", "-"}, []string{"error"}, "kmy"},
			{"unknown kind", "apiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: g1\n  namespace: bad\n", []string{"apply", "-f", "-"},
				[]string{"resource mapping not found", `no matches for kind "Gizmo" in version "example.com/v1"`}, ""},
			{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kstrict\n  namespace: bad\nspec:\n  x: 1\n", []string{"create", "-f", "-"},
				[]string{`unknown field "spec"`}, "kstrict"},
			{"invalid name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n  namespace: bad\n", []string{"create", "-f", "-"},
				[]string{"Invalid", "metadata.name"}, "Bad_Name"},
			{"missing namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: knons\n  namespace: no-such-namespace\n", []string{"create", "-f", "-"},
				[]string{`namespaces "no-such-namespace" not found`}, "knons"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := r.kubectlIn(t, c.stdin, nil, c.args...)
				if err == nil {
					t.Fatalf("kubectl %s succeeded", strings.Join(c.args, " "))
				}
				for _, s := range c.errSub {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("kubectl %s: want %q in %v", strings.Join(c.args, " "), s, err)
					}
				}
				nothingStored(t, c.stored)
			})
		}
	})

	// Finally: the bad namespace holds only what the subtests created and
	// cleaned up.
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		t.Errorf("namespace %s holds %v after the bad-input tests", ns, names)
	}
}
