package kubeapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// View is what one view serves (Config.Views): one resource, read only.
type View struct {
	// Resource is what it serves. Its definition (kind, scope, schema,
	// printer columns) is the one the view's workload description space
	// serves for it (a built-in, or a CRD of that space); a resource that
	// space does not serve is served as 404 on every path of the view.
	Resource schema.GroupVersionResource
	// Objects holds every object of the view under Resource's store key
	// (store.Resource{Group, Resource}), names unique across destinations.
	Objects store.Space
	// Partition returns an object's partition value (nil: the view has
	// no partition key, and .../partitions/<value>/ is 404). It is called
	// for every object a read of a partition meets, so it must be cheap and
	// must not call a store (store.View).
	Partition func(*store.Object) string
}

// viewsGR is the resource of views, against which requests to a view are
// authorized (viewAttributes).
var viewsGR = schema.GroupResource{Group: v1alpha1.GroupName, Resource: "views"}

// viewsPartitions is the subresource that stands for one partition of a
// view in authorization.
const viewsPartitions = "partitions"

// viewPath is what the path of a request to a view names:
// /views/<name>/ or /views/<name>/partitions/<value>/, then rest.
type viewPath struct {
	name        string
	partitioned bool
	value       string
	// rest is the path below the view's prefix, as a space's ("/api", ...).
	rest string
	// prefix is the view's path below the space's ("/views/<name>...").
	prefix string
}

// parseViewPath parses rest, a path below a space's prefix, when it is
// one of a view. It works on the escaped path (escapedRest) so that a
// value cannot be split by an encoded slash.
func parseViewPath(escapedRest string) (viewPath, bool) {
	p, ok := strings.CutPrefix(escapedRest, "/views/")
	if !ok {
		return viewPath{}, false
	}
	segs := strings.SplitN(p, "/", 4)
	var vp viewPath
	var err error
	if vp.name, err = url.PathUnescape(segs[0]); err != nil || vp.name == "" {
		return viewPath{}, false
	}
	used := 1
	if len(segs) >= 2 && segs[1] == viewsPartitions {
		if len(segs) < 3 || segs[2] == "" {
			return viewPath{}, false
		}
		if vp.value, err = url.PathUnescape(segs[2]); err != nil {
			return viewPath{}, false
		}
		vp.partitioned, used = true, 3
	}
	escaped := "/" + strings.Join(segs[used:], "/")
	if vp.rest, err = url.PathUnescape(escaped); err != nil {
		return viewPath{}, false
	}
	vp.prefix = "/views/" + strings.Join(segs[:used], "/")
	return vp, true
}

// viewRequest is the view a request is served from.
type viewRequest struct {
	// sv is the view's resource as the space serves it, read only.
	sv *served
	// sp is View.Objects, or the partition's part of it.
	sp store.Space
}

