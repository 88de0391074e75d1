package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
)

// Connector answers the connect subresources, which kube-apiserver hands
// on to the kubelet of a pod's node (pods/log, exec, attach, portforward)
// or to the pod or service itself (pods/proxy, services/proxy).
// Config.Connect is one; without it these subresources are not served.
type Connector interface {
	// Connect returns the handler that answers req's HTTP request (for
	// exec, attach and portforward an upgrade to SPDY or WebSocket,
	// whose ResponseWriter is an http.Hijacker), or an error that the
	// server answers as a kube Status (a *StatusError as it is, any
	// other error as a 500). It is called from many goroutines at once.
	Connect(ctx context.Context, req *ConnectRequest) (http.Handler, error)
}

// ConnectRequest is a request to a connect subresource that the server
// has authenticated, authorized and checked as kube-apiserver does before
// it calls a kubelet: the object exists, the container is one of the
// pod's (defaulted when the pod has one), and the pod has a node for
// exec, attach and portforward.
type ConnectRequest struct {
	// Space is the space the request was sent to.
	Space string
	// User is who sent it (after impersonation).
	User user.Info
	// Subresource is "log", "exec", "attach", "portforward" or "proxy".
	Subresource string
	// Pod is the pod addressed, nil for services/proxy.
	Pod *corev1.Pod
	// Service is the service addressed by services/proxy, else nil.
	Service *corev1.Service
	// Options are the request's options: *corev1.PodLogOptions,
	// *corev1.PodExecOptions, *corev1.PodAttachOptions,
	// *corev1.PodPortForwardOptions, *corev1.PodProxyOptions or
	// *corev1.ServiceProxyOptions (Path: what follows /proxy in the URL).
	Options runtime.Object
	// Scheme and Port are those of a proxy request's target (the URL
	// names it NAME, NAME:PORT or SCHEME:NAME:PORT); empty when not given.
	Scheme, Port string
}

// connectMethods are the HTTP methods each connect subresource takes, as
// kube-apiserver's registry declares them.
var connectMethods = map[string][]string{
	"log":         {http.MethodGet},
	"exec":        {http.MethodGet, http.MethodPost},
	"attach":      {http.MethodGet, http.MethodPost},
	"portforward": {http.MethodGet, http.MethodPost},
	"proxy":       {http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions},
}

// connectSubresources lists the connect subresources of a resource, in
// discovery's order.
func connectSubresources(gr schema.GroupResource) []string {
	switch gr {
	case schema.GroupResource{Resource: "pods"}:
		return []string{"attach", "exec", "log", "portforward", "proxy"}
	case schema.GroupResource{Resource: "services"}:
		return []string{"proxy"}
	}
	return nil
}

// isConnect reports whether sub is a connect subresource of sv that this
// server serves (Config.Connect is set).
func (s *Server) isConnect(sv *served, sub string) bool {
	return s.cfg.Connect != nil && sv.crd == nil && slices.Contains(connectSubresources(sv.gr()), sub)
}

