package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/store"
)

// Spaces of the escalation tests: wds is a workload description space,
// whose RBAC objects are inert unless labelled; inv is any other space.
const (
	wds = "wds"
	inv = "inv"
)

// storeObject is obj as the API server hands it to ConfirmNoEscalation.
func storeObject(t *testing.T, space string, obj metav1.Object) *store.Object {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Object{Key: keyOf(space, obj), Data: data, Labels: labels.Set(obj.GetLabels())}
}

func spaceRBAC[T metav1.Object](obj T) T {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[spaceRBACLabel] = "true"
	obj.SetLabels(l)
	return obj
}

var (
	clusterAdmin  = makeClusterRole("cluster-admin", map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}, clusterAdminRules...)
	secretsReader = makeClusterRole("secrets-reader", nil, rule([]string{"get", "list"}, []string{""}, []string{"secrets"}))
)

// escalationHarness is a harness whose space wds is a workload
// description space, with cluster-admin and secrets-reader in both spaces.
func escalationHarness(t *testing.T) *harness {
	h := newHarnessInert(t, store.Options{}, inertIn(wds))
	for _, space := range []string{wds, inv} {
		h.put(space, clusterAdmin, spaceRBAC(secretsReader.DeepCopy()))
	}
	return h
}

// wantEscalation checks that err is kube's 403 for u granting the missing
// rules, listed in compact form.
func wantEscalation(t *testing.T, what string, err error, u user.Info, missing ...string) {
	t.Helper()
	var st *apierrors.StatusError
	if !errors.As(err, &st) || st.ErrStatus.Code != http.StatusForbidden || st.ErrStatus.Reason != metav1.StatusReasonForbidden {
		t.Errorf("%s: %v, want 403 Forbidden", what, err)
		return
	}
	msg := st.ErrStatus.Message
	head := `is forbidden: user "` + u.GetName() + `" (groups=`
	if !strings.Contains(msg, head) || !strings.Contains(msg, "is attempting to grant RBAC permissions not currently held:\n") {
		t.Errorf("%s: message %q, want kube's escalation text", what, msg)
	}
	for _, m := range missing {
		if !strings.Contains(msg, "\n"+m) {
			t.Errorf("%s: message %q does not list %s", what, msg, m)
		}
	}
}

