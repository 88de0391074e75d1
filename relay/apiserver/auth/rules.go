package auth

import (
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// builtin holds the grants of kube's default system:basic-user,
// system:discovery and system:public-info-viewer ClusterRoleBindings, which
// every space has without storing them.
var builtin = newBuiltinIndex()

func newBuiltinIndex() *rbacIndex {
	get := []string{"get"}
	authenticated := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: user.AllAuthenticated}
	unauthenticated := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: user.AllUnauthenticated}
	roles := []struct {
		name     string
		rules    []rbacv1.PolicyRule
		subjects []rbacv1.Subject
	}{{
		name: "system:basic-user",
		rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
		},
		subjects: []rbacv1.Subject{authenticated},
	}, {
		name: "system:discovery",
		rules: []rbacv1.PolicyRule{{Verbs: get, NonResourceURLs: []string{
			"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/",
		}}},
		subjects: []rbacv1.Subject{authenticated},
	}, {
		name:     "system:public-info-viewer",
		rules:    []rbacv1.PolicyRule{{Verbs: get, NonResourceURLs: []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}}},
		subjects: []rbacv1.Subject{authenticated, unauthenticated},
	}}
	ix := newRBACIndex()
	for _, r := range roles {
		ix.clusterRoles[r.name] = &clusterRole{rules: r.rules, effective: r.rules}
		ix.clusterRoleBindings = putBinding(ix.clusterRoleBindings, &binding{
			name:     r.name,
			roleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.name},
			subjects: r.subjects,
		})
	}
	return ix
}

// clusterAdminRules are the rules of kube's cluster-admin ClusterRole,
// reported by RulesFor for members of system:masters.
var clusterAdminRules = []rbacv1.PolicyRule{
	{Verbs: []string{rbacv1.VerbAll}, APIGroups: []string{rbacv1.APIGroupAll}, Resources: []string{rbacv1.ResourceAll}},
	{Verbs: []string{rbacv1.VerbAll}, NonResourceURLs: []string{rbacv1.NonResourceAll}},
}

// visitor receives the rules that one binding grants, or the error that
// kept them from being resolved. Returning false stops the walk.
type visitor func(src source, rules []rbacv1.PolicyRule, err error) bool

// visit walks the bindings that apply to u for a request in namespace ("":
// cluster scope) as kube's rule resolver does: ClusterRoleBindings, then the
// RoleBindings of namespace, each in name order. It reports whether the walk
// went to the end.
func (ix *rbacIndex) visit(u user.Info, namespace string, fn visitor) bool {
	if !ix.visitBindings(u, ix.clusterRoleBindings, "", fn) {
		return false
	}
	return namespace == "" || ix.visitBindings(u, ix.roleBindings[namespace], namespace, fn)
}

func (ix *rbacIndex) visitBindings(u user.Info, bs []*binding, namespace string, fn visitor) bool {
	for _, b := range bs {
		i := appliesTo(u, b.subjects, namespace)
		if i < 0 {
			continue
		}
		rules, err := ix.roleRefRules(b.roleRef, namespace)
		if !fn(source{b, &b.subjects[i]}, rules, err) {
			return false
		}
	}
	return true
}

// roleRefRules resolves a binding's roleRef; namespace is the binding's
// ("" for a ClusterRoleBinding). Errors read as kube's.
func (ix *rbacIndex) roleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		rules, ok := ix.roles[nsName{namespace, ref.Name}]
		if !ok {
			return nil, apierrors.NewNotFound(rbacv1.Resource("role"), ref.Name)
		}
		return rules, nil
	case "ClusterRole":
		cr, ok := ix.clusterRoles[ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), ref.Name)
		}
		return cr.effective, nil
	default:
		return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
	}
}

// appliesTo returns the index of the first subject that is u, or -1. A
// ServiceAccount subject without a namespace means one in the binding's
// namespace.
func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) int {
	return slices.IndexFunc(subjects, func(s rbacv1.Subject) bool {
		switch s.Kind {
		case rbacv1.UserKind:
			return u.GetName() == s.Name
		case rbacv1.GroupKind:
			return slices.Contains(u.GetGroups(), s.Name)
		case rbacv1.ServiceAccountKind:
			ns := namespace
			if s.Namespace != "" {
				ns = s.Namespace
			}
			return ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName())
		default:
			return false
		}
	})
}

