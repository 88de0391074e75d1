package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// harness runs an Authorizer over a real in-memory store.
type harness struct {
	t   *testing.T
	st  *store.Store
	az  *Authorizer
	seq int // sentinel counter of sync
}

// newHarness starts an Authorizer on a new store; the cleanup stops it and
// checks that Start returned nil.
func newHarness(t *testing.T, opts store.Options) *harness {
	t.Helper()
	return newHarnessInert(t, opts, nil)
}

// spaceRBACLabel and inertIn copy, for these tests, the rule a root sets as
// Authorizer.Inert (topology/placement.InertInWDS): in workload description
// space wds, an RBAC object is inert unless so labelled, or a default role.
const spaceRBACLabel = "edge.canopy.dev/space-rbac"

func inertIn(wds string) func(*store.Object) bool {
	return func(obj *store.Object) bool {
		return obj.Key.Space == wds && obj.Labels[spaceRBACLabel] != "true" && obj.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults"
	}
}

// newHarnessInert is newHarness with Authorizer.Inert set to inert.
func newHarnessInert(t *testing.T, opts store.Options, inert func(*store.Object) bool) *harness {
	t.Helper()
	st := store.New(opts)
	h := &harness{t: t, st: st, az: NewAuthorizer(st)}
	h.az.Inert = inert
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.az.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start: %v", err)
		}
		if h.az.Synced() {
			t.Error("Synced after Start returned")
		}
		st.Close()
	})
	poll.True(t, "Synced", h.az.Synced)
	return h
}

// resourceOf returns the store resource of an RBAC or core object.
func resourceOf(obj any) store.Resource {
	switch obj.(type) {
	case *rbacv1.Role:
		return kindResources[kindRole]
	case *rbacv1.RoleBinding:
		return kindResources[kindRoleBinding]
	case *rbacv1.ClusterRole:
		return kindResources[kindClusterRole]
	case *rbacv1.ClusterRoleBinding:
		return kindResources[kindClusterRoleBinding]
	case *corev1.ServiceAccount:
		return serviceAccounts
	}
	panic(fmt.Sprintf("no resource for %T", obj))
}

func keyOf(space string, obj metav1.Object) store.Key {
	return store.Key{Space: space, Resource: resourceOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// putObject creates or updates obj in space.
func putObject(t *testing.T, st *store.Store, space string, obj metav1.Object) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	k := keyOf(space, obj)
	_, err = st.Create(context.Background(), k, data)
	if errors.Is(err, store.ErrExists) {
		_, err = st.Update(context.Background(), k, data, 0)
	}
	if err != nil {
		t.Fatalf("writing %s: %v", k, err)
	}
}

func deleteObject(t *testing.T, st *store.Store, space string, obj metav1.Object) {
	t.Helper()
	if _, err := st.Delete(context.Background(), keyOf(space, obj), 0, ""); err != nil {
		t.Fatalf("deleting %s: %v", keyOf(space, obj), err)
	}
}

func (h *harness) put(space string, objs ...metav1.Object) {
	h.t.Helper()
	for _, o := range objs {
		putObject(h.t, h.st, space, o)
	}
}

func (h *harness) delete(space string, objs ...metav1.Object) {
	h.t.Helper()
	for _, o := range objs {
		deleteObject(h.t, h.st, space, o)
	}
}

// sync waits until the Authorizer has applied every write made to space so
// far: it writes one inert object of each kind (each watch delivers in
// revision order) and waits until all four are in the index.
func (h *harness) sync(space string) {
	h.t.Helper()
	h.seq++
	name := fmt.Sprintf("zz-sync-%d", h.seq)
	live := map[string]string{spaceRBACLabel: "true"} // also in a workload description space
	h.put(space,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sync", Labels: live}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sync", Labels: live}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: live}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: live}},
	)
	poll.True(h.t, "sync objects indexed", func() bool {
		h.az.mu.RLock()
		defer h.az.mu.RUnlock()
		ix := h.az.spaces[space]
		if ix == nil {
			return false
		}
		_, role := ix.roles[nsName{"sync", name}]
		_, cr := ix.clusterRoles[name]
		hasBinding := func(bs []*binding) bool {
			for _, b := range bs {
				if b.name == name {
					return true
				}
			}
			return false
		}
		return role && cr && hasBinding(ix.roleBindings["sync"]) && hasBinding(ix.clusterRoleBindings)
	})
}

// Object builders.

func makeRole(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func makeClusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func makeAggregatedClusterRole(name string, labels map[string]string, selectors ...map[string]string) *rbacv1.ClusterRole {
	cr := makeClusterRole(name, labels, rule([]string{"*"}, []string{"*"}, []string{"*"})) // ignored: aggregated
	cr.AggregationRule = &rbacv1.AggregationRule{}
	for _, s := range selectors {
		cr.AggregationRule.ClusterRoleSelectors = append(cr.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return cr
}

func makeRoleBinding(ns, name, roleKind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
		Subjects:   subjects,
	}
}

func makeClusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

func makeServiceAccount(ns, name, uid string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// person is an authenticated user with the given groups.
func person(name string, groups ...string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: append(groups, user.AllAuthenticated)}
}

// resourceAttrs describes a resource request; resource may be
// "resource/subresource".
func resourceAttrs(u user.Info, verb, group, resource, ns, name string) *authorizer.AttributesRecord {
	a := &authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Namespace: ns, Name: name, ResourceRequest: true}
	a.Resource, a.Subresource, _ = strings.Cut(resource, "/")
	return a
}

func pathAttrs(u user.Info, verb, path string) *authorizer.AttributesRecord {
	return &authorizer.AttributesRecord{User: u, Verb: verb, Path: path}
}

// equalJSON reports whether a and b encode to the same JSON, so that nil and
// empty slices compare equal.
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
