package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// recordingConnector answers every connect request with what it was given.
type recordingConnector struct {
	mu   sync.Mutex
	reqs []*ConnectRequest
}

func (c *recordingConnector) Connect(_ context.Context, req *ConnectRequest) (http.Handler, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", req.Subresource, r.Method)
	}), nil
}

func (c *recordingConnector) last() *ConnectRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return nil
	}
	return c.reqs[len(c.reqs)-1]
}

// verbAuthorizer allows everything but the verbs on subresources in
// deny ("create pods/exec"), and records what it was asked.
type verbAuthorizer struct {
	allowAll
	mu    sync.Mutex
	deny  []string
	asked []string
}

func (a *verbAuthorizer) Authorize(_ context.Context, _ string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	what := attrs.GetVerb() + " " + attrs.GetResource()
	if attrs.GetSubresource() != "" {
		what += "/" + attrs.GetSubresource()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, what)
	if slices.Contains(a.deny, what) {
		return authorizer.DecisionDeny, "denied by test", nil
	}
	return authorizer.DecisionAllow, "", nil
}

func (a *verbAuthorizer) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.asked
	a.asked = nil
	return out
}

func newConnectAPI(t *testing.T, conn Connector, authz Authorizer) *httptest.Server {
	t.Helper()
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	cfg := Config{Store: st, Authenticator: allowAll{}, Authorizer: authz}
	if conn != nil {
		cfg.Connect = conn
	}
	s := New(cfg)
	if err := s.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	pods := map[string]string{
		// bound has a node and one container; unbound neither a node
		// nor a single container.
		"bound":   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bound"},"spec":{"nodeName":"n1","containers":[{"name":"app","image":"x"}]}}`,
		"unbound": `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"unbound"},"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"x"}]}}`,
	}
	for _, p := range pods {
		if resp, b := do(t, http.MethodPost, hs.URL+"/api/v1/namespaces/default/pods", p); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create pod: %s %s", resp.Status, b)
		}
	}
	svc := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"port":80}]}}`
	if resp, b := do(t, http.MethodPost, hs.URL+"/api/v1/namespaces/default/services", svc); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create service: %s %s", resp.Status, b)
	}
	return hs
}

// statusOf decodes a Status answer.
func statusOf(t *testing.T, b []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(b, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status: %s", b)
	}
	return st
}

// discoveredSubresources lists the pods/ and services/ entries of /api/v1.
func discoveredSubresources(t *testing.T, hs *httptest.Server) []string {
	t.Helper()
	resp, b := do(t, http.MethodGet, hs.URL+"/api/v1", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1: %s", resp.Status)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list.APIResources {
		if strings.HasPrefix(r.Name, "pods/") || strings.HasPrefix(r.Name, "services/") {
			out = append(out, r.Name+" "+r.Kind+" "+strings.Join(r.Verbs, ","))
		}
	}
	return out
}

// Without Config.Connect the connect subresources are unknown URLs (404
// NotFound, as a kube-apiserver answers a subresource it does not serve),
// and discovery does not list them.
func TestConnectWithoutConnector(t *testing.T) {
	hs := newConnectAPI(t, nil, allowAll{})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/log"},
		{http.MethodPost, "/api/v1/namespaces/default/pods/bound/exec?command=true&stdout=true"},
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/portforward"},
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/proxy/x"},
		{http.MethodGet, "/api/v1/namespaces/default/services/web/proxy/"},
	} {
		resp, b := do(t, c.method, hs.URL+c.path, "")
		if st := statusOf(t, b); resp.StatusCode != http.StatusNotFound || st.Reason != metav1.StatusReasonNotFound ||
			st.Message != "the server could not find the requested resource" {
			t.Errorf("%s %s: %s %s", c.method, c.path, resp.Status, b)
		}
	}
	if got := discoveredSubresources(t, hs); !slices.Equal(got, []string{"pods/status Pod get,patch,update", "services/status Service get,patch,update"}) {
		t.Errorf("discovery: %q", got)
	}
}

func TestConnect(t *testing.T) {
	conn := &recordingConnector{}
	authz := &verbAuthorizer{deny: []string{"create pods/attach"}}
	hs := newConnectAPI(t, conn, authz)

	want := []string{
		"pods/attach PodAttachOptions create,get", "pods/exec PodExecOptions create,get", "pods/log Pod get",
		"pods/portforward PodPortForwardOptions create,get", "pods/proxy PodProxyOptions create,delete,get,patch,update",
		"pods/status Pod get,patch,update",
		"services/proxy ServiceProxyOptions create,delete,get,patch,update", "services/status Service get,patch,update",
	}
	if got := discoveredSubresources(t, hs); !slices.Equal(got, want) {
		t.Errorf("discovery:\n got %q\nwant %q", got, want)
	}

	// What reaches the Connector: the pod, options decoded, the
	// container defaulted.
	get := func(method, path string, code int) []byte {
		t.Helper()
		authz.take()
		resp, b := do(t, method, hs.URL+path, "")
		if resp.StatusCode != code {
			t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, b, code)
		}
		return b
	}
	get(http.MethodGet, "/api/v1/namespaces/default/pods/bound/log?follow=true&tailLines=3&sinceTime=2026-01-02T03:04:05Z", 200)
	r := conn.last()
	lo, _ := r.Options.(*corev1.PodLogOptions)
	if r.Pod == nil || r.Pod.Name != "bound" || lo == nil || lo.Container != "app" || !lo.Follow || *lo.TailLines != 3 || lo.SinceTime.Year() != 2026 {
		t.Fatalf("log request: %+v %+v", r, lo)
	}
	get(http.MethodPost, "/api/v1/namespaces/default/pods/bound/exec?command=echo&command=a+b&stdin=true&stdout=1&tty=true", 200)
	eo, _ := conn.last().Options.(*corev1.PodExecOptions)
	if eo == nil || !slices.Equal(eo.Command, []string{"echo", "a b"}) || !eo.Stdin || !eo.Stdout || eo.Stderr || !eo.TTY || eo.Container != "app" {
		t.Fatalf("exec options: %+v", eo)
	}
	if asked := authz.take(); !slices.Equal(asked, []string{"create pods/exec"}) {
		t.Errorf("POST exec authorized as %q", asked)
	}
	// A WebSocket upgrade is a GET: allowed to "get" and, as since kube
	// 1.35, to "create".
	get(http.MethodGet, "/api/v1/namespaces/default/pods/bound/exec?command=true&stdout=true", 200)
	if asked := authz.take(); !slices.Equal(asked, []string{"get pods/exec", "create pods/exec"}) {
		t.Errorf("GET exec authorized as %q", asked)
	}
	b := get(http.MethodGet, "/api/v1/namespaces/default/pods/bound/attach?stdout=true", 403)
	if st := statusOf(t, b); !strings.Contains(st.Message, `cannot create resource "pods/attach"`) {
		t.Errorf("GET attach without create: %s", b)
	}
	get(http.MethodGet, "/api/v1/namespaces/default/pods/bound/portforward?ports=80&ports=81", 200)
	if po, _ := conn.last().Options.(*corev1.PodPortForwardOptions); po == nil || !slices.Equal(po.Ports, []int32{80, 81}) {
		t.Errorf("portforward options: %+v", po)
	}
	b = get(http.MethodDelete, "/api/v1/namespaces/default/pods/https:bound:8443/proxy/a/b/?x=1", 200)
	r = conn.last()
	if pp, _ := r.Options.(*corev1.PodProxyOptions); pp == nil || pp.Path != "/a/b/" || r.Scheme != "https" || r.Port != "8443" || string(b) != "proxy DELETE" {
		t.Errorf("pod proxy: %+v %+v %q", r, pp, b)
	}
	if asked := authz.take(); !slices.Equal(asked, []string{"delete pods/proxy"}) {
		t.Errorf("DELETE proxy authorized as %q", asked)
	}
	get(http.MethodGet, "/api/v1/namespaces/default/services/web:80/proxy", 200)
	r = conn.last()
	if sp, _ := r.Options.(*corev1.ServiceProxyOptions); sp == nil || sp.Path != "" || r.Service == nil || r.Service.Name != "web" || r.Port != "80" {
		t.Errorf("service proxy: %+v %+v", r, sp)
	}

	// kube-apiserver's own answers, the Connector not asked.
	n := len(conn.reqs)
	for _, c := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{http.MethodGet, "/api/v1/namespaces/default/pods/gone/log", 404, `pods "gone" not found`},
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/log?container=nope", 400, "container nope is not valid for pod bound"},
		{http.MethodGet, "/api/v1/namespaces/default/pods/unbound/log", 400, "a container name must be specified for pod unbound, choose one of: [a b]"},
		{http.MethodPost, "/api/v1/namespaces/default/pods/unbound/exec?container=a&command=true&stdout=true", 400, "pod unbound does not have a host assigned"},
		{http.MethodPost, "/api/v1/namespaces/default/pods/unbound/portforward", 400, "pod unbound does not have a host assigned"},
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/log?tailLines=-1", 422, "tailLines"},
		{http.MethodGet, "/api/v1/namespaces/default/pods/bound/log?follow=maybe", 400, "follow"},
		{http.MethodPut, "/api/v1/namespaces/default/pods/bound/log", 405, ""},
		{http.MethodPut, "/api/v1/namespaces/default/pods/bound/exec", 405, ""},
		{http.MethodGet, "/api/v1/namespaces/default/pods/a:b:c:d/proxy/", 400, `invalid pod request "a:b:c:d"`},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/x/proxy/", 404, "the server could not find the requested resource"},
	} {
		resp, b := do(t, c.method, hs.URL+c.path, "")
		if st := statusOf(t, b); resp.StatusCode != c.code || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s %s: %s %s, want %d %q", c.method, c.path, resp.Status, b, c.code, c.msg)
		}
	}
	// The log of a pod without a node is empty, as kube-apiserver has no
	// kubelet to ask.
	resp, b := do(t, http.MethodGet, hs.URL+"/api/v1/namespaces/default/pods/unbound/log?container=a", "")
	if resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("log of an unbound pod: %s %q", resp.Status, b)
	}
	if len(conn.reqs) != n {
		t.Errorf("the Connector was asked %d more times", len(conn.reqs)-n)
	}
}
