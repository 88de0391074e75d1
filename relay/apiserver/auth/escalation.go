package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/canopy-dev/canopy/relay/store"
)

// fullAuthority is cluster-admin's rules: what setting an aggregationRule
// needs, since it can gather any rule.
var fullAuthority = clusterAdminRules

// ConfirmNoEscalation checks a write of an RBAC object by u as kube's RBAC
// storage does, so that nobody grants, through the object, a permission
// they do not hold. obj is the object as it would be stored (its Key, Labels
// and Data), old the stored version it replaces, nil on create. It returns
// nil when the write may go ahead, a 403 Forbidden *apierrors.StatusError
// with kube's text ("user X (groups=[...]) is attempting to grant RBAC
// permissions not currently held: ...") when it would escalate, a 404 when
// a binding refers to a role that does not exist (or is inert), a 422 for
// a roleRef that names no RBAC role, or a store error. Objects that are
// not RBAC objects pass.
//
// The rules are kube's, evaluated with the RBAC objects of obj's space:
//
//   - Members of system:masters may write anything.
//   - A Role or ClusterRole needs every permission it grants held by u, in
//     its namespace (a ClusterRole: at cluster scope, so from
//     ClusterRoleBindings alone), or the escalate verb on it. Setting or
//     changing an aggregationRule needs cluster-admin's permissions.
//   - A RoleBinding or ClusterRoleBinding needs every permission of the
//     role it refers to held by u in its namespace, or the bind verb on
//     that role (with resourceNames honoured).
//   - An update that changes only what the garbage collector changes
//     (ownerReferences, finalizers, managed fields) passes.
//
// Only writes that make an object live are checked: an object Inert
// reports (an RBAC object of a workload description space without the
// space-RBAC label) grants nothing here and is workload for the
// destinations, whose own clusters' RBAC governs it. Writing it passes;
// labelling it so that it becomes live is an update of a live object and
// is checked in full. A role that a binding refers to is looked up among
// the live roles.
//
// The space's RBAC objects are read from the store for each check (not
// from the index Authorize uses, which lags the store by a watch), so that
// a Role written just before a binding to it is found. The escalate and
// bind verbs are decided by Authorize.
func (a *Authorizer) ConfirmNoEscalation(ctx context.Context, u user.Info, obj, old *store.Object) error {
	k, ok := kindOf(obj.Key.Resource)
	if !ok || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) || a.inert(obj) {
		return nil
	}
	if old != nil && !a.inert(old) && onlyGCFieldsDiffer(obj.Data, old.Data) {
		return nil
	}
	space, ns, name := obj.Key.Space, obj.Key.Namespace, obj.Key.Name
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: obj.Key.Resource.Resource}
	switch k {
	case kindRole, kindClusterRole:
		if a.allowed(ctx, space, u, "escalate", gr.Resource, ns, name) {
			return nil
		}
		var r, oldR roleObject
		if err := json.Unmarshal(obj.Data, &r); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		ix, err := a.load(space)
		if err != nil {
			return err
		}
		if err := confirmCovered(ix, u, ns, r.Rules); err != nil {
			return apierrors.NewForbidden(gr, name, err)
		}
		if old != nil {
			_ = json.Unmarshal(old.Data, &oldR)
		}
		if k == kindClusterRole && (hasAggregationRule(&r) || hasAggregationRule(&oldR)) {
			if confirmCovered(ix, u, "", fullAuthority) != nil {
				return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	default:
		var b bindingObject
		if err := json.Unmarshal(obj.Data, &b); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if err := validRoleRef(k, name, b.RoleRef); err != nil {
			return err
		}
		if a.allowed(ctx, space, u, "bind", roleResource(b.RoleRef.Kind), ns, b.RoleRef.Name) {
			return nil
		}
		ix, err := a.load(space)
		if err != nil {
			return err
		}
		rules, err := ix.roleRefRules(b.RoleRef, ns)
		if err != nil {
			return err // kube's NotFound for the role
		}
		if err := confirmCovered(ix, u, ns, rules); err != nil {
			return apierrors.NewForbidden(gr, name, err)
		}
		return nil
	}
}

// kindOf returns the kind of RBAC object stored under r.
func kindOf(r store.Resource) (kind, bool) {
	i := slices.Index(kindResources[:], r)
	return kind(i), i >= 0
}

func roleResource(roleKind string) string {
	if roleKind == "Role" {
		return "roles"
	}
	return "clusterroles"
}

// allowed reports whether Authorize allows u the verb on an RBAC role
// resource (roles or clusterroles) named name in namespace.
func (a *Authorizer) allowed(ctx context.Context, space string, u user.Info, verb, resource, namespace, name string) bool {
	dec, _, err := a.Authorize(ctx, space, authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true,
	})
	return err == nil && dec == authorizer.DecisionAllow
}

