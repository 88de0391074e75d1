package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/backing"
	"github.com/canopy-dev/canopy/relay/destproxy"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// backedSpaces serves the root's /spaces/<name>/ of a backed space
// (layout.SpaceInfo.Backed) by passing each request to the space's
// backend as the root's user, impersonated: the backend's RBAC decides.
// Every replica serves them.
type backedSpaces struct {
	store        *store.Store
	authenticate func(r *http.Request, space string) (user.Info, error)
	impersonate  func(ctx context.Context, space string, requester user.Info, h http.Header) (user.Info, error)

	mu sync.Mutex
	// proxies are the handlers per space, with the Secret version each
	// was made from.
	proxies map[string]backendProxy
}

var spacesResource = schema.GroupResource{Group: layout.SpaceResource.Group, Resource: layout.SpaceResource.Resource}

type backendProxy struct {
	secretRev int64
	h         http.Handler
}

// serve serves req if it is for a backed space that is not being deleted
// (false: it is not, and the kube API serves it).
func (b *backedSpaces) serve(w http.ResponseWriter, req *http.Request) bool {
	p, ok := strings.CutPrefix(req.URL.Path, "/spaces/")
	if !ok {
		return false
	}
	space, rest, _ := strings.Cut(p, "/")
	rec, err := b.store.Get(store.Key{Resource: layout.SpaceResource, Name: space})
	if err != nil {
		return false
	}
	info := layout.ReadSpace(rec)
	if !info.Backed() || info.Deleting {
		return false
	}
	u, err := b.authenticate(req, space)
	if err != nil {
		writeStatusError(w, apierrors.NewUnauthorized("Unauthorized"))
		return true
	}
	if u, err = b.impersonate(req.Context(), space, u, req.Header); err != nil {
		writeStatusError(w, apierrors.NewForbidden(spacesResource, space, err))
		return true
	}
	h, err := b.proxy(space, info)
	if err != nil {
		writeStatusError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("space %q: %v", space, err)))
		return true
	}
	out := req.Clone(req.Context())
	out.URL.Path, out.URL.RawPath = "/"+rest, ""
	destproxy.AsUser(out.Header, u)
	h.ServeHTTP(w, out)
	return true
}

// proxy returns the handler of space, made again when its Secret changed.
func (b *backedSpaces) proxy(space string, info layout.SpaceInfo) (http.Handler, error) {
	secretRev := int64(0)
	if o, err := b.store.Get(store.Key{Space: layout.SystemSpace, Resource: store.Resource{Resource: "secrets"}, Namespace: info.Secret.Namespace, Name: info.Secret.Name}); err == nil {
		secretRev = o.Revision
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.proxies[space]; ok && p.secretRev == secretRev {
		return p.h, nil
	}
	rc, err := backing.RESTConfig(b.store, info.Secret)
	if err != nil {
		return nil, err
	}
	h, err := destproxy.ClusterHandler(rc)
	if err != nil {
		return nil, err
	}
	if b.proxies == nil {
		b.proxies = map[string]backendProxy{}
	}
	b.proxies[space] = backendProxy{secretRev: secretRev, h: h}
	return h, nil
}
