package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
)

var reportsGVR = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}

// gatheredSpace is the store space the test's view gathers its objects in.
const gatheredSpace = "gathered"

// viewAPI is a Server with the real authenticator (the admin token) and
// authorizer, the default space serving a PolicyReport CRD, and a view
// "reports" of it over the objects of the store space gatheredSpace,
// partitioned by their label "provider". In the default space, alice may
// read partition a of the view, bob the whole view, and dave every
// policy report (but not the view). Users other than the admin are
// impersonated by it (configFor).
type viewAPI struct {
	hs *httptest.Server
	st *store.Store
}

func newViewAPI(t *testing.T) *viewAPI {
	t.Helper()
	// TLS: kubectl sends no bearer token over plain HTTP.
	hs, st := realAuthAPI(t, true, func(st *store.Store, cfg *Config) {
		cfg.Views = func(space, view string) (*View, error) {
			if space != layout.DefaultSpace || view != "reports" {
				return nil, nil
			}
			return &View{
				Resource:  reportsGVR,
				Objects:   st.Space(gatheredSpace),
				Partition: func(o *store.Object) string { return o.Labels["provider"] },
			}, nil
		}
	})
	api := &viewAPI{hs: hs, st: st}
	ctx := t.Context()

	admin := api.dynamic(t, "", "/spaces/default")
	crd, err := toUnstructuredMap(policyReportCRD())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Resource(crdsGVR).Create(ctx, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := []string{"get", "list", "watch"}
	for _, g := range []struct {
		user string
		rule rbacv1.PolicyRule
	}{
		{"alice", rbacv1.PolicyRule{Verbs: read, APIGroups: []string{"edge.canopy.dev"}, Resources: []string{"views/partitions"}, ResourceNames: []string{"reports/a"}}},
		{"bob", rbacv1.PolicyRule{Verbs: read, APIGroups: []string{"edge.canopy.dev"}, Resources: []string{"views"}, ResourceNames: []string{"reports"}}},
		{"dave", rbacv1.PolicyRule{Verbs: read, APIGroups: []string{reportsGVR.Group}, Resources: []string{reportsGVR.Resource}}},
	} {
		role := &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: g.user}, Rules: []rbacv1.PolicyRule{g.rule},
		}
		binding := &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: g.user},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: g.user},
			Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: g.user}},
		}
		for _, o := range []any{role, binding} {
			m, err := toUnstructuredMap(o)
			if err != nil {
				t.Fatal(err)
			}
			gvr := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
			if _, ok := o.(*rbacv1.ClusterRoleBinding); ok {
				gvr.Resource = "clusterrolebindings"
			}
			if _, err := admin.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, r := range []struct{ name, dest, provider string }{
		{"e1-r1", "e1", "a"}, {"e1-r2", "e1", "b"}, {"e2-r3", "e2", "a"}, {"e2-r4", "e2", "b"},
	} {
		api.put(t, r.name, r.dest, r.provider, 1)
	}
	// The authorizer has the bindings once alice may read partition a.
	poll.Until(t, "alice may read partition a", func() error {
		code, body := api.get(t, "alice", "/spaces/default/views/reports/partitions/a/apis/wgpolicyk8s.io/v1alpha2/policyreports")
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	}, poll.For(10*time.Second))
	return api
}

// policyReportCRD is a namespaced PolicyReport with a printer column.
func policyReportCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "policyreports.wgpolicyk8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: reportsGVR.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "policyreports", Singular: "policyreport", Kind: "PolicyReport", ListKind: "PolicyReportList", ShortNames: []string{"polr"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: reportsGVR.Version, Served: true, Storage: true,
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Pass", Type: "integer", JSONPath: ".summary.pass"}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"summary": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"pass": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

// put writes a policy report of destination dest and provider into the
// gathered space, as the root's gathering would.
func (api *viewAPI) put(t *testing.T, name, dest, provider string, pass int) {
	t.Helper()
	key := store.Key{Space: gatheredSpace, Resource: store.Resource{Group: reportsGVR.Group, Resource: reportsGVR.Resource}, Namespace: "default", Name: name}
	data, err := json.Marshal(map[string]any{
		"apiVersion": reportsGVR.GroupVersion().String(), "kind": "PolicyReport",
		"metadata": map[string]any{
			"name": name, "namespace": "default", "uid": "uid-" + name, "creationTimestamp": "2025-01-01T00:00:00Z",
			"labels": map[string]any{"destination": dest, "provider": provider},
		},
		"summary": map[string]any{"pass": pass},
	})
	if err != nil {
		t.Fatal(err)
	}
	op := store.Op{Type: store.OpCreate, Key: key, Data: data}
	if _, err := api.st.Get(key); err == nil {
		op.Type = store.OpUpdate
	}
	if _, err := api.st.Txn(context.Background(), op); err != nil {
		t.Fatal(err)
	}
}