// validRoleRef checks what kube's validation checks of a roleRef before
// the escalation check reads it: the bind verb is decided on its API group
// and kind, so they must name an RBAC role.
func validRoleRef(k kind, name string, ref rbacv1.RoleRef) error {
	p := field.NewPath("roleRef")
	var errs field.ErrorList
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole", "Role"}
	if k == kindClusterRoleBinding {
		kinds = kinds[:1]
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if len(errs) == 0 {
		return nil
	}
	gk := schema.GroupKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}
	if k == kindClusterRoleBinding {
		gk.Kind = "ClusterRoleBinding"
	}
	return apierrors.NewInvalid(gk, name, errs)
}

func hasAggregationRule(r *roleObject) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// confirmCovered returns kube's escalation error unless the rules u holds
// in namespace of ix's space ("": cluster scope), built-in grants
// included, cover rules.
func confirmCovered(ix *rbacIndex, u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	var held []rbacv1.PolicyRule
	var errs []error
	collect := func(_ source, rs []rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		}
		held = append(held, rs...)
		return true
	}
	builtin.visit(u, "", collect)
	ix.visit(u, namespace, collect)
	covered, missing := rbacvalidation.Covers(held, rules)
	if covered {
		return nil
	}
	var lines []string
	for _, r := range compactRules(missing) {
		lines = append(lines, compactString(r))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", utilerrors.NewAggregate(errs))
	}
	return errors.New(msg)
}

// compactRules merges rules that name one API group and one resource (and
// at most one resource name) and differ only in verbs, as kube's
// CompactRules does for the missing rules it reports.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct {
		group, resource string
		hasName         bool
		name            string
	}
	var out []rbacv1.PolicyRule
	merged := map[simple]int{} // index in out
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 {
			out = append(out, r)
			continue
		}
		key := simple{group: r.APIGroups[0], resource: r.Resources[0], hasName: len(r.ResourceNames) == 1}
		if key.hasName {
			key.name = r.ResourceNames[0]
		}
		if i, ok := merged[key]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		merged[key] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// compactString is kube's CompactString: the rule as
// {APIGroups:["*"], Resources:["*"], Verbs:["*"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// gcMetadata are the metadata fields kube's escalation checks ignore on
// update (IsOnlyMutatingGCFields), with those the server sets.
var gcMetadata = []string{"ownerReferences", "finalizers", "managedFields", "selfLink", "resourceVersion"}

// onlyGCFieldsDiffer reports whether two encodings of an object differ in
// gcMetadata at most.
func onlyGCFieldsDiffer(a, b []byte) bool {
	var ma, mb map[string]any
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return false
	}
	strip := func(m map[string]any) {
		md, ok := m["metadata"].(map[string]any)
		if !ok {
			return
		}
		md = maps.Clone(md)
		for _, f := range gcMetadata {
			delete(md, f)
		}
		m["metadata"] = md
	}
	strip(ma)
	strip(mb)
	return reflect.DeepEqual(ma, mb)
}
