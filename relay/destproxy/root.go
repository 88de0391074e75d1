package destproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/transport/proxy"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Prefix is where the root serves destinations' APIs.
const Prefix = "/destinations/"

// Subresource is the subresource of a SyncTarget that RBAC grants to reach
// its destination (resource names select destinations).
const Subresource = "proxy"

// syncTargets is the resource whose proxy subresource is authorized.
var syncTargets = schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}

// RootConfig configures a Root.
type RootConfig struct {
	// Authenticate finds who sent a request (the root API's authenticator
	// in the inventory space); Impersonate applies impersonation headers
	// (Impersonate-User...) as the root's API does, and Authorize decides
	// in the inventory space.
	Authenticate func(r *http.Request) (user.Info, error)
	Impersonate  func(ctx context.Context, requester user.Info, h http.Header) (user.Info, error)
	Authorize    func(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error)
	// Opener opens proxy streams toward destinations (the root's
	// session.Downlink).
	Opener proxy.Opener
	// Replica, when set (a replica of a root), returns the API URL of
	// the replica named ("" if it is not known alive). A request whose
	// stream the Opener refuses naming the replica that holds the link
	// (proxy.Error.Replica) is passed to that replica as the same user:
	// with PeerToken (the admin token, shared by the replicas) and
	// impersonation headers, over Peer.
	Replica   func(name string) string
	Peer      http.RoundTripper
	PeerToken string
	// MaxBodyBytes bounds request bodies (default 3 MiB, the root API's).
	MaxBodyBytes int64
	// Audit receives one JSON line per request (nil: none).
	Audit  io.Writer
	Logger *slog.Logger
}

// Root serves Prefix. It is an http.Handler and a prometheus.Collector
// (canopy_destination_requests_total), safe for concurrent use.
type Root struct {
	cfg      RootConfig
	auditMu  sync.Mutex
	requests *prometheus.CounterVec
}

// NewRoot returns a Root for cfg.
func NewRoot(cfg RootConfig) *Root {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 3 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Root{cfg: cfg, requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "canopy_destination_requests_total",
		Help: "Requests to destinations' kube APIs (/destinations/<name>/...) answered, by HTTP status (101: upgraded to a stream).",
	}, []string{"code"})}
}

// Describe implements prometheus.Collector.
func (h *Root) Describe(ch chan<- *prometheus.Desc) { h.requests.Describe(ch) }

// Collect implements prometheus.Collector.
func (h *Root) Collect(ch chan<- prometheus.Metric) { h.requests.Collect(ch) }

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	Time        time.Time `json:"time"`
	ID          string    `json:"id"`
	User        string    `json:"user"`
	Groups      []string  `json:"groups,omitempty"`
	SourceIP    string    `json:"sourceIP,omitempty"`
	Destination string    `json:"destination"`
	Verb        string    `json:"verb"`
	Path        string    `json:"path"`
	Query       string    `json:"query,omitempty"`
	Status      int       `json:"status"`
	// DurationMS is how long the request lasted, until its stream ended
	// for watches, logs and upgraded connections.
	DurationMS float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"`
}

// kubePaths are the paths of a kube API that the root passes on.
var kubePaths = []string{"/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz"}

func isKubePath(p string) bool {
	for _, k := range kubePaths {
		if p == k || strings.HasPrefix(p, k+"/") {
			return true
		}
	}
	return false
}

// verbs maps an HTTP method to the verb authorized on synctargets/proxy,
// as kube does for proxy subresources.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodOptions: "get",
	http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// ServeHTTP implements http.Handler.
