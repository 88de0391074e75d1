package vcluster

import (
	"context"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
)

// AdminUser is who every request to a virtual cluster is served as.
const AdminUser = "vcluster-admin"

// allowAll authenticates every request as a cluster admin and allows
// everything: a virtual cluster is reached only in-process, through its
// transport, so there is nobody to keep out.
type allowAll struct{}

var (
	_ kubeapi.Authenticator = allowAll{}
	_ kubeapi.Authorizer    = allowAll{}
)

var admin = &user.DefaultInfo{Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}

func (allowAll) Authenticate(*http.Request, string) (user.Info, error) { return admin, nil }

func (allowAll) Authorize(context.Context, string, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

func (allowAll) Impersonate(_ context.Context, _ string, u user.Info, _ http.Header) (user.Info, error) {
	return u, nil
}

func (allowAll) RulesFor(string, user.Info, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool) {
	return []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		[]authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false
}