func TestEscalationBindings(t *testing.T) {
	h := escalationHarness(t)
	ctx := context.Background()
	robot := &user.DefaultInfo{Name: serviceaccount.MakeUsername("team", "robot"),
		Groups: append(serviceaccount.MakeGroupNames("team"), user.AllAuthenticated)}
	robotSubject := saSubject("team", "robot")
	createRB := makeClusterRole("create-rolebindings", nil, rule([]string{"create", "update", "patch"}, []string{"rbac.authorization.k8s.io"}, []string{"rolebindings"}))
	createCRB := makeClusterRole("create-clusterrolebindings", nil, rule([]string{"create", "update", "patch"}, []string{"rbac.authorization.k8s.io"}, []string{"clusterrolebindings"}))
	for _, space := range []string{wds, inv} {
		h.put(space,
			spaceRBAC(createRB), spaceRBAC(createCRB),
			spaceRBAC(makeRoleBinding("team", "robot-binds", "ClusterRole", "create-rolebindings", robotSubject)),
			spaceRBAC(makeClusterRoleBinding("crb-robot", "create-clusterrolebindings", userSubject("crb-robot"))),
		)
		h.sync(space)
	}
	crbRobot := person("crb-robot")
	adminCRBMissing := []string{`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`, `{NonResourceURLs:["*"], Verbs:["*"]}`}

	for _, c := range []struct {
		name  string
		space string
		u     user.Info
		obj   metav1.Object
	}{
		{"space-rbac RoleBinding to cluster-admin", wds, robot,
			spaceRBAC(makeRoleBinding("team", "mine", "ClusterRole", "cluster-admin", robotSubject))},
		{"RoleBinding to cluster-admin in another space", inv, robot,
			makeRoleBinding("team", "mine", "ClusterRole", "cluster-admin", robotSubject)},
		{"space-rbac ClusterRoleBinding to cluster-admin", wds, crbRobot,
			spaceRBAC(makeClusterRoleBinding("mine", "cluster-admin", userSubject("crb-robot")))},
		{"ClusterRoleBinding to cluster-admin in another space", inv, crbRobot,
			makeClusterRoleBinding("mine", "cluster-admin", userSubject("crb-robot"))},
	} {
		err := h.az.ConfirmNoEscalation(ctx, c.u, storeObject(t, c.space, c.obj), nil)
		wantEscalation(t, c.name, err, c.u, adminCRBMissing...)
	}
	// Binding secrets-reader, which the robot does not hold either.
	err := h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, inv, makeRoleBinding("team", "mine", "ClusterRole", "secrets-reader", robotSubject)), nil)
	wantEscalation(t, "RoleBinding to secrets-reader", err, robot, `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`)

	// Inert objects grant nothing here: writing them is not checked, but
	// making them live is.
	inertRB := makeRoleBinding("team", "for-edges", "ClusterRole", "cluster-admin", robotSubject)
	if err := h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, wds, inertRB), nil); err != nil {
		t.Errorf("inert RoleBinding for the edges: %v", err)
	}
	old := storeObject(t, wds, inertRB)
	err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, wds, spaceRBAC(inertRB.DeepCopy())), old)
	wantEscalation(t, "labelling an inert RoleBinding space-rbac", err, robot, adminCRBMissing...)
	boot := inertRB.DeepCopy()
	boot.Labels = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, wds, boot), old)
	wantEscalation(t, "labelling an inert RoleBinding rbac-defaults", err, robot, adminCRBMissing...)

	// A binding to a missing (or inert) role: 404, as kube.
	h.put(wds, makeClusterRole("inert-role", nil, rule([]string{"get"}, []string{""}, []string{"pods"})))
	for _, role := range []string{"no-such-role", "inert-role"} {
		err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, wds, spaceRBAC(makeRoleBinding("team", "mine", "ClusterRole", role, robotSubject))), nil)
		if !apierrors.IsNotFound(err) {
			t.Errorf("binding to %s: %v, want 404", role, err)
		}
	}
	// A roleRef outside RBAC: 422.
	bad := makeRoleBinding("team", "mine", "ClusterRole", "cluster-admin", robotSubject)
	bad.RoleRef.APIGroup = "example.com"
	if err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, inv, bad), nil); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "roleRef.apiGroup") {
		t.Errorf("binding with roleRef.apiGroup example.com: %v, want 422 on roleRef.apiGroup", err)
	}

	// With the permissions held, the binding is allowed.
	h.put(inv, makeRoleBinding("team", "robot-reads", "ClusterRole", "secrets-reader", robotSubject))
	h.sync(inv)
	if err := h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, inv, makeRoleBinding("team", "mine", "ClusterRole", "secrets-reader", userSubject("friend"))), nil); err != nil {
		t.Errorf("binding a role whose permissions are held: %v", err)
	}
	// ... in that namespace only.
	err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, inv, makeRoleBinding("other", "mine", "ClusterRole", "secrets-reader", robotSubject)), nil)
	wantEscalation(t, "RoleBinding in another namespace", err, robot)

	// bind on the role allows it, resourceNames honoured.
	for _, space := range []string{wds, inv} {
		h.put(space,
			spaceRBAC(makeClusterRole("bind-admin", nil, rule([]string{"bind"}, []string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, "cluster-admin"))),
			spaceRBAC(makeRoleBinding("team", "robot-binds-admin", "ClusterRole", "bind-admin", robotSubject)),
			spaceRBAC(makeClusterRoleBinding("crb-robot-binds-admin", "bind-admin", userSubject("crb-robot"))),
		)
		h.sync(space)
	}
	for _, c := range []struct {
		space string
		u     user.Info
		obj   metav1.Object
	}{
		{wds, robot, spaceRBAC(makeRoleBinding("team", "mine", "ClusterRole", "cluster-admin", robotSubject))},
		{inv, robot, makeRoleBinding("team", "mine", "ClusterRole", "cluster-admin", robotSubject)},
		{wds, crbRobot, spaceRBAC(makeClusterRoleBinding("mine", "cluster-admin", userSubject("crb-robot")))},
		{inv, crbRobot, makeClusterRoleBinding("mine", "cluster-admin", userSubject("crb-robot"))},
	} {
		if err := h.az.ConfirmNoEscalation(ctx, c.u, storeObject(t, c.space, c.obj), nil); err != nil {
			t.Errorf("%s in %s with bind on cluster-admin: %v", c.obj.GetName(), c.space, err)
		}
	}
	h.put(inv, makeClusterRole("other-admin", nil, clusterAdminRules...))
	err = h.az.ConfirmNoEscalation(ctx, crbRobot, storeObject(t, inv, makeClusterRoleBinding("mine", "other-admin", userSubject("crb-robot"))), nil)
	wantEscalation(t, "bind on cluster-admin only, binding other-admin", err, crbRobot, adminCRBMissing...)
	// bind granted in one namespace does not reach the cluster scope.
	err = h.az.ConfirmNoEscalation(ctx, robot, storeObject(t, inv, makeClusterRoleBinding("mine", "cluster-admin", robotSubject)), nil)
	wantEscalation(t, "ClusterRoleBinding with bind in a namespace", err, robot, adminCRBMissing...)

	// system:masters may do anything.
	admin := &user.DefaultInfo{Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	if err := h.az.ConfirmNoEscalation(ctx, admin, storeObject(t, inv, makeClusterRoleBinding("x", "no-such-role", userSubject("y"))), nil); err != nil {
		t.Errorf("admin: %v", err)
	}
}