func (h *Root) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &AuditRecord{Time: start.UTC(), ID: uuid.NewString(), Verb: r.Method, SourceIP: sourceIP(r)}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if rec.Status == 0 {
			rec.Status = sw.code
		}
		h.requests.WithLabelValues(strconv.Itoa(rec.Status)).Inc()
		if rec.User == "" {
			return // unauthenticated: not a request to a destination
		}
		rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		h.audit(rec)
	}()
	fail := func(err *apierrors.StatusError) {
		rec.Status, rec.Error = int(err.ErrStatus.Code), err.ErrStatus.Message
		writeStatus(sw, err)
	}

	u, err := h.cfg.Authenticate(r)
	if err != nil {
		fail(apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	requester := u
	if u, err = h.cfg.Impersonate(r.Context(), requester, r.Header); err != nil {
		rec.User = requester.GetName()
		fail(forbidden(err))
		return
	}
	rec.User, rec.Groups = u.GetName(), u.GetGroups()

	dest, rest, rawRest := split(r)
	rec.Destination, rec.Path, rec.Query = dest, rest, r.URL.RawQuery
	if errs := validation.IsDNS1123Subdomain(dest); len(errs) > 0 {
		fail(apierrors.NewNotFound(syncTargets, dest))
		return
	}
	verb, ok := verbs[r.Method]
	if !ok {
		fail(apierrors.NewMethodNotSupported(syncTargets, r.Method))
		return
	}
	attrs := authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: syncTargets.Group, APIVersion: v1alpha1.Version,
		Resource: syncTargets.Resource, Subresource: Subresource, Name: dest, ResourceRequest: true}
	if dec, reason, _ := h.cfg.Authorize(r.Context(), attrs); dec != authorizer.DecisionAllow {
		fail(auth.NewForbidden(u, attrs, reason))
		return
	}
	if !isKubePath(rest) {
		fail(&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("%q is not a path of a kube API (%s...)", rest, strings.Join(kubePaths, ", "))}})
		return
	}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		fail(tooLarge(h.cfg.MaxBodyBytes))
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(sw, r.Body, h.cfg.MaxBodyBytes)
	}

	// The stream is opened first: a refusal on the way is answered as
	// it is, or passed to the replica it names.
	req := proxy.Request{Destination: dest, ID: rec.ID, User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extraOf(u)}
	conn, err := proxy.Dial(r.Context(), h.cfg.Opener, req)
	if err != nil {
		var pe *proxy.Error
		if errors.As(err, &pe) && pe.Replica != "" && h.cfg.Replica != nil && r.Header.Get(ForwardedHeader) == "" {
			if base := h.cfg.Replica(pe.Replica); base != "" {
				h.forward(sw, r, base, u, rec)
				return
			}
		}
		fail(statusFor(dest, err))
		return
	}
	var first sync.Once
	h.reverseProxy(rec, &http.Transport{
		// One stream per request: a stream carries one user.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (c net.Conn, err error) {
			first.Do(func() { c = conn })
			if c == nil { // the transport retries on a new connection
				return proxy.Dial(ctx, h.cfg.Opener, req)
			}
			return c, nil
		},
	}, func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", dest
		pr.Out.URL.Path, pr.Out.URL.RawPath = rest, rawRest
		pr.Out.Host = dest
		stripCredentials(pr.Out.Header)
	}).ServeHTTP(sw, r)
}

// reverseProxy passes a request on over transport, as rewrite says,
// streaming the answer back, and records its status in rec.
func (h *Root) reverseProxy(rec *AuditRecord, transport http.RoundTripper, rewrite func(*httputil.ProxyRequest)) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       rewrite,
		Transport:     transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			rec.Status = resp.StatusCode
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			se := statusFor(rec.Destination, err)
			rec.Status, rec.Error = int(se.ErrStatus.Code), se.ErrStatus.Message
			writeStatus(w, se)
		},
	}
}

// ForwardedHeader marks a request one replica of a root passed to another
// (RootConfig.Elsewhere), which does not pass it on again.
const ForwardedHeader = "X-Canopy-Forwarded-By"

// forward passes r to the replica at base as user u.
func (h *Root) forward(w http.ResponseWriter, r *http.Request, base string, u user.Info, rec *AuditRecord) {
	target, err := url.Parse(base)
	if err != nil {
		se := badGateway(fmt.Sprintf("the replica holding the link to %s: %v", rec.Destination, err))
		rec.Status, rec.Error = int(se.ErrStatus.Code), se.ErrStatus.Message
		writeStatus(w, se)
		return
	}
	h.reverseProxy(rec, h.cfg.Peer, func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = target.Host
		stripCredentials(pr.Out.Header)
		pr.Out.Header.Set("Authorization", "Bearer "+h.cfg.PeerToken)
		impersonate(pr.Out.Header, "", u.GetName(), u.GetUID(), u.GetGroups(), extraOf(u), nil)
		pr.Out.Header.Set(ForwardedHeader, "1")
	}).ServeHTTP(w, r)
}