// serveView answers a request to a view of rq's space (Config.Views):
// discovery, OpenAPI and version as the space's but listing the view's
// one resource, and get, list and watch of it from View.Objects, or for a
// partition of the objects whose partition value is the requested one.
// Every write is refused with 405.
//
// Authorization is in the space's RBAC, never against the resource
// itself: a request is a read of resource views of group edge.canopy.dev
// named after the view, with verb get, list or watch as the request is
// one (get for discovery, OpenAPI and version, and for writes, which are
// then refused). A request to partition <value> is also allowed as a read
// of views/partitions named <view>/<value> (a view's name is a DNS
// subdomain and a label value has no "/", so the name is unambiguous).
// Rights on the whole view cover every partition; rights on a partition
// cover it alone, whether or not it holds objects. The view is looked up
// only once the request is allowed, so that a user learns nothing of the
// views or partitions they may not read.
func (s *Server) serveView(rq *request, vp viewPath) {
	if vp.partitioned {
		if errs := validation.IsValidLabelValue(vp.value); len(errs) > 0 {
			rq.writeError(apierrors.NewBadRequest(fmt.Sprintf("invalid partition value %q of view %q: %s", vp.value, vp.name, strings.Join(errs, "; "))))
			return
		}
	}
	rq.prefix += vp.prefix
	info, err := s.requestInfo(rq, vp.rest)
	if err != nil {
		rq.writeError(err)
		return
	}
	if err := s.authorizeView(rq, vp); err != nil {
		rq.writeError(err)
		return
	}
	v, err := s.cfg.Views(rq.space, vp.name)
	switch {
	case err != nil:
		rq.writeError(err)
		return
	case v == nil:
		rq.writeError(apierrors.NewNotFound(viewsGR, vp.name))
		return
	case vp.partitioned && v.Partition == nil:
		rq.writeError(&apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("%s %q has no partitions", viewsGR, vp.name),
			Details: &metav1.StatusDetails{Name: vp.name, Group: viewsGR.Group, Kind: viewsGR.Resource},
		}})
		return
	}
	sv, ok := s.lookup(rq, v.Resource.Group, v.Resource.Version, v.Resource.Resource)
	if !ok {
		rq.writeError(errNoResource())
		return
	}
	vr := &viewRequest{sv: sv.readOnly(), sp: store.ReadOnly(v.Objects, nil)}
	if vp.partitioned {
		partition, value := v.Partition, vp.value
		vr.sp = store.View(vr.sp, func(o *store.Object) bool { return partition(o) == value })
	}
	rq.view = vr
	if !info.IsResourceRequest {
		if vp.rest == "/metrics" {
			rq.writeError(errNoResource())
			return
		}
		s.serveNonResource(rq, vp.rest)
		return
	}
	// The handlers of the space's resources serve the view's, which has
	// no subresources; only reads get that far.
	switch info.Verb {
	case "get", "list", "watch":
	default:
		if sv, ok := s.lookup(rq, info.APIGroup, info.APIVersion, info.Resource); ok {
			rq.writeError(apierrors.NewMethodNotSupported(sv.gr(), info.Verb))
			return
		}
	}
	rq.sp, rq.data = vr.sp, vr.sp.Name()
	s.serveResource(rq)
}

// authorizeView allows a request to a view (serveView) or answers why not.
func (s *Server) authorizeView(rq *request, vp viewPath) error {
	verb := "get"
	if rq.info.IsResourceRequest {
		switch rq.info.Verb {
		case "list", "watch":
			verb = rq.info.Verb
		}
	}
	attrs := authorizer.AttributesRecord{
		User: rq.user, Verb: verb, APIGroup: viewsGR.Group, APIVersion: v1alpha1.Version,
		Resource: viewsGR.Resource, Name: vp.name, ResourceRequest: true, Path: rq.r.URL.Path,
	}
	dec, reason, err := s.cfg.Authorizer.Authorize(rq.r.Context(), rq.space, attrs)
	if dec != authorizer.DecisionAllow && vp.partitioned {
		attrs.Subresource, attrs.Name = viewsPartitions, vp.name+"/"+vp.value
		dec, reason, err = s.cfg.Authorizer.Authorize(rq.r.Context(), rq.space, attrs)
	}
	if dec == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		s.log.Warn("authorization error", "space", rq.space, "error", err)
	}
	return auth.NewForbidden(rq.user, attrs, reason)
}

// readOnly is sv as a view serves it: get, list and watch, no
// subresources.
func (sv *served) readOnly() *served {
	c := *sv
	c.verbs = []string{"get", "list", "watch"}
	c.status, c.scale, c.viewed = false, nil, true
	return &c
}

// hasOpenAPI reports whether the OpenAPI v3 document of group-version
// path name ("api/v1", "apis/<group>/<version>") is served to v's
// requests: the one of its resource; every one when v is nil (not a
// view).
func (v *viewRequest) hasOpenAPI(name string) bool {
	if v == nil {
		return true
	}
	if v.sv.group == "" {
		return name == "api/"+v.sv.version
	}
	return name == "apis/"+v.sv.group+"/"+v.sv.version
}
