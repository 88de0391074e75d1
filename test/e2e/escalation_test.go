package e2e

import (
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// TestRBACEscalation: a ServiceAccount allowed only to write RoleBindings
// (or ClusterRoleBindings) cannot bind itself to cluster-admin, in a
// workload description space (through a space-RBAC binding) or in the
// inventory, and so cannot read Secrets; with bind on cluster-admin, or
// holding the permissions, it can. RBAC objects for the edges (inert in
// the space) are not checked.
func TestRBACEscalation(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	for _, ctx := range []string{"default", "inventory"} {
		r.mustKubectlIn(t, `apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: team}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: crb-robot, namespace: team}
---
apiVersion: v1
kind: Secret
metadata: {name: hidden, namespace: team}
stringData: {password: swordfish}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: write-rolebindings
  namespace: team
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [get, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: robot-writes-rolebindings
  namespace: team
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: write-rolebindings}
subjects:
- {kind: ServiceAccount, name: robot, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: write-clusterrolebindings
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterrolebindings]
  verbs: [get, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: crb-robot-writes-clusterrolebindings
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: write-clusterrolebindings}
subjects:
- {kind: ServiceAccount, name: crb-robot, namespace: team}
`, "--context="+ctx, "apply", "-f", "-")
	}

	for _, c := range []struct {
		ctx, sa, kind, scope string
	}{
		{"default", "robot", "RoleBinding", "namespace: team"},
		{"inventory", "robot", "RoleBinding", "namespace: team"},
		{"default", "crb-robot", "ClusterRoleBinding", ""},
		{"inventory", "crb-robot", "ClusterRoleBinding", ""},
	} {
		token := strings.TrimSpace(r.mustKubectl(t, "--context="+c.ctx, "create", "token", c.sa, "-n", "team"))
		bare := r.bareKubeconfig(t, c.ctx)
		as := func(stdin string, args ...string) (string, error) {
			return kubecluster.RunKubectl(t, r.home(t), bare, stdin, nil, append([]string{"--token=" + token}, args...)...)
		}
		what := c.ctx + ": " + c.sa
		resource := strings.ToLower(c.kind) + "s"
		poll.Until(t, "auth can-i answered", func() error {
			_, err := as("", "auth", "can-i", "create", resource, "-n", "team")
			return err
		})
		binding := func(name, role, labels string) string {
			return `apiVersion: rbac.authorization.k8s.io/v1
kind: ` + c.kind + `
metadata:
  name: ` + name + `
  ` + c.scope + `
  labels: {` + labels + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + role + `}
subjects:
- {kind: ServiceAccount, name: ` + c.sa + `, namespace: team}
`
		}
		live := edgev1alpha1.SpaceRBACLabel + `: "true"`
		escalation := `is attempting to grant RBAC permissions not currently held`

		// Binding itself to cluster-admin: 403, nothing stored, no Secrets.
		if _, err := as(binding("mine", "cluster-admin", live), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), escalation) {
			t.Errorf("%s binds itself to cluster-admin: %v, want Forbidden (%s)", what, err, escalation)
		}
		if _, err := r.kubectl(t, "--context="+c.ctx, "get", resource, "mine", "-n", "team"); err == nil {
			t.Errorf("%s: the refused binding was stored", what)
		}
		if _, err := as("", "get", "secrets", "-n", "team"); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%s reads Secrets: %v, want forbidden", what, err)
		}
		if c.ctx == "default" {
			// A binding for the edges (inert here) is workload: allowed,
			// and grants nothing; making it live is refused.
			if _, err := as(binding("for-edges", "cluster-admin", ""), "create", "-f", "-"); err != nil {
				t.Errorf("%s writes an inert binding for the edges: %v", what, err)
			}
			if _, err := as("", "label", resource, "for-edges", "-n", "team", edgev1alpha1.SpaceRBACLabel+"=true"); err == nil || !strings.Contains(err.Error(), escalation) {
				t.Errorf("%s labels an inert binding space-rbac: %v, want Forbidden (%s)", what, err, escalation)
			}
			if _, err := as("", "get", "secrets", "-n", "team"); err == nil {
				t.Errorf("%s reads Secrets after its inert binding", what)
			}
		}
	}

	// With bind on cluster-admin, the robot may bind it.
	r.mustKubectlIn(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: bind-cluster-admin
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [bind]
  resourceNames: [cluster-admin]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: robot-binds-cluster-admin
  namespace: team
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bind-cluster-admin}
subjects:
- {kind: ServiceAccount, name: robot, namespace: team}
`, "apply", "-f", "-")
	token := strings.TrimSpace(r.mustKubectl(t, "create", "token", "robot", "-n", "team"))
	bare := r.bareKubeconfig(t, "default")
	robot := func(stdin string, args ...string) (string, error) {
		return kubecluster.RunKubectl(t, r.home(t), bare, stdin, nil, append([]string{"--token=" + token}, args...)...)
	}
	poll.Until(t, "the robot binding itself cluster-admin in team", func() error {
		_, err := robot(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: mine
  namespace: team
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: robot, namespace: team}
`, "apply", "-f", "-")
		return err
	})
	poll.Until(t, "the robot reading secrets in team", func() error {
		_, err := robot("", "get", "secrets", "-n", "team")
		return err
	})
	// Holding the permissions (cluster-admin in team, now), it may grant
	// them in team to another ServiceAccount, without bind on that role.
	if _, err := robot(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: friend-edits
  namespace: team
  labels: {`+edgev1alpha1.SpaceRBACLabel+`: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- {kind: ServiceAccount, name: friend, namespace: team}
`, "create", "-f", "-"); err != nil {
		t.Errorf("robot grants edit, which it holds in team: %v", err)
	}
}