// extraOf is u's extra information to pass on: without the ID of the
// credential the root authenticated, which nothing below has a use for
// and whose impersonation would need a grant of its own.
func extraOf(u user.Info) map[string][]string {
	extra := maps.Clone(u.GetExtra())
	delete(extra, user.CredentialIDKey)
	return extra
}

// impersonate sets the headers that make a kube API see a request as the
// user name in groups (the authenticated groups left to it), each with
// prefix, in the groups more as they are.
func impersonate(h http.Header, prefix, name, uid string, groups []string, extra map[string][]string, more []string) {
	h.Set("Impersonate-User", prefix+name)
	if uid != "" {
		h.Set("Impersonate-Uid", uid)
	}
	for _, g := range groups {
		if g == user.AllAuthenticated || g == user.AllUnauthenticated {
			continue // the API adds its own
		}
		h.Add("Impersonate-Group", prefix+g)
	}
	for _, g := range more {
		h.Add("Impersonate-Group", g)
	}
	for k, vs := range extra {
		for _, v := range vs {
			h.Add("Impersonate-Extra-"+url.PathEscape(k), v)
		}
	}
}

// split parses /destinations/NAME/REST into NAME, REST and REST escaped.
func split(r *http.Request) (dest, rest, rawRest string) {
	p := strings.TrimPrefix(r.URL.Path, Prefix)
	dest, rest, _ = strings.Cut(p, "/")
	rest = "/" + rest
	raw := strings.TrimPrefix(r.URL.EscapedPath(), Prefix)
	if _, rr, ok := strings.Cut(raw, "/"); ok && "/"+rr != rest {
		rawRest = "/" + rr
	}
	return dest, rest, rawRest
}

// AsUser makes a request's headers carry u, impersonated, instead of the
// credentials and impersonation it came with, for a kube API that trusts
// the proxy's own credentials to impersonate (a backed space's backend).
func AsUser(h http.Header, u user.Info) {
	stripCredentials(h)
	impersonate(h, "", u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra(), nil)
}

// stripCredentials removes what authenticates or impersonates: the root's
// user's token must not travel below the root.
func stripCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del("Proxy-Authorization")
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Impersonate-") {
			delete(h, k)
		}
	}
}

// statusFor turns a failure to reach a destination into a kube Status.
func statusFor(dest string, err error) *apierrors.StatusError {
	var pe *proxy.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &pe):
		switch pe.Code {
		case proxy.NotFound:
			se := apierrors.NewNotFound(syncTargets, dest)
			se.ErrStatus.Message = pe.Message
			return se
		case proxy.Unavailable:
			return apierrors.NewServiceUnavailable(pe.Message)
		case proxy.TooManyStreams:
			return apierrors.NewTooManyRequests(pe.Message, 1)
		}
		return badGateway(pe.Message)
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.Is(err, context.Canceled):
		return badGateway("the client went away")
	}
	return badGateway(fmt.Sprintf("destination %s: %v", dest, err))
}

func badGateway(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadGateway,
		Reason: metav1.StatusReasonServiceUnavailable, Message: msg}}
}

func tooLarge(limit int64) *apierrors.StatusError {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", limit))
}

func forbidden(err error) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	return apierrors.NewForbidden(schema.GroupResource{Resource: "users"}, "", err)
}

func writeStatus(w http.ResponseWriter, se *apierrors.StatusError) {
	st := se.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	b, _ := json.Marshal(&st)
	w.Header().Set("Content-Type", "application/json")
	if st.Code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(b, '\n'))
}

func (h *Root) audit(rec *AuditRecord) {
	if h.cfg.Audit == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	h.auditMu.Lock()
	defer h.auditMu.Unlock()
	if _, err := h.cfg.Audit.Write(append(b, '\n')); err != nil {
		h.cfg.Logger.Warn("writing the proxy audit log", "error", err)
	}
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// statusWriter records the status code written through it; Unwrap lets
// http.ResponseController reach Flush and Hijack.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
