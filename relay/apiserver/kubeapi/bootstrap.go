package kubeapi

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The user-facing ClusterRoles every space starts with, shaped like
// Kubernetes' defaults: cluster-admin, and admin, edit and view aggregated
// (through the rbac.authorization.k8s.io/aggregate-to-* labels) from
// system:aggregate-to-* roles, so users can extend them the same way.
var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "delete", "deletecollection", "patch", "update"}

	// workloadRules are the namespaced resources users manage.
	workloadRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "services", "services/status", "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "replicationcontrollers", "replicationcontrollers/scale", "replicationcontrollers/status", "serviceaccounts", "events", "limitranges", "resourcequotas", "resourcequotas/status", "podtemplates"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status", "daemonsets", "daemonsets/status", "controllerrevisions"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "jobs/status", "cronjobs", "cronjobs/status"}},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers", "horizontalpodautoscalers/status"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets", "poddisruptionbudgets/status"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingresses/status", "networkpolicies"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}},
	}
)

func withVerbs(rules []rbacv1.PolicyRule, verbs []string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		r.Verbs = verbs
		out[i] = r
	}
	return out
}

func clusterRole(name string, labels map[string]string, rules []rbacv1.PolicyRule, aggregateFrom string) *rbacv1.ClusterRole {
	cr := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Rules:      rules,
	}
	if aggregateFrom != "" {
		cr.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + aggregateFrom: "true"}},
		}}
	}
	return cr
}

// defaultClusterRoles returns the roles a new space starts with.
func defaultClusterRoles() []*rbacv1.ClusterRole {
	boot := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	agg := func(to ...string) map[string]string {
		l := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
		for _, t := range to {
			l["rbac.authorization.k8s.io/aggregate-to-"+t] = "true"
		}
		return l
	}
	secretsRead := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: readVerbs}
	secretsWrite := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: writeVerbs}
	nsRead := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status"}, Verbs: readVerbs}
	tokens := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}
	impersonateSA := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}}
	rbacManage := rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: append(append([]string{}, readVerbs...), writeVerbs...)}
	localReview := rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"localsubjectaccessreviews"}, Verbs: []string{"create"}}

	view := append(withVerbs(workloadRules, readVerbs), nsRead)
	edit := append(withVerbs(workloadRules, writeVerbs), secretsRead, secretsWrite, tokens, impersonateSA)
	admin := []rbacv1.PolicyRule{rbacManage, localReview}
	return []*rbacv1.ClusterRole{
		clusterRole("cluster-admin", boot, []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
		}, ""),
		clusterRole("admin", boot, nil, "admin"),
		clusterRole("edit", agg("admin"), nil, "edit"),
		clusterRole("view", agg("edit"), nil, "view"),
		clusterRole("system:aggregate-to-admin", agg("admin"), admin, ""),
		clusterRole("system:aggregate-to-edit", agg("edit"), edit, ""),
		clusterRole("system:aggregate-to-view", agg("view"), view, ""),
	}
}
