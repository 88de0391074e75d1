package auth

import (
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

func TestForbiddenMessage(t *testing.T) {
	robot := &user.DefaultInfo{Name: "system:serviceaccount:default:robot"}
	bob := &user.DefaultInfo{Name: "bob"}
	tests := []struct {
		name   string
		u      user.Info
		attrs  *authorizer.AttributesRecord
		reason string
		want   string
	}{
		{"namespaced list", robot, resourceAttrs(nil, "list", "", "pods", "default", ""), "",
			`pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"cluster scope", bob, resourceAttrs(nil, "list", "", "nodes", "", ""), "",
			`nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{"named", bob, resourceAttrs(nil, "get", "", "pods", "default", "x"), "",
			`pods "x" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "default"`},
		{"group and subresource", bob, resourceAttrs(nil, "update", "apps", "deployments/scale", "shop", "web"), "",
			`deployments.apps "web" is forbidden: User "bob" cannot update resource "deployments/scale" in API group "apps" in the namespace "shop"`},
		{"named cluster-scoped", bob, resourceAttrs(nil, "delete", "rbac.authorization.k8s.io", "clusterroles", "", "admin"), "",
			`clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "bob" cannot delete resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{"impersonation", bob, resourceAttrs(nil, "impersonate", "", "users", "", "alice"), "",
			`users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"non-resource", bob, pathAttrs(nil, "get", "/metrics"), "",
			`forbidden: User "bob" cannot get path "/metrics"`},
		{"with reason", bob, resourceAttrs(nil, "list", "", "pods", "dev", ""), `RBAC: role.rbac.authorization.k8s.io "ghost" not found`,
			`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "dev": RBAC: role.rbac.authorization.k8s.io "ghost" not found`},
		{"escaped", bob, pathAttrs(nil, "get", "/a<b>&c"), "",
			`forbidden: User "bob" cannot get path "/a&lt;b&gt;&amp;c"`},
		{"no user", nil, pathAttrs(nil, "get", "/metrics"), "",
			`forbidden: User "" cannot get path "/metrics"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ForbiddenMessage(tt.u, tt.attrs, tt.reason); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			// Same status as kube-apiserver's own.
			tt.attrs.User = tt.u
			kube := responsewriters.ForbiddenStatusError(tt.attrs, tt.reason)
			ours := NewForbidden(tt.u, tt.attrs, tt.reason)
			if !equalJSON(ours.ErrStatus, kube.ErrStatus) {
				t.Errorf("status\n%+v\nkube's\n%+v", ours.ErrStatus, kube.ErrStatus)
			}
			if !apierrors.IsForbidden(ours) || ours.Status().Code != http.StatusForbidden {
				t.Errorf("not a 403 Forbidden: %+v", ours.ErrStatus)
			}
		})
	}
}
