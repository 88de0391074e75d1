package auth

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/canopy-dev/canopy/relay/store"
)

// kind is one of the four kinds of RBAC object the index follows.
type kind int

const (
	kindRole kind = iota
	kindRoleBinding
	kindClusterRole
	kindClusterRoleBinding
	numKinds
)

// kindResources are the store resources of the kinds, indexed by kind.
var kindResources = [numKinds]store.Resource{
	kindRole:               {Group: rbacv1.GroupName, Resource: "roles"},
	kindRoleBinding:        {Group: rbacv1.GroupName, Resource: "rolebindings"},
	kindClusterRole:        {Group: rbacv1.GroupName, Resource: "clusterroles"},
	kindClusterRoleBinding: {Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
}

// rbacIndex holds the RBAC objects of one space, decoded, with aggregated
// ClusterRoles resolved. It has no lock of its own: the Authorizer's mutex
// guards it.
type rbacIndex struct {
	// listed is, per kind, the revision of the list that loaded it: watch
	// events at or below it are already reflected.
	listed              [numKinds]int64
	roles               map[nsName][]rbacv1.PolicyRule
	roleBindings        map[string][]*binding // by namespace, sorted by name
	clusterRoles        map[string]*clusterRole
	clusterRoleBindings []*binding // sorted by name
}

type nsName struct{ namespace, name string }

// binding is a RoleBinding or a ClusterRoleBinding (namespace "").
type binding struct {
	name, namespace string
	roleRef         rbacv1.RoleRef
	subjects        []rbacv1.Subject
}

// clusterRole is a ClusterRole with its effective rules: its own rules, or,
// when it has an aggregationRule, the rules of the ClusterRoles its
// selectors match.
type clusterRole struct {
	labels     labels.Set
	rules      []rbacv1.PolicyRule
	aggregated bool
	selectors  []labels.Selector
	effective  []rbacv1.PolicyRule
}

// roleObject and bindingObject are the parts of the RBAC kinds the index
// reads; Role and ClusterRole, RoleBinding and ClusterRoleBinding share them.
type roleObject struct {
	Rules           []rbacv1.PolicyRule     `json:"rules"`
	AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
}

type bindingObject struct {
	Subjects []rbacv1.Subject `json:"subjects"`
	RoleRef  rbacv1.RoleRef   `json:"roleRef"`
}

func newRBACIndex() *rbacIndex {
	return &rbacIndex{
		roles:        map[nsName][]rbacv1.PolicyRule{},
		roleBindings: map[string][]*binding{},
		clusterRoles: map[string]*clusterRole{},
	}
}

// put adds or replaces obj, of kind k. An object that cannot be decoded is
// removed instead: it grants nothing. After ClusterRoles changed, the caller
// calls aggregate.
func (ix *rbacIndex) put(k kind, obj *store.Object) {
	key := obj.Key
	switch k {
	case kindRole, kindClusterRole:
		var r roleObject
		if err := json.Unmarshal(obj.Data, &r); err != nil {
			ix.remove(k, key)
			return
		}
		if k == kindRole {
			ix.roles[nsName{key.Namespace, key.Name}] = r.Rules
			return
		}
		ix.clusterRoles[key.Name] = newClusterRole(obj.Labels, &r)
	case kindRoleBinding, kindClusterRoleBinding:
		var b bindingObject
		if err := json.Unmarshal(obj.Data, &b); err != nil {
			ix.remove(k, key)
			return
		}
		nb := &binding{name: key.Name, namespace: key.Namespace, roleRef: b.RoleRef, subjects: b.Subjects}
		if k == kindRoleBinding {
			ix.roleBindings[key.Namespace] = putBinding(ix.roleBindings[key.Namespace], nb)
			return
		}
		ix.clusterRoleBindings = putBinding(ix.clusterRoleBindings, nb)
	}
}

// remove deletes the object at key, of kind k, if present.
func (ix *rbacIndex) remove(k kind, key store.Key) {
	switch k {
	case kindRole:
		delete(ix.roles, nsName{key.Namespace, key.Name})
	case kindClusterRole:
		delete(ix.clusterRoles, key.Name)
	case kindRoleBinding:
		if bs := removeBinding(ix.roleBindings[key.Namespace], key.Name); len(bs) > 0 {
			ix.roleBindings[key.Namespace] = bs
		} else {
			delete(ix.roleBindings, key.Namespace)
		}
	case kindClusterRoleBinding:
		ix.clusterRoleBindings = removeBinding(ix.clusterRoleBindings, key.Name)
	}
}

func newClusterRole(set labels.Set, r *roleObject) *clusterRole {
	cr := &clusterRole{labels: set, rules: r.Rules, effective: r.Rules}
	if r.AggregationRule != nil {
		cr.aggregated = true
		for i := range r.AggregationRule.ClusterRoleSelectors {
			// An invalid selector selects nothing.
			if sel, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i]); err == nil {
				cr.selectors = append(cr.selectors, sel)
			}
		}
	}
	return cr
}

// aggregate recomputes the effective rules of the aggregated ClusterRoles.
//
// kube's aggregation controller replaces the rules of an aggregated
// ClusterRole with the union of the rules of the other ClusterRoles its
// selectors match (by name order, without duplicates), and those may be
// aggregated themselves. The fixed point of that, computed here at once, is
// the union of the own rules of every non-aggregated ClusterRole reachable
// through selectors; an aggregated role's own rules are ignored, as the
// controller would overwrite them.
func (ix *rbacIndex) aggregate() {
	names := slices.Sorted(maps.Keys(ix.clusterRoles))
	for _, name := range names {
		if cr := ix.clusterRoles[name]; cr.aggregated {
			cr.effective = ix.aggregatedRules(name, names)
		}
	}
}

// aggregatedRules returns the rules reachable from the aggregated
// ClusterRole root; names are all ClusterRole names, sorted.
func (ix *rbacIndex) aggregatedRules(root string, names []string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	seen := map[string]bool{root: true}
	var walk func(cr *clusterRole)
	walk = func(cr *clusterRole) {
		for _, sel := range cr.selectors {
			for _, name := range names {
				m := ix.clusterRoles[name]
				if seen[name] || !sel.Matches(m.labels) {
					continue
				}
				seen[name] = true
				if m.aggregated {
					walk(m)
					continue
				}
				for _, r := range m.rules {
					if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return sameRule(have, r) }) {
						rules = append(rules, r)
					}
				}
			}
		}
	}
	walk(ix.clusterRoles[root])
	return rules
}

func sameRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) &&
		slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

func compareBinding(b *binding, name string) int { return strings.Compare(b.name, name) }

// putBinding inserts b into bs, sorted by name, replacing any of that name.
func putBinding(bs []*binding, b *binding) []*binding {
	i, found := slices.BinarySearchFunc(bs, b.name, compareBinding)
	if found {
		bs[i] = b
		return bs
	}
	return slices.Insert(bs, i, b)
}

// removeBinding deletes the binding called name from bs, if present.
func removeBinding(bs []*binding, name string) []*binding {
	if i, found := slices.BinarySearchFunc(bs, name, compareBinding); found {
		return slices.Delete(bs, i, i+1)
	}
	return bs
}