func TestEscalationRoles(t *testing.T) {
	h := escalationHarness(t)
	ctx := context.Background()
	alice := person("alice")
	writeRoles := makeClusterRole("write-roles", nil, rule([]string{"create", "update"}, []string{"rbac.authorization.k8s.io"}, []string{"roles", "clusterroles"}))
	for _, space := range []string{wds, inv} {
		h.put(space,
			spaceRBAC(writeRoles),
			spaceRBAC(makeClusterRoleBinding("alice-writes", "write-roles", userSubject("alice"))),
			spaceRBAC(makeRoleBinding("team", "alice-reads", "ClusterRole", "secrets-reader", userSubject("alice"))),
		)
		h.sync(space)
	}
	readSecrets := rule([]string{"get"}, []string{""}, []string{"secrets"})
	listPods := rule([]string{"list", "watch"}, []string{""}, []string{"pods"})

	// A Role granting what alice holds in its namespace: allowed.
	for _, space := range []string{wds, inv} {
		r := makeRole("team", "r", readSecrets)
		if space == wds {
			r = spaceRBAC(r)
		}
		if err := h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, space, r), nil); err != nil {
			t.Errorf("Role granting held permissions in %s: %v", space, err)
		}
	}
	// More than she holds, or elsewhere, or cluster-wide: refused.
	err := h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, inv, makeRole("team", "r", readSecrets, listPods)), nil)
	wantEscalation(t, "Role granting pods", err, alice, `{APIGroups:[""], Resources:["pods"], Verbs:["list" "watch"]}`)
	err = h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, wds, spaceRBAC(makeRole("other", "r", readSecrets))), nil)
	wantEscalation(t, "Role in another namespace", err, alice, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	err = h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, inv, makeClusterRole("r", nil, readSecrets)), nil)
	wantEscalation(t, "ClusterRole", err, alice, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	// An update that changes only finalizers of an existing role is not checked.
	big := makeClusterRole("big", nil, clusterAdminRules...)
	old := storeObject(t, inv, big)
	big.Finalizers = []string{"example.com/keep"}
	if err := h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, inv, big), old); err != nil {
		t.Errorf("finalizer-only update: %v", err)
	}
	big.Labels = map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}
	wantEscalation(t, "relabelling a ClusterRole", h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, inv, big), old), alice)
	// An inert role is not checked.
	if err := h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, wds, makeClusterRole("for-edges", nil, clusterAdminRules...)), nil); err != nil {
		t.Errorf("inert ClusterRole: %v", err)
	}

	// With escalate, anything goes but an aggregationRule.
	for _, space := range []string{wds, inv} {
		h.put(space,
			spaceRBAC(makeClusterRole("escalate", nil, rule([]string{"escalate"}, []string{"rbac.authorization.k8s.io"}, []string{"roles", "clusterroles"}))),
			spaceRBAC(makeClusterRoleBinding("alice-escalates", "escalate", userSubject("alice"))),
		)
		h.sync(space)
	}
	for _, obj := range []metav1.Object{makeRole("other", "r", listPods), makeClusterRole("r", nil, clusterAdminRules...)} {
		if err := h.az.ConfirmNoEscalation(ctx, alice, storeObject(t, inv, obj), nil); err != nil {
			t.Errorf("%T with escalate: %v", obj, err)
		}
	}
	// Without escalate, an aggregationRule needs cluster-admin's rules.
	bob := person("bob")
	h.put(inv, makeClusterRoleBinding("bob-writes", "write-roles", userSubject("bob")))
	h.sync(inv)
	agg := makeAggregatedClusterRole("agg", nil, map[string]string{"x": "y"})
	agg.Rules = nil
	err = h.az.ConfirmNoEscalation(ctx, bob, storeObject(t, inv, agg), nil)
	var st *apierrors.StatusError
	if !errors.As(err, &st) || st.ErrStatus.Code != http.StatusForbidden || !strings.Contains(st.ErrStatus.Message, "must have cluster-admin privileges to use the aggregationRule") {
		t.Errorf("aggregated ClusterRole: %v, want 403 about the aggregationRule", err)
	}
}