// configFor is the admin's config at path (below the server's URL),
// impersonating user unless it is empty.
func (api *viewAPI) configFor(user, path string) *rest.Config {
	c := &rest.Config{Host: api.hs.URL + path, BearerToken: "admin-secret", QPS: -1, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if user != "" {
		c.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	return c
}

func (api *viewAPI) dynamic(t *testing.T, user, path string) *dynamic.DynamicClient {
	t.Helper()
	dc, err := dynamic.NewForConfig(api.configFor(user, path))
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// do sends a request as user (the admin when empty) and returns the
// status code and body.
func (api *viewAPI) do(t *testing.T, user, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, api.hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin-secret")
	if user != "" {
		req.Header.Set("Impersonate-User", user)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := api.hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (api *viewAPI) get(t *testing.T, user, path string) (int, []byte) {
	t.Helper()
	return api.do(t, user, http.MethodGet, path, "")
}

const (
	wholeView  = "/spaces/default/views/reports"
	partitionA = wholeView + "/partitions/a"
	partitionB = wholeView + "/partitions/b"
	reportsURL = "/apis/wgpolicyk8s.io/v1alpha2/policyreports"
)

// informed is what an informer's handlers saw.
type informed struct {
	mu sync.Mutex
	// providers of every object an event carried, by event
	events []string
}

func (i *informed) record(what string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u := obj.(*unstructured.Unstructured)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.events = append(i.events, fmt.Sprintf("%s %s %s", what, u.GetName(), u.GetLabels()["provider"]))
}

func (i *informed) seen() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.events)
}

// inform starts a dynamic informer of policy reports as user at path and
// returns its store and what its handlers saw.
func (api *viewAPI) inform(t *testing.T, user, path string) (cache.Store, *informed) {
	t.Helper()
	f := dynamicinformer.NewDynamicSharedInformerFactory(api.dynamic(t, user, path), 0)
	inf := f.ForResource(reportsGVR).Informer()
	rec := &informed{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { rec.record("add", o) },
		UpdateFunc: func(_, o any) { rec.record("update", o) },
		DeleteFunc: func(o any) { rec.record("delete", o) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatalf("the informer of %s at %s did not sync", user, path)
	}
	return inf.GetStore(), rec
}

// names lists the names in an informer's store, sorted, with their
// providers.
func names(s cache.Store) string {
	var out []string
	for _, o := range s.List() {
		u := o.(*unstructured.Unstructured)
		out = append(out, u.GetName()+"="+u.GetLabels()["provider"])
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// informerHolds is what an informer's store should come to hold (names).
type informerHolds struct {
	what string
	s    cache.Store
	want string
}

// holds waits until each informer holds what it should.
func holds(t *testing.T, cases []informerHolds) {
	t.Helper()
	for _, c := range cases {
		poll.Until(t, c.what+" informer", func() error {
			if got := names(c.s); got != c.want {
				return fmt.Errorf("it holds %s, want %s", got, c.want)
			}
			return nil
		}, poll.For(10*time.Second))
	}
}

// Client-go informers of a partition see its objects only, including
// when one moves to another partition (a delete there, an add in the
// other); one of the whole view sees every object.
func TestViewInformers(t *testing.T) {
	api := newViewAPI(t)
	alice, aliceSaw := api.inform(t, "alice", partitionA)
	bob, _ := api.inform(t, "bob", wholeView)
	bobB, bobBSaw := api.inform(t, "bob", partitionB)
	holds(t, []informerHolds{
		{"alice's of partition a", alice, "e1-r1=a,e2-r3=a"},
		{"bob's of the view", bob, "e1-r1=a,e1-r2=b,e2-r3=a,e2-r4=b"},
		{"bob's of partition b", bobB, "e1-r2=b,e2-r4=b"},
	})

	api.put(t, "e3-r5", "e3", "b", 1)
	api.put(t, "e3-r6", "e3", "a", 1)
	api.put(t, "e1-r1", "e1", "a", 2)
	api.put(t, "e2-r3", "e2", "b", 1) // moves from a to b
	holds(t, []informerHolds{
		{"alice's of partition a", alice, "e1-r1=a,e3-r6=a"},
		{"bob's of the view", bob, "e1-r1=a,e1-r2=b,e2-r3=b,e2-r4=b,e3-r5=b,e3-r6=a"},
		{"bob's of partition b", bobB, "e1-r2=b,e2-r3=b,e2-r4=b,e3-r5=b"},
	})
	// The move is a delete of the last version alice could see (of
	// partition a) and an add in partition b.
	poll.Until(t, "alice's informer saw e2-r3 deleted", func() error {
		if !slices.Contains(aliceSaw.seen(), "delete e2-r3 a") {
			return fmt.Errorf("it saw %v", aliceSaw.seen())
		}
		return nil
	}, poll.For(10*time.Second))
	if saw := bobBSaw.seen(); !slices.Contains(saw, "add e2-r3 b") {
		t.Errorf("bob's informer of partition b saw %v, want e2-r3 added", saw)
	}
	for _, e := range aliceSaw.seen() {
		if !strings.HasSuffix(e, " a") {
			t.Errorf("alice's informer of partition a saw %q, of another partition", e)
		}
	}
}

// Who may read what: partition rights cover that partition only, view
// rights every partition; rights on the resource itself count for
// nothing; the view is looked up only for those allowed.
func TestViewAuthorization(t *testing.T) {
	api := newViewAPI(t)
	for _, c := range []struct {
		user, path string
		want       int
	}{
		{"alice", partitionA + reportsURL, http.StatusOK},
		{"alice", partitionA + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r1", http.StatusOK},
		{"alice", partitionA + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r2", http.StatusNotFound},
		{"alice", partitionA + "/apis", http.StatusOK},
		{"alice", wholeView + reportsURL, http.StatusForbidden},
		{"alice", wholeView + "/apis", http.StatusForbidden},
		{"alice", partitionB + reportsURL, http.StatusForbidden},
		{"alice", wholeView + "/partitions/nothing-here" + reportsURL, http.StatusForbidden},
		{"alice", "/spaces/default/views/other/partitions/a" + reportsURL, http.StatusForbidden},
		{"alice", "/spaces/default" + reportsURL, http.StatusForbidden},
		{"bob", wholeView + reportsURL, http.StatusOK},
		{"bob", partitionB + reportsURL, http.StatusOK},
		{"bob", wholeView + "/partitions/nothing-here" + reportsURL, http.StatusOK},
		{"bob", "/spaces/default/views/other" + reportsURL, http.StatusForbidden},
		{"dave", "/spaces/default" + reportsURL, http.StatusOK},
		{"dave", wholeView + reportsURL, http.StatusForbidden},
		{"dave", partitionA + reportsURL, http.StatusForbidden},
		{"carol", wholeView + reportsURL, http.StatusForbidden},
		{"carol", "/spaces/default/views/other" + reportsURL, http.StatusForbidden},
	} {
		code, body := api.get(t, c.user, c.path)
		if code != c.want {
			t.Errorf("%s GET %s: %d %s, want %d", c.user, c.path, code, body, c.want)
		}
		if code == http.StatusForbidden && strings.Contains(string(body), "not found") {
			t.Errorf("%s GET %s: a 403 that tells what exists: %s", c.user, c.path, body)
		}
	}
	// The RBAC check is of the view, with the request's verb.
	code, body := api.get(t, "alice", wholeView+reportsURL+"?watch=true")
	if st := statusOf(t, body); code != http.StatusForbidden || !strings.Contains(st.Message, `cannot watch resource "views" in API group "edge.canopy.dev"`) {
		t.Errorf("alice watching the whole view: %d %s", code, body)
	}
	code, body = api.get(t, "alice", partitionB+reportsURL)
	if st := statusOf(t, body); code != http.StatusForbidden || !strings.Contains(st.Message, `cannot list resource "views/partitions" in API group "edge.canopy.dev"`) {
		t.Errorf("alice listing partition b: %d %s", code, body)
	}
	// Bob lists partition b: its objects only.
	list, err := api.dynamic(t, "bob", partitionB).Resource(reportsGVR).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.GetName())
	}
	if want := []string{"e1-r2", "e2-r4"}; !slices.Equal(got, want) {
		t.Errorf("bob's list of partition b: %v, want %v", got, want)
	}
}

// Bad paths and every write get the right Status, and change nothing.
func TestViewErrors(t *testing.T) {
	api := newViewAPI(t)
	before := spaceObjects(t, api.st, gatheredSpace)
	for _, c := range []struct {
		user, method, path, body string
		want                     int
		message                  string
	}{
		{"", http.MethodGet, "/spaces/default/views/nope" + reportsURL, "", http.StatusNotFound, `views.edge.canopy.dev "nope" not found`},
		{"", http.MethodGet, "/spaces/default/views/nope/apis", "", http.StatusNotFound, `views.edge.canopy.dev "nope" not found`},
		{"bob", http.MethodGet, wholeView + "/partitions/Bad%20Value" + reportsURL, "", http.StatusBadRequest, `invalid partition value "Bad Value"`},
		{"bob", http.MethodGet, wholeView + "/partitions/a%2Fb" + reportsURL, "", http.StatusBadRequest, `invalid partition value "a/b"`},
		{"bob", http.MethodPost, wholeView + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports",
			`{"apiVersion":"wgpolicyk8s.io/v1alpha2","kind":"PolicyReport","metadata":{"name":"new"}}`, http.StatusMethodNotAllowed, "not supported"},
		{"bob", http.MethodDelete, wholeView + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r1", "", http.StatusMethodNotAllowed, "not supported"},
		{"alice", http.MethodDelete, partitionA + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports", "", http.StatusMethodNotAllowed, "not supported"},
		{"bob", http.MethodPut, wholeView + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r1",
			`{"apiVersion":"wgpolicyk8s.io/v1alpha2","kind":"PolicyReport","metadata":{"name":"e1-r1","namespace":"default"}}`, http.StatusMethodNotAllowed, "not supported"},
		{"bob", http.MethodPatch, wholeView + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r1", `{}`, http.StatusMethodNotAllowed, "not supported"},
		// Only the view's resource, without subresources.
		{"bob", http.MethodGet, wholeView + "/api/v1/namespaces/default/configmaps", "", http.StatusNotFound, ""},
		{"bob", http.MethodGet, wholeView + "/apis/wgpolicyk8s.io/v1alpha2/namespaces/default/policyreports/e1-r1/status", "", http.StatusNotFound, ""},
		{"bob", http.MethodGet, wholeView + "/metrics", "", http.StatusNotFound, ""},
	} {
		code, body := api.do(t, c.user, c.method, c.path, c.body)
		if code != c.want || !strings.Contains(statusOf(t, body).Message, c.message) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", c.user, c.method, c.path, code, body, c.want, c.message)
		}
	}
	if after := spaceObjects(t, api.st, gatheredSpace); after != before {
		t.Errorf("the gathered space holds %d objects after refused writes, had %d", after, before)
	}
}

// A view of a resource its space does not serve is 404 on every path.
func TestViewOfUnservedResource(t *testing.T) {
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}, Views: func(space, view string) (*View, error) {
		return &View{Resource: reportsGVR, Objects: st.Space(gatheredSpace)}, nil
	}})
	ensureBuiltins(t, s)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	for _, p := range []string{"/apis", "/api", "/apis/wgpolicyk8s.io/v1alpha2", reportsURL, "/openapi/v3"} {
		if resp, body := do(t, "GET", hs.URL+wholeView+p, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s of a view of an unserved resource: %d %s", p, resp.StatusCode, body)
		}
	}
	// Without a partition key, partitions are not found.
	if resp, body := do(t, "GET", hs.URL+partitionA+"/apis", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "has no partitions") {
		t.Errorf("GET a partition of a view without partitions: %d %s", resp.StatusCode, body)
	}
}

// Discovery lists the view's resource alone, read only; OpenAPI v3 its
// group-version alone.
func TestViewDiscovery(t *testing.T) {
	api := newViewAPI(t)
	for _, path := range []string{wholeView, partitionA} {
		dc, err := discovery.NewDiscoveryClientForConfig(api.configFor("alice", path))
		if path == wholeView {
			dc, err = discovery.NewDiscoveryClientForConfig(api.configFor("bob", path))
		}
		if err != nil {
			t.Fatal(err)
		}
		groups, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("discovery of %s: %v", path, err)
		}
		var gotGroups []string
		for _, g := range groups {
			gotGroups = append(gotGroups, g.Name)
		}
		if !slices.Equal(gotGroups, []string{"wgpolicyk8s.io"}) {
			t.Errorf("groups of %s: %v", path, gotGroups)
		}
		var got []string
		for _, l := range lists {
			for _, r := range l.APIResources {
				got = append(got, fmt.Sprintf("%s %s %s %v %v", l.GroupVersion, r.Name, r.Kind, r.Namespaced, r.Verbs))
			}
		}
		if want := []string{"wgpolicyk8s.io/v1alpha2 policyreports PolicyReport true [get list watch]"}; !slices.Equal(got, want) {
			t.Errorf("resources of %s: %v, want %v", path, got, want)
		}
		// Legacy discovery too.
		code, body := api.get(t, "bob", path+"/apis/wgpolicyk8s.io/v1alpha2")
		var rl metav1.APIResourceList
		if err := json.Unmarshal(body, &rl); code != http.StatusOK || err != nil || len(rl.APIResources) != 1 || rl.APIResources[0].Name != "policyreports" {
			t.Errorf("legacy discovery of %s: %d %s", path, code, body)
		}
		if code, body := api.get(t, "bob", path+"/api/v1"); code != http.StatusNotFound {
			t.Errorf("/api/v1 of %s: %d %s, want 404", path, code, body)
		}
		code, body = api.get(t, "bob", path+"/openapi/v3")
		var index struct {
			Paths map[string]struct {
				URL string `json:"serverRelativeURL"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(body, &index); code != http.StatusOK || err != nil || len(index.Paths) != 1 {
			t.Fatalf("OpenAPI v3 index of %s: %d %s", path, code, body)
		}
		u := index.Paths["apis/wgpolicyk8s.io/v1alpha2"].URL
		if !strings.HasPrefix(u, path+"/openapi/v3/apis/wgpolicyk8s.io/v1alpha2?hash=") {
			t.Errorf("OpenAPI v3 index of %s: %s", path, body)
		}
		if code, body := api.get(t, "bob", u); code != http.StatusOK || !strings.Contains(string(body), "PolicyReport") {
			t.Errorf("OpenAPI v3 document of %s: %d %.200s", path, code, body)
		}
		if code, _ := api.get(t, "bob", path+"/openapi/v3/api/v1"); code != http.StatusNotFound {
			t.Errorf("OpenAPI v3 of core/v1 in %s: %d, want 404", path, code)
		}
	}
}

// A list pages with limit and continue; a watch resumes from a list's
// resourceVersion with what changed since, in the partition.
func TestViewPagingAndWatchResume(t *testing.T) {
	api := newViewAPI(t)
	for _, name := range []string{"e3-r5", "e3-r6", "e4-r7"} {
		api.put(t, name, "e3", "b", 1)
	}
	page := func(user, path string, limit int64) []string {
		reports := api.dynamic(t, user, path).Resource(reportsGVR)
		var got []string
		cont := ""
		for pages := 0; ; pages++ {
			l, err := reports.List(t.Context(), metav1.ListOptions{Limit: limit, Continue: cont})
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(l.Items)) > limit {
				t.Fatalf("a page of %d items with limit %d", len(l.Items), limit)
			}
			for _, it := range l.Items {
				got = append(got, it.GetName())
			}
			if cont = l.GetContinue(); cont == "" {
				return got
			}
			if pages > 10 {
				t.Fatal("more than 10 pages")
			}
		}
	}
	if got, want := page("bob", wholeView, 2), []string{"e1-r1", "e1-r2", "e2-r3", "e2-r4", "e3-r5", "e3-r6", "e4-r7"}; !slices.Equal(got, want) {
		t.Errorf("the whole view by pages of 2: %v, want %v", got, want)
	}
	if got, want := page("bob", partitionB, 2), []string{"e1-r2", "e2-r4", "e3-r5", "e3-r6", "e4-r7"}; !slices.Equal(got, want) {
		t.Errorf("partition b by pages of 2: %v, want %v", got, want)
	}
	if got, want := page("alice", partitionA, 1), []string{"e1-r1", "e2-r3"}; !slices.Equal(got, want) {
		t.Errorf("partition a by pages of 1: %v, want %v", got, want)
	}

	reports := api.dynamic(t, "alice", partitionA).Resource(reportsGVR)
	l, err := reports.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api.put(t, "e1-r2", "e1", "b", 5) // in partition b: not seen
	api.put(t, "e1-r1", "e1", "a", 5)
	api.put(t, "e2-r3", "e2", "b", 5) // leaves partition a
	api.put(t, "e4-r7", "e4", "a", 5) // comes into partition a
	w, err := reports.Watch(t.Context(), metav1.ListOptions{ResourceVersion: l.GetResourceVersion(), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %s: %#v", ev.Type, ev.Object)
			}
			got = append(got, fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), u.GetLabels()["provider"]))
		case <-timeout:
			t.Fatalf("the resumed watch gave %v in 10s", got)
		}
	}
	if want := []string{"MODIFIED e1-r1 a", "DELETED e2-r3 a", "ADDED e4-r7 a"}; !slices.Equal(got, want) {
		t.Errorf("the watch of partition a resumed from %s: %v, want %v", l.GetResourceVersion(), got, want)
	}
}

// kubectl works against a view and a partition: table output with the
// CRD's columns (which, as kube's, replace the default AGE), -o yaml,
// and -w.
func TestViewKubectl(t *testing.T) {
	api := newViewAPI(t)
	home := t.TempDir()
	kubeconfig := func(user, path string) string {
		f := filepath.Join(home, user+"-"+strings.ReplaceAll(strings.Trim(path, "/"), "/", "-")+".kubeconfig")
		cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: root
  cluster:
    server: %s
    insecure-skip-tls-verify: true
contexts:
- name: view
  context: {cluster: root, user: u}
current-context: view
users:
- name: u
  user:
    token: admin-secret
    as: %s
`, api.hs.URL+path, user)
		if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	out, err := kubecluster.RunKubectl(t, home, kubeconfig("alice", partitionA), "", nil, "get", "policyreports", "-A")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME PASS" ||
		strings.Join(strings.Fields(lines[1]), " ") != "default e1-r1 1" ||
		strings.Join(strings.Fields(lines[2]), " ") != "default e2-r3 1" {
		t.Errorf("kubectl get policyreports -A in partition a:\n%s", out)
	}
	out, err = kubecluster.RunKubectl(t, home, kubeconfig("bob", wholeView), "", nil, "get", "polr", "-n", "default", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if want := "policyreport.wgpolicyk8s.io/e1-r1\npolicyreport.wgpolicyk8s.io/e1-r2\npolicyreport.wgpolicyk8s.io/e2-r3\npolicyreport.wgpolicyk8s.io/e2-r4\n"; out != want {
		t.Errorf("kubectl get polr -o name of the whole view:\n%s\nwant\n%s", out, want)
	}
	out, err = kubecluster.RunKubectl(t, home, kubeconfig("alice", partitionA), "", nil, "get", "policyreport", "-n", "default", "e1-r1", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: PolicyReport") || !strings.Contains(out, "provider: a") || !strings.Contains(out, "pass: 1") {
		t.Errorf("kubectl get -o yaml in partition a:\n%s", out)
	}
	if _, err := kubecluster.RunKubectl(t, home, kubeconfig("alice", wholeView), "", nil, "get", "policyreports", "-A"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("kubectl get of the whole view as alice: %v, want forbidden", err)
	}
	if _, err := kubecluster.RunKubectl(t, home, kubeconfig("bob", wholeView), "", nil, "delete", "policyreport", "-n", "default", "e1-r1"); err == nil || !strings.Contains(err.Error(), "MethodNotAllowed") && !strings.Contains(err.Error(), "not supported") {
		t.Errorf("kubectl delete in a view: %v, want it refused", err)
	}

	// -w: the rows of the partition, then its changes.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := kubecluster.KubectlCommand(ctx, t, home, kubeconfig("alice", partitionA), "", nil, "get", "policyreports", "-A", "-w")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	rows := make(chan string)
	go func() {
		defer close(rows)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			rows <- strings.Join(strings.Fields(sc.Text()), " ")
		}
	}()
	next := func(what string) string {
		select {
		case r, ok := <-rows:
			if !ok {
				t.Fatalf("kubectl get -w ended before %s: %s", what, stderr.String())
			}
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("kubectl get -w printed no %s in 30s: %s", what, stderr.String())
		}
		return ""
	}
	for _, want := range []string{"NAMESPACE NAME PASS", "default e1-r1 1", "default e2-r3 1"} {
		if got := next("initial row"); got != want {
			t.Fatalf("kubectl get -w printed %q, want %q", got, want)
		}
	}
	api.put(t, "e1-r2", "e1", "b", 7) // partition b: not printed
	api.put(t, "e1-r1", "e1", "a", 9)
	if got := next("change"); got != "default e1-r1 9" {
		t.Errorf("kubectl get -w printed %q after a change, want e1-r1 with 9", got)
	}
}
