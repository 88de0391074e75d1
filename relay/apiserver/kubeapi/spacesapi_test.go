package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

var spacesGVR = schema.GroupVersionResource{Group: "canopy.dev", Version: "v1alpha1", Resource: "spaces"}

func spaceObject(name string, spec map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": name}}
	if spec != nil {
		o["spec"] = spec
	}
	return &unstructured.Unstructured{Object: o}
}

// systemAPI serves a Server with the real authenticator and authorizer
// and the default and system spaces; it returns the admin's config of
// the whole server.
func systemAPI(t *testing.T) (*rest.Config, *store.Store) {
	t.Helper()
	hs, st := realAuthAPI(t, false, nil)
	return &rest.Config{Host: hs.URL, BearerToken: "admin-secret", QPS: -1}, st
}

// realAuthAPI serves a Server with the real authenticator (the admin
// token "admin-secret") and authorizer, synced, over a new store with the
// default, inventory and system spaces, over TLS when tls is set; more,
// when set, completes its Config.
func realAuthAPI(t *testing.T, tls bool, more func(st *store.Store, cfg *Config)) (*httptest.Server, *store.Store) {
	t.Helper()
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	authn, err := auth.NewAuthenticator(auth.AuthenticatorConfig{AdminToken: "admin-secret"})
	if err != nil {
		t.Fatal(err)
	}
	authz := auth.NewAuthorizer(st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- authz.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cfg := Config{Store: st, Authenticator: authn, Authorizer: authz}
	if more != nil {
		more(st, &cfg)
	}
	s := New(cfg)
	ensureBuiltins(t, s)
	hs := httptest.NewUnstartedServer(s)
	if tls {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	for deadline := time.Now().Add(10 * time.Second); !authz.Synced(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the authorizer did not sync in 10s")
		}
	}
	return hs, st
}

// ensureBuiltins makes the default, inventory and system spaces.
func ensureBuiltins(t *testing.T, s *Server) {
	t.Helper()
	for _, sp := range []struct{ name, kind string }{
		{layout.DefaultSpace, layout.SpaceKindWDS},
		{layout.InventorySpace, layout.SpaceKindInventory},
		{layout.SystemSpace, layout.SpaceKindSystem},
	} {
		if err := s.EnsureSpace(context.Background(), sp.name, sp.kind); err != nil {
			t.Fatal(err)
		}
	}
}

// EnsureSpace is what a root does at every start: again, it changes
// nothing, but that the system space's namespace comes back.
func TestEnsureSpaceAgain(t *testing.T) {
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	s := New(Config{Store: st})
	ensureBuiltins(t, s)
	versions := func() map[store.Key]int64 {
		out := map[store.Key]int64{}
		for _, sp := range []string{"", layout.DefaultSpace, layout.InventorySpace, layout.SystemSpace} {
			l, err := st.List(store.ListOptions{Space: sp})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range l.Items {
				out[o.Key] = o.Revision
			}
		}
		return out
	}
	before := versions()
	ensureBuiltins(t, s)
	if after := versions(); !maps.Equal(after, before) {
		t.Fatalf("EnsureSpace again changed objects: %v, was %v", after, before)
	}
	ns := store.Key{Space: layout.SystemSpace, Resource: store.Resource{Resource: "namespaces"}, Name: layout.SystemSecretsNamespace}
	if _, err := st.Txn(context.Background(), store.Op{Type: store.OpDelete, Key: ns}); err != nil {
		t.Fatal(err)
	}
	ensureBuiltins(t, s)
	if _, err := st.Get(ns); err != nil {
		t.Fatalf("the system space's namespace after EnsureSpace: %v", err)
	}
}

// in returns cfg for space.
func in(cfg *rest.Config, space string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host += "/spaces/" + space
	return c
}

// spaceObjects counts the stored objects of space.
func spaceObjects(t *testing.T, st *store.Store, space string) int {
	t.Helper()
	list, err := st.List(store.ListOptions{Space: space})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// The system space serves Space, RBAC, Namespaces and Secrets only; a
// Space created there serves at once with its namespaces and roles, lists
// and watches with resourceVersions, prints KIND, BACKEND, READY and AGE,
// and its deletion removes its objects and then its record.
func TestSpacesLifecycle(t *testing.T) {
	cfg, st := systemAPI(t)
	ctx := context.Background()
	sys := in(cfg, layout.SystemSpace)

	disc := discovery.NewDiscoveryClientForConfigOrDie(sys)
	rl, err := disc.ServerResourcesForGroupVersion("canopy.dev/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rl.APIResources) != 1 || rl.APIResources[0].Name != "spaces" || rl.APIResources[0].Namespaced || rl.APIResources[0].Kind != "Space" {
		t.Fatalf("canopy.dev/v1alpha1 resources: %+v, want only the cluster-scoped spaces", rl.APIResources)
	}
	core, err := disc.ServerResourcesForGroupVersion("v1")
	var coreNames []string
	if err == nil {
		for _, r := range core.APIResources {
			coreNames = append(coreNames, r.Name)
		}
	}
	if slices.Sort(coreNames); !slices.Equal(coreNames, []string{"namespaces", "namespaces/status", "secrets"}) {
		t.Errorf("the system space serves core %v (%v): want namespaces and secrets only (the kubeconfigs of backed spaces)", coreNames, err)
	}
	if _, err := disc.ServerResourcesForGroupVersion("rbac.authorization.k8s.io/v1"); err != nil {
		t.Errorf("the system space does not serve RBAC: %v", err)
	}

	dc := dynamic.NewForConfigOrDie(sys)
	spaces := dc.Resource(spacesGVR)
	list, err := spaces.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := spaces.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := spaces.Create(ctx, spaceObject("team-a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kind, _, _ := unstructured.NestedString(created.Object, "spec", "kind"); kind != layout.SpaceKindWDS {
		t.Errorf("spec.kind %q, want the default %q", kind, layout.SpaceKindWDS)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "team-a" {
		t.Errorf("watch: %s %v, want ADDED team-a", ev.Type, ev.Object)
	}

	// The new space serves, with its namespaces and default roles.
	cs := kubernetes.NewForConfigOrDie(in(cfg, "team-a"))
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &settings, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a ConfigMap in the new space: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "edit", metav1.GetOptions{}); err != nil {
		t.Errorf("the new space's edit role: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("the new space's kube-system: %v", err)
	}

	// kubectl get spaces: a Table with KIND and AGE.
	resp, body := getRaw(t, sys.Host+"/apis/canopy.dev/v1alpha1/spaces", "Authorization", "Bearer admin-secret", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("table: %d %s", resp.StatusCode, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var cols, names []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	for _, r := range table.Rows {
		names = append(names, r.Cells[0].(string)+"="+r.Cells[1].(string))
	}
	if !slices.Equal(cols, []string{"Name", "Kind", "Backend", "Ready", "Age"}) {
		t.Errorf("columns %v, want Name Kind Backend Ready Age", cols)
	}
	for _, want := range []string{"default=wds", "system=system", "team-a=wds"} {
		if !slices.Contains(names, want) {
			t.Errorf("rows %v lack %s", names, want)
		}
	}

	// Delete: the objects go, and what its Views gathered, then the
	// record; the space no longer serves.
	gathered := store.Key{Space: layout.ViewsSpace("team-a"), Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "e1.report"}
	if _, err := st.Create(ctx, gathered, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e1.report","namespace":"default"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := spaces.Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []string{"team-a", layout.ViewsSpace("team-a")} {
		if n := spaceObjects(t, st, sp); n != 0 {
			t.Errorf("%d objects left in %s", n, sp)
		}
	}
	if _, err := spaces.Get(ctx, "team-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of the deleted space: %v, want NotFound", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("list in the deleted space: %v, want NotFound", err)
	}
	for {
		ev := nextEvent(t, w)
		if ev.Type == watch.Deleted && ev.Object.(*unstructured.Unstructured).GetName() == "team-a" {
			break
		}
	}

	// An inventory space can be created as well.
	if _, err := spaces.Create(ctx, spaceObject("inv-2", map[string]any{"kind": "inventory"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if kind, ok := New(Config{Store: st}).SpaceKind("inv-2"); !ok || kind != layout.SpaceKindInventory {
		t.Errorf("inv-2: kind %q (%v), want inventory", kind, ok)
	}
}

var settings = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "b"}}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return watch.Event{}
}

// invalidFields returns the fields a 422 names.
func invalidFields(err error) []string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != http.StatusUnprocessableEntity || st.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// Bad names, kinds and backends are a 422 naming the field, a taken name
// a 409, built-in spaces cannot be deleted (403), and a space's spec
// changes only in its backend (422); none of these writes anything.
func TestSpacesRefused(t *testing.T) {
	cfg, st := systemAPI(t)
	ctx := context.Background()
	spaces := dynamic.NewForConfigOrDie(in(cfg, layout.SystemSpace)).Resource(spacesGVR)
	before := st.Revision()
	for _, c := range []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"Bad_Name", nil, "metadata.name"},
		{"a.b", nil, "metadata.name"},
		{strings.Repeat("x", 64), nil, "metadata.name"},
		{"mailbox-x", nil, "metadata.name"},
		{"reports-x", nil, "metadata.name"},
		{"inbox", nil, "metadata.name"},
		{"ok", map[string]any{"kind": "mailbox"}, "spec.kind"},
		{"ok", map[string]any{"kind": "downsync"}, "spec.kind"},
		{"ok", map[string]any{"kind": "system"}, "spec.kind"},
		{"ok", map[string]any{"kind": "nonsense"}, "spec.kind"},
		{"ok", map[string]any{"backend": "helm"}, "spec.backend"},
		{"ok", map[string]any{"backend": "kube"}, "spec.kubeconfigSecret.name"},
		{"ok", map[string]any{"backend": "kube", "kind": "inventory", "kubeconfigSecret": map[string]any{"name": "x"}}, "spec.kind"},
	} {
		_, err := spaces.Create(ctx, spaceObject(c.name, c.spec), metav1.CreateOptions{})
		if fields := invalidFields(err); !slices.Contains(fields, c.field) {
			t.Errorf("create %s %v: %v (fields %v), want a 422 naming %s", c.name, c.spec, err, fields, c.field)
		}
	}
	for _, name := range []string{layout.DefaultSpace, layout.InventorySpace, layout.SystemSpace} {
		if _, err := spaces.Create(ctx, spaceObject(name, nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("create %s: %v, want AlreadyExists", name, err)
		}
	}
	if st.Revision() != before {
		t.Errorf("refused creates wrote: revision %d, was %d", st.Revision(), before)
	}
	if _, err := spaces.Create(ctx, spaceObject("embedded", map[string]any{"backend": "embedded"}), metav1.CreateOptions{}); err != nil {
		t.Errorf("backend embedded: %v", err)
	}
	if _, err := spaces.Create(ctx, spaceObject("embedded", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of a taken name: %v, want AlreadyExists", err)
	}

	before = st.Revision()
	for _, name := range []string{layout.DefaultSpace, layout.InventorySpace, layout.SystemSpace} {
		err := spaces.Delete(ctx, name, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "built in") {
			t.Errorf("delete %s: %v, want Forbidden: built in", name, err)
		}
	}
	if err := spaces.Delete(ctx, "nowhere", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a missing space: %v, want NotFound", err)
	}
	for _, c := range []struct {
		space, patch, field string
	}{
		{"embedded", `{"spec":{"kind":"inventory"}}`, "spec.kind"},
		{"embedded", `{"spec":{"backend":"kube"}}`, "spec.kubeconfigSecret.name"},
		{layout.SystemSpace, `{"spec":{"backend":"kube","kubeconfigSecret":{"name":"x"}}}`, "spec.backend"},
	} {
		_, err := spaces.Patch(ctx, c.space, "application/merge-patch+json", []byte(c.patch), metav1.PatchOptions{})
		if fields := invalidFields(err); !slices.Contains(fields, c.field) {
			t.Errorf("patch %s %s: %v (fields %v), want a 422 naming %s", c.space, c.patch, err, fields, c.field)
		}
	}
	if st.Revision() != before {
		t.Errorf("refused deletes wrote: revision %d, was %d", st.Revision(), before)
	}
	if n := spaceObjects(t, st, layout.DefaultSpace); n == 0 {
		t.Error("the default space lost its objects")
	}
}

// A space being deleted (its record terminating) takes no new objects.
func TestTerminatingSpaceRefusesCreates(t *testing.T) {
	cfg, st := systemAPI(t)
	ctx := context.Background()
	spaces := dynamic.NewForConfigOrDie(in(cfg, layout.SystemSpace)).Resource(spacesGVR)
	if _, err := spaces.Create(ctx, spaceObject("going", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := store.Key{Resource: layout.SpaceResource, Name: "going"}
	rec, err := st.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Data, &m); err != nil {
		t.Fatal(err)
	}
	m["metadata"].(map[string]any)["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	data, _ := json.Marshal(m)
	if _, err := st.Txn(ctx, store.Op{Type: store.OpUpdate, Key: key, Data: data}); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(in(cfg, "going"))
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &settings, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("create in a terminating space: %v, want Forbidden: being deleted", err)
	}
	// Deleting it again finishes the deletion.
	if err := spaces.Delete(ctx, "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := spaceObjects(t, st, "going"); n != 0 {
		t.Errorf("%d objects left", n)
	}
}

// Creates racing a space's deletion leave nothing behind: each is either
// stored before the record is marked terminating, and deleted with the
// space, or refused.
func TestSpaceDeletionRacingCreates(t *testing.T) {
	cfg, st := systemAPI(t)
	ctx := context.Background()
	spaces := dynamic.NewForConfigOrDie(in(cfg, layout.SystemSpace)).Resource(spacesGVR)
	for round := range 5 {
		if _, err := spaces.Create(ctx, spaceObject("busy", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cms := kubernetes.NewForConfigOrDie(in(cfg, "busy")).CoreV1().ConfigMaps("default")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					cm := settings.DeepCopy()
					cm.Name = fmt.Sprintf("cm-%d-%d", w, i)
					if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						// Refused, or the space is gone.
						if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
							t.Errorf("create during deletion: %v", err)
						}
						return
					}
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		if err := spaces.Delete(ctx, "busy", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		if n := spaceObjects(t, st, "busy"); n != 0 {
			t.Fatalf("round %d: %d objects left in the deleted space", round, n)
		}
	}
}

// A create is checked against its space's record only while every
// replica of the store reads the check (Config.CanCheck), and only in a
// space that can be deleted.
func TestSpaceCheckNeedsEveryReplica(t *testing.T) {
	cfg, st := systemAPI(t)
	readers := true
	srv := New(Config{Store: st, CanCheck: func() bool { return readers }})
	spaces := dynamic.NewForConfigOrDie(in(cfg, layout.SystemSpace)).Resource(spacesGVR)
	if _, err := spaces.Create(context.Background(), spaceObject("checked", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(store.Key{Resource: layout.SpaceResource, Name: "checked"})
	if err != nil {
		t.Fatal(err)
	}
	rq := &request{space: "checked", record: rec, sp: st.Space("checked")}
	if op, ok := srv.spaceCheck(rq); !ok || op.Type != store.OpCheck || op.Key != rec.Key || op.ExpectRevision != rec.Revision {
		t.Errorf("check %+v, %v; want one of the record at its revision", op, ok)
	}
	readers = false
	if op, ok := srv.spaceCheck(rq); ok {
		t.Errorf("check %+v while a replica does not read it", op)
	}
	readers = true
	def, err := st.Get(store.Key{Resource: layout.SpaceResource, Name: layout.DefaultSpace})
	if err != nil {
		t.Fatal(err)
	}
	if op, ok := srv.spaceCheck(&request{space: layout.DefaultSpace, record: def, sp: st.Space(layout.DefaultSpace)}); ok {
		t.Errorf("check %+v in a built-in space", op)
	}
}

// Who may create spaces is RBAC in the system space: a user without a
// rule is refused, and one bound to a ClusterRole granting create on
// spaces there may.
func TestSpacesRBAC(t *testing.T) {
	cfg, _ := systemAPI(t)
	ctx := context.Background()
	alice := in(cfg, layout.SystemSpace)
	alice.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	asAlice := dynamic.NewForConfigOrDie(alice).Resource(spacesGVR)
	if _, err := asAlice.Create(ctx, spaceObject("alices", nil), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice creates a space without a rule: %v, want Forbidden", err)
	}
	admin := kubernetes.NewForConfigOrDie(in(cfg, layout.SystemSpace))
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "space-creator"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"canopy.dev"}, Resources: []string{"spaces"}, Verbs: []string{"create", "get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-creates-spaces"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "space-creator"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := asAlice.Create(ctx, spaceObject("alices", nil), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("alice with the role: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := asAlice.Delete(ctx, "alices", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice deletes without a delete rule: %v, want Forbidden", err)
	}
	// A role in another space grants nothing here.
	bob := in(cfg, layout.SystemSpace)
	bob.Impersonate = rest.ImpersonationConfig{UserName: "bob"}
	defaultAdmin := kubernetes.NewForConfigOrDie(in(cfg, layout.DefaultSpace))
	if _, err := defaultAdmin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "bob"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamic.NewForConfigOrDie(bob).Resource(spacesGVR).Create(ctx, spaceObject("bobs", nil), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bob, cluster-admin of the default space, creates a space: %v, want Forbidden", err)
	}
}
