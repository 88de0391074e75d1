package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Impersonate applies the impersonation headers of a request to space made
// by requester, as kube-apiserver does:
//
//   - Impersonate-User: a user name, or a ServiceAccount as
//     system:serviceaccount:NS:NAME (which also brings its groups when no
//     Impersonate-Group is given);
//   - Impersonate-Group (repeatable), Impersonate-Uid and
//     Impersonate-Extra-KEY (repeatable; KEY lower-cased and %-unescaped),
//     each only together with Impersonate-User.
//
// requester must be allowed the verb "impersonate" on each thing asked for,
// checked in header order: users, groups (core group ""), serviceaccounts
// (core, in the ServiceAccount's namespace), uids and userextras/KEY
// (authentication.k8s.io). The impersonated user is in system:authenticated
// unless the groups asked for say otherwise (system:unauthenticated for
// system:anonymous).
//
// Without impersonation headers it returns requester. Malformed headers give
// a BadRequest *apierrors.StatusError; a refusal gives NewForbidden's 403
// error naming the first thing refused; other errors are Authorize's. The
// caller removes the headers before passing the request on.
func (a *Authorizer) Impersonate(ctx context.Context, space string, requester user.Info, h http.Header) (user.Info, error) {
	reqs, err := impersonationRequests(h)
	if err != nil || len(reqs) == 0 {
		return requester, err
	}
	groupsSpecified := len(h.Values(authenticationv1.ImpersonateGroupHeader)) > 0
	u := &user.DefaultInfo{}
	for i := range reqs {
		r := &reqs[i]
		r.User = requester
		switch r.Resource {
		case "serviceaccounts":
			u.Name = serviceaccount.MakeUsername(r.Namespace, r.Name)
			if !groupsSpecified {
				u.Groups = serviceaccount.MakeGroupNames(r.Namespace)
			}
		case "users":
			u.Name = r.Name
		case "groups":
			u.Groups = append(u.Groups, r.Name)
		case "userextras":
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[r.Subresource] = append(u.Extra[r.Subresource], r.Name)
		case "uids":
			u.UID = r.Name
		}
		decision, reason, err := a.Authorize(ctx, space, r)
		if err != nil {
			return nil, err
		}
		if decision != authorizer.DecisionAllow {
			return nil, NewForbidden(requester, r, reason)
		}
	}
	if u.Name != user.Anonymous {
		u.Groups = withAuthenticated(u.Groups)
	} else if !slices.Contains(u.Groups, user.AllUnauthenticated) {
		u.Groups = append(u.Groups, user.AllUnauthenticated)
	}
	return u, nil
}

// impersonationRequests returns one "impersonate" check per thing h asks to
// impersonate, in kube's order (user, groups, extras, uid); extras are
// sorted by header name so that the order is stable.
func impersonationRequests(h http.Header) ([]authorizer.AttributesRecord, error) {
	var reqs []authorizer.AttributesRecord
	add := func(group, version, resource, subresource, namespace, name string) {
		reqs = append(reqs, authorizer.AttributesRecord{
			Verb:            "impersonate",
			APIGroup:        group,
			APIVersion:      version,
			Resource:        resource,
			Subresource:     subresource,
			Namespace:       namespace,
			Name:            name,
			ResourceRequest: true,
		})
	}
	authn, authnVersion := authenticationv1.GroupName, authenticationv1.SchemeGroupVersion.Version

	requested := h.Get(authenticationv1.ImpersonateUserHeader)
	if requested != "" {
		if ns, name, err := serviceaccount.SplitUsername(requested); err == nil {
			add("", "", "serviceaccounts", "", ns, name)
		} else {
			add("", "", "users", "", "", requested)
		}
	}
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		add("", "", "groups", "", "", g)
	}
	var extraHeaders []string
	for k := range h {
		if strings.HasPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			extraHeaders = append(extraHeaders, k)
		}
	}
	slices.Sort(extraHeaders)
	for _, k := range extraHeaders {
		key := strings.ToLower(k[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if unescaped, err := url.PathUnescape(key); err == nil {
			key = unescaped
		}
		for _, v := range h[k] {
			add(authn, authnVersion, "userextras", key, "", v)
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		add(authn, authnVersion, "uids", "", "", uid)
	}

	if requested == "" && len(reqs) > 0 {
		asked := make([]string, len(reqs))
		for i, r := range reqs {
			what := r.Resource
			if r.Subresource != "" {
				what += "/" + r.Subresource
			}
			asked[i] = fmt.Sprintf("%s %q", what, r.Name)
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested %s without impersonating a user", strings.Join(asked, ", ")))
	}
	return reqs, nil
}
