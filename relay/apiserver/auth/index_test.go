package auth

import (
	"encoding/json"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/store"
)

// object encodes obj as the store would hold it in space s.
func object(t *testing.T, obj metav1.Object) *store.Object {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Object{Key: keyOf("s", obj), Data: data, Labels: obj.GetLabels()}
}

func bindingNames(bs []*binding) []string {
	var names []string
	for _, b := range bs {
		names = append(names, b.name)
	}
	return names
}

func TestIndexPutRemove(t *testing.T) {
	ix := newRBACIndex()

	// ClusterRoleBindings stay sorted; a put replaces.
	ix.put(kindClusterRoleBinding, object(t, makeClusterRoleBinding("b", "r", userSubject("x"))))
	ix.put(kindClusterRoleBinding, object(t, makeClusterRoleBinding("c", "r")))
	ix.put(kindClusterRoleBinding, object(t, makeClusterRoleBinding("a", "r")))
	ix.put(kindClusterRoleBinding, object(t, makeClusterRoleBinding("b", "r", userSubject("y"))))
	if got := bindingNames(ix.clusterRoleBindings); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("cluster role bindings %v", got)
	}
	if s := ix.clusterRoleBindings[1].subjects; len(s) != 1 || s[0].Name != "y" {
		t.Errorf("b not replaced: %v", s)
	}
	ix.remove(kindClusterRoleBinding, store.Key{Name: "b"})
	ix.remove(kindClusterRoleBinding, store.Key{Name: "zz"})
	if got := bindingNames(ix.clusterRoleBindings); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after removal %v", got)
	}

	// RoleBindings by namespace; an emptied namespace goes away.
	ix.put(kindRoleBinding, object(t, makeRoleBinding("dev", "rb", "Role", "r")))
	ix.put(kindRoleBinding, object(t, makeRoleBinding("prod", "rb", "Role", "r")))
	ix.remove(kindRoleBinding, store.Key{Namespace: "dev", Name: "rb"})
	if _, ok := ix.roleBindings["dev"]; ok || len(ix.roleBindings["prod"]) != 1 {
		t.Errorf("role bindings %v", ix.roleBindings)
	}

	// Roles.
	ix.put(kindRole, object(t, makeRole("dev", "r", rule(read, core, all))))
	if _, ok := ix.roles[nsName{"dev", "r"}]; !ok {
		t.Error("role not indexed")
	}
	ix.remove(kindRole, store.Key{Namespace: "dev", Name: "r"})
	if len(ix.roles) != 0 {
		t.Errorf("roles %v", ix.roles)
	}

	// An undecodable version removes the previous one: it grants nothing.
	for k, obj := range map[kind]metav1.Object{
		kindRole:               makeRole("dev", "r"),
		kindRoleBinding:        makeRoleBinding("prod", "rb", "Role", "r"),
		kindClusterRole:        makeClusterRole("cr", nil),
		kindClusterRoleBinding: makeClusterRoleBinding("a", "r"),
	} {
		o := object(t, obj)
		ix.put(k, o)
		ix.put(k, &store.Object{Key: o.Key, Data: []byte(`{"rules": 7, "subjects": 7}`)})
	}
	if len(ix.roles)+len(ix.roleBindings)+len(ix.clusterRoles) != 0 || !slices.Equal(bindingNames(ix.clusterRoleBindings), []string{"c"}) {
		t.Errorf("undecodable objects kept: %+v", ix)
	}
}

func TestRoleRefRules(t *testing.T) {
	ix := newRBACIndex()
	ix.put(kindRole, object(t, makeRole("dev", "r", rule(read, core, all))))
	ix.put(kindClusterRole, object(t, makeClusterRole("cr", nil, rule(read, core, all))))
	tests := []struct {
		ref       rbacv1.RoleRef
		namespace string
		err       string
	}{
		{rbacv1.RoleRef{Kind: "Role", Name: "r"}, "dev", ""},
		{rbacv1.RoleRef{Kind: "Role", Name: "r"}, "prod", `role.rbac.authorization.k8s.io "r" not found`},
		{rbacv1.RoleRef{Kind: "Role", Name: "r"}, "", `role.rbac.authorization.k8s.io "r" not found`},
		{rbacv1.RoleRef{Kind: "ClusterRole", Name: "cr"}, "", ""},
		{rbacv1.RoleRef{Kind: "ClusterRole", Name: "nope"}, "dev", `clusterrole.rbac.authorization.k8s.io "nope" not found`},
		{rbacv1.RoleRef{Kind: "Group", Name: "g"}, "dev", `unsupported role reference kind: "Group"`},
	}
	for _, tt := range tests {
		rules, err := ix.roleRefRules(tt.ref, tt.namespace)
		switch {
		case tt.err == "" && (err != nil || len(rules) != 1):
			t.Errorf("%v in %q: %v, %v", tt.ref, tt.namespace, rules, err)
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("%v in %q: %v, want %s", tt.ref, tt.namespace, err, tt.err)
		}
	}
}

func TestAggregationCycle(t *testing.T) {
	ix := newRBACIndex()
	a := map[string]string{"to-a": "true"}
	b := map[string]string{"to-b": "true"}
	ix.put(kindClusterRole, object(t, makeAggregatedClusterRole("a", b, a)))
	ix.put(kindClusterRole, object(t, makeAggregatedClusterRole("b", a, b)))
	ix.put(kindClusterRole, object(t, makeClusterRole("part-a", a, rule([]string{"get"}, core, []string{"pods"}))))
	ix.put(kindClusterRole, object(t, makeClusterRole("part-b", b, rule([]string{"get"}, core, []string{"services"}))))
	ix.put(kindClusterRole, object(t, makeClusterRole("dup-b", b, rule([]string{"get"}, core, []string{"services"}))))
	bad := makeAggregatedClusterRole("bad", nil)
	bad.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}}
	ix.put(kindClusterRole, object(t, bad))
	ix.aggregate()
	for _, name := range []string{"a", "b"} {
		var got []string
		for _, r := range ix.clusterRoles[name].effective {
			got = append(got, r.Resources...)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"pods", "services"}) {
			t.Errorf("%s aggregates %v, want pods and services once each", name, got)
		}
	}
	if r := ix.clusterRoles["bad"].effective; len(r) != 0 {
		t.Errorf("invalid selector selected %v", r)
	}
}
