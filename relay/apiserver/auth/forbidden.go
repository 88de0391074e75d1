package auth

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// htmlEscaper escapes the request-derived part of a forbidden message, as
// kube-apiserver does.
var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// NewForbidden returns the error kube-apiserver answers when authorization
// refuses the request attrs describes, made by u: a 403 Forbidden Status
// whose details name the API group, resource and object, and whose message
// is ForbiddenMessage's. reason is the one Authorize returned.
func NewForbidden(u user.Info, attrs authorizer.Attributes, reason string) *apierrors.StatusError {
	msg := htmlEscaper.Replace(denial(u, attrs))
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: attrs.GetAPIGroup(), Resource: attrs.GetResource()}
	return apierrors.NewForbidden(gr, attrs.GetName(), errors.New(msg))
}

// ForbiddenMessage returns kube-apiserver's text for a refused request, for
// instance
//
//	pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default"
//	deployments.apps "web" is forbidden: User "bob" cannot update resource "deployments/scale" in API group "apps" in the namespace "shop"
//	nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope
//	forbidden: User "bob" cannot get path "/metrics"
//
// followed by ": " and reason when reason is not empty.
func ForbiddenMessage(u user.Info, attrs authorizer.Attributes, reason string) string {
	return NewForbidden(u, attrs, reason).ErrStatus.Message
}

// denial says who cannot do what, in kube's words.
func denial(u user.Info, attrs authorizer.Attributes) string {
	name := ""
	if u != nil {
		name = u.GetName()
	}
	if !attrs.IsResourceRequest() {
		return fmt.Sprintf("User %q cannot %s path %q", name, attrs.GetVerb(), attrs.GetPath())
	}
	resource := attrs.GetResource()
	if sub := attrs.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	if ns := attrs.GetNamespace(); ns != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, attrs.GetVerb(), resource, attrs.GetAPIGroup(), ns)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, attrs.GetVerb(), resource, attrs.GetAPIGroup())
}