// serveConnect answers a connect subresource: the checks kube-apiserver
// makes, then Config.Connect.
func (s *Server) serveConnect(rq *request, sv *served) {
	info := rq.info
	rq.metricVerb = "CONNECT"
	if info.Name == "" || info.Namespace == "" {
		rq.writeError(errNoResource())
		return
	}
	if !slices.Contains(connectMethods[info.Subresource], rq.r.Method) {
		rq.writeError(apierrors.NewMethodNotSupported(schema.GroupResource{Resource: sv.resource + "/" + info.Subresource}, strings.ToLower(rq.r.Method)))
		return
	}
	// A WebSocket upgrade is a GET, authorized as "get"; since kube 1.35
	// (AuthorizePodWebsocketUpgradeCreatePermission) it must also be
	// allowed to "create", as the POST of SPDY is.
	if rq.r.Method == http.MethodGet && info.Subresource != "log" && info.Subresource != "proxy" {
		attrs := attributesFor(rq.user, info)
		attrs.Verb = "create"
		if dec, reason, _ := s.cfg.Authorizer.Authorize(rq.r.Context(), rq.space, attrs); dec != authorizer.DecisionAllow {
			rq.writeError(auth.NewForbidden(rq.user, attrs, reason))
			return
		}
	}
	req := &ConnectRequest{Space: rq.space, User: rq.user, Subresource: info.Subresource}
	name := info.Name
	if info.Subresource == "proxy" {
		var ok bool
		if req.Scheme, name, req.Port, ok = utilnet.SplitSchemeNamePort(info.Name); !ok {
			rq.writeError(apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", sv.singular, info.Name)))
			return
		}
	}
	obj, err := rq.sp.Get(rq.key(sv, name))
	if err != nil {
		rq.writeError(storeError(err, sv.gr(), name))
		return
	}
	if sv.resource == "services" {
		req.Service = &corev1.Service{}
		err = json.Unmarshal(obj.Data, req.Service)
	} else {
		req.Pod = &corev1.Pod{}
		err = json.Unmarshal(obj.Data, req.Pod)
	}
	if err != nil {
		rq.writeError(err)
		return
	}
	if req.Options, err = connectOptions(rq, sv, name); err != nil {
		rq.writeError(err)
		return
	}
	if req.Pod != nil && info.Subresource != "proxy" {
		if err := checkPodConnect(req); err != nil {
			rq.writeError(err)
			return
		}
		if req.Pod.Spec.NodeName == "" && info.Subresource == "log" {
			// kube-apiserver has no kubelet to ask: an empty log.
			rq.w.Header().Set("Content-Type", "text/plain")
			rq.w.WriteHeader(http.StatusOK)
			return
		}
	}
	h, err := s.cfg.Connect.Connect(rq.r.Context(), req)
	if err != nil {
		rq.writeError(err)
		return
	}
	h.ServeHTTP(rq.w, rq.r)
}

// connectOptions decodes a connect request's options from its query (and,
// for proxy, its path), as kube-apiserver does.
func connectOptions(rq *request, sv *served, name string) (runtime.Object, error) {
	var opts runtime.Object
	switch rq.info.Subresource {
	case "log":
		opts = &corev1.PodLogOptions{}
	case "exec":
		opts = &corev1.PodExecOptions{}
	case "attach":
		opts = &corev1.PodAttachOptions{}
	case "portforward":
		opts = &corev1.PodPortForwardOptions{}
	case "proxy":
		// What follows .../NAME/proxy in the URL, trailing slash kept.
		marker := "/" + sv.resource + "/" + rq.info.Name + "/proxy"
		_, path, _ := strings.Cut(rq.r.URL.Path, marker)
		if sv.resource == "services" {
			return &corev1.ServiceProxyOptions{Path: path}, nil
		}
		return &corev1.PodProxyOptions{Path: path}, nil
	}
	if err := decodeQuery(rq.r.URL.Query(), opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if lo, ok := opts.(*corev1.PodLogOptions); ok {
		if errs := validateLogOptions(lo); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
		}
	}
	return opts, nil
}

// decodeQuery sets the fields of the options struct opts points to from
// the query parameters named by their JSON names, as kube's generated
// conversions from url.Values do (client-go's scheme has none).
func decodeQuery(q url.Values, opts runtime.Object) error {
	v := reflect.ValueOf(opts).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		vals, ok := q[name]
		if !ok || name == "" || f.Anonymous || len(vals) == 0 {
			continue
		}
		fv := v.Field(i)
		switch p := fv.Addr().Interface().(type) {
		case *string:
			*p = vals[0]
		case *[]string:
			*p = vals
		case **string:
			*p = &vals[0]
		case *bool:
			b, err := strconv.ParseBool(vals[0])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p = b
		case **int64:
			n, err := strconv.ParseInt(vals[0], 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p = &n
		case *[]int32:
			for _, s := range vals {
				n, err := strconv.ParseInt(s, 10, 32)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				*p = append(*p, int32(n))
			}
		case **metav1.Time:
			tm, err := time.Parse(time.RFC3339, vals[0])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p = &metav1.Time{Time: tm}
		}
	}
	return nil
}

// validateLogOptions checks what kube's ValidatePodLogOptions checks.
func validateLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	return errs
}

// checkPodConnect defaults and checks the container of a pod's log, exec
// or attach, and that exec, attach and portforward have a node to go to,
// with kube-apiserver's messages.
func checkPodConnect(req *ConnectRequest) error {
	pod := req.Pod
	var container *string
	switch o := req.Options.(type) {
	case *corev1.PodLogOptions:
		container = &o.Container
	case *corev1.PodExecOptions:
		container = &o.Container
	case *corev1.PodAttachOptions:
		container = &o.Container
	}
	if container != nil {
		c, err := podContainer(pod, *container)
		if err != nil {
			return err
		}
		*container = c
	}
	if pod.Spec.NodeName == "" && req.Subresource != "log" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	return nil
}

// podContainer returns the container name a request means: name if the
// pod has such a container (init and ephemeral ones included), the only
// container when name is empty.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if name != "" {
		if !slices.Contains(names, name) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
		}
		return name, nil
	}
	switch len(pod.Spec.Containers) {
	case 1:
		return pod.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
}

// connectKinds are the kinds of the connect subresources' options, as
// discovery reports them.
var connectKinds = map[string]string{
	"attach": "PodAttachOptions", "exec": "PodExecOptions", "log": "Pod", "portforward": "PodPortForwardOptions",
}

// connectDiscovery lists the connect subresources of sv for discovery,
// with the kinds and verbs kube-apiserver reports.
func (s *Server) connectDiscovery(sv *served) []apidiscoveryv2.APISubresourceDiscovery {
	if s.cfg.Connect == nil || sv.crd != nil {
		return nil
	}
	var out []apidiscoveryv2.APISubresourceDiscovery
	for _, sub := range connectSubresources(sv.gr()) {
		kind, verbs := connectKinds[sub], []string{"create", "get"}
		switch sub {
		case "log":
			verbs = []string{"get"}
		case "proxy":
			kind, verbs = sv.kind+"ProxyOptions", []string{"create", "delete", "get", "patch", "update"}
		}
		out = append(out, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sub, ResponseKind: &metav1.GroupVersionKind{Version: "v1", Kind: kind}, Verbs: verbs,
		})
	}
	return out
}