// source is the binding (and its subject) a rule came from, described as in
// kube's "RBAC: allowed by ..." reasons.
type source struct {
	b       *binding
	subject *rbacv1.Subject
}

func (s source) String() string {
	ref := s.b.roleRef
	if s.b.namespace == "" {
		return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", s.b.name, ref.Kind, ref.Name, describeSubject(s.subject, ""))
	}
	return fmt.Sprintf("RoleBinding %q of %s %q to %s", s.b.name+"/"+s.b.namespace, ref.Kind, ref.Name, describeSubject(s.subject, s.b.namespace))
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind != rbacv1.ServiceAccountKind {
		return fmt.Sprintf("%s %q", s.Kind, s.Name)
	}
	ns := s.Namespace
	if ns == "" {
		ns = bindingNamespace
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
}

// ruleChecker looks for a rule that allows attrs.
type ruleChecker struct {
	attrs   authorizer.Attributes
	allowed bool
	reason  string
	errs    []error
}

func (c *ruleChecker) visit(src source, rules []rbacv1.PolicyRule, err error) bool {
	if err != nil {
		c.errs = append(c.errs, err)
		return true
	}
	for i := range rules {
		if ruleAllows(c.attrs, &rules[i]) {
			c.allowed, c.reason = true, "RBAC: allowed by "+src.String()
			return false
		}
	}
	return true
}

// denyReason is kube's reason for a request no rule allows: empty, or the
// errors met resolving roles.
func (c *ruleChecker) denyReason() string {
	if len(c.errs) == 0 {
		return ""
	}
	return "RBAC: " + utilerrors.NewAggregate(c.errs).Error()
}

// ruleCollector gathers rules for a SelfSubjectRulesReview.
type ruleCollector struct {
	resource    []authorizationv1.ResourceRule
	nonResource []authorizationv1.NonResourceRule
	incomplete  bool
}

func (c *ruleCollector) visit(_ source, rules []rbacv1.PolicyRule, err error) bool {
	if err != nil {
		c.incomplete = true
	}
	c.add(rules)
	return true
}

// add converts rules as kube's RBAC authorizer does: a rule may yield both
// a resource rule and a non-resource rule.
func (c *ruleCollector) add(rules []rbacv1.PolicyRule) {
	for _, r := range rules {
		if len(r.Resources) > 0 {
			c.resource = append(c.resource, authorizationv1.ResourceRule{
				Verbs:         slices.Clone(r.Verbs),
				APIGroups:     slices.Clone(r.APIGroups),
				Resources:     slices.Clone(r.Resources),
				ResourceNames: slices.Clone(r.ResourceNames),
			})
		}
		if len(r.NonResourceURLs) > 0 {
			c.nonResource = append(c.nonResource, authorizationv1.NonResourceRule{
				Verbs:           slices.Clone(r.Verbs),
				NonResourceURLs: slices.Clone(r.NonResourceURLs),
			})
		}
	}
}

// ruleAllows reports whether rule allows the request attrs describes, with
// kube's matching: "*" matches any verb, group, resource and URL; a resource
// is "resource" or "resource/subresource", and "*/subresource" matches that
// subresource of any resource; resourceNames, when set, must contain the
// request's name; a non-resource URL ending in "*" matches by prefix.
func ruleAllows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matches(rule.Verbs, rbacv1.VerbAll, attrs.GetVerb()) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return slices.ContainsFunc(rule.NonResourceURLs, func(u string) bool {
			return u == rbacv1.NonResourceAll || u == attrs.GetPath() ||
				strings.HasSuffix(u, "*") && strings.HasPrefix(attrs.GetPath(), strings.TrimRight(u, "*"))
		})
	}
	resource, sub := attrs.GetResource(), attrs.GetSubresource()
	if sub != "" {
		resource += "/" + sub
	}
	return matches(rule.APIGroups, rbacv1.APIGroupAll, attrs.GetAPIGroup()) &&
		slices.ContainsFunc(rule.Resources, func(r string) bool {
			return r == rbacv1.ResourceAll || r == resource || sub != "" && r == "*/"+sub
		}) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, attrs.GetName()))
}

// matches reports whether set contains want or the wildcard all.
func matches(set []string, all, want string) bool {
	return slices.ContainsFunc(set, func(s string) bool { return s == all || s == want })
}
