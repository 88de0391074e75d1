package kubeapi

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// Authenticator finds who sent a request. It returns an error wrapping
// ErrUnauthenticated-like conditions; the server answers 401 for any error.
type Authenticator interface {
	Authenticate(r *http.Request, space string) (user.Info, error)
}

// Authorizer decides what a user may do in a space, and resolves
// impersonation headers.
type Authorizer interface {
	Authorize(ctx context.Context, space string, attrs authorizer.Attributes) (authorizer.Decision, string, error)
	Impersonate(ctx context.Context, space string, requester user.Info, h http.Header) (user.Info, error)
	RulesFor(space string, u user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool)
}

// TokenIssuer signs ServiceAccount tokens for the TokenRequest subresource.
type TokenIssuer interface {
	IssueServiceAccountToken(space, namespace, name, uid string, audiences []string, ttl time.Duration) (string, time.Time, error)
}

// Config is everything a Server needs.
type Config struct {
	Store         *store.Store
	Authenticator Authenticator
	Authorizer    Authorizer
	Tokens        TokenIssuer
	Logger        *slog.Logger
	// Version is served at /version.
	Version version.Info
	// MaxBodyBytes bounds request bodies (default 3 MiB, as kube-apiserver).
	MaxBodyBytes int64
	// MinWatchTimeout is the shortest server-chosen watch duration (default
	// 30 min; each watch gets a random length between it and twice it).
	MinWatchTimeout time.Duration
	// CanCheck says whether the store's Txns may carry a store.OpCheck
	// (nil: they may): a replicated root's, once every replica reads one
	// (consensus.Node.VotersHave(store.FeatureCheck)).
	CanCheck func() bool
	// Ready reports readiness for /readyz (nil: always ready).
	Ready func() error
	// Validate, when set, checks objects of kinds the server knows only as
	// CRDs but whose content needs more than a schema (the CEL of a
	// StatusCollector) before every create and update; errors are a 422
	// with their field paths, and nothing is stored.
	Validate func(space string, gr schema.GroupResource, obj *unstructured.Unstructured) field.ErrorList
	// BeforeDelete, when set, is asked before objects are deleted through
	// the API: with the object of a delete, or with every object a
	// deletecollection selects, before any of them is deleted (dry runs
	// included). An error refuses the whole request (a *StatusError is
	// answered as it is) and nothing is deleted. Deletions by the
	// server's own controllers (namespaces, garbage collection, custom
	// resource cleanup) do not ask it. The root uses it to keep what it
	// installs and what its relay tree owns.
	BeforeDelete func(ctx context.Context, space string, gr schema.GroupResource, objs []*unstructured.Unstructured) error
	// Space, when set, gives the objects a resource request for gr in
	// space (of kind kind, by user u once impersonated) is served from: the
	// embedded store's space (Store.Space(space)) when it returns nil, a
	// space kept elsewhere, or a wrapper such as store.ReadOnly or
	// store.View. Reads, revisions and writes are the Space's; a write to
	// a Space that is not Writable is refused at once, with its error (a
	// 403 unless the error is a kube Status). An error answers the request.
	// Discovery and OpenAPI describe the space by its own name; resources
	// are looked up in the space the Space names (Space.Name), whose
	// CustomResourceDefinitions are kept in Store.
	Space func(space, kind string, gr schema.GroupResource, u user.Info) (store.Space, error)
	// ProcessMetrics adds the Go runtime and process collectors to
	// /metrics. A relay's own API sets it; servers embedded by the
	// thousand (virtual clusters) leave it off.
	ProcessMetrics bool
	// Collectors are more metrics served at /metrics (the relay's links).
	Collectors []prometheus.Collector
	// ReadIndex, when set (a replica of a cluster of roots), makes a get or
	// list without resourceVersion linearizable: it is served once the
	// store has reached the index ReadIndex returns. Nil on a single node,
	// whose store is always current.
	ReadIndex ReadIndexer
	// ProtobufCacheBytes bounds the protobuf encodings of stored objects
	// kept for clients that ask for protobuf (protobuf.go): 0 is
	// DefaultProtobufCacheBytes (64 MiB), negative keeps none.
	ProtobufCacheBytes int64
	// Connect, when set, serves the connect subresources of pods (log,
	// exec, attach, portforward, proxy) and services (proxy), which
	// kube-apiserver hands on to kubelets (connect.go); discovery lists
	// them. Without it they are unknown (404), as on a kube-apiserver
	// that does not serve them.
	Connect Connector
	// Views, when set, serves the views of workload description spaces at
	// /spaces/<space>/views/<view>/ and
	// /spaces/<space>/views/<view>/partitions/<value>/ (views.go, which
	// says how they are authorized). It returns space's view named view,
	// or nil when there is none (404).
	Views func(space, view string) (*View, error)
}

// ReadIndexer confirms with the leader of a cluster which log index a
// linearizable read must wait for (consensus.Node implements it).
type ReadIndexer interface {
	ReadIndex(ctx context.Context) (uint64, error)
}

// Server is the kube API of a root relay. It is an http.Handler and is safe
// for concurrent use.
type Server struct {
	cfg      Config
	store    *store.Store
	log      *slog.Logger
	catalog  *catalog
	metrics  *metrics
	infoFact *genericrequest.RequestInfoFactory
	// protoCache holds protobuf encodings of stored versions (protobuf.go).
	protoCache *protoCache
}

// New builds a Server from cfg.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 3 << 20
	}
	if cfg.MinWatchTimeout == 0 {
		cfg.MinWatchTimeout = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:        cfg,
		store:      cfg.Store,
		log:        cfg.Logger,
		catalog:    newCatalog(cfg.Store),
		metrics:    newMetrics(cfg.Store, cfg.ProcessMetrics, cfg.Collectors...),
		protoCache: newProtoCache(cfg.ProtobufCacheBytes),
		infoFact: &genericrequest.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
	}
	return s
}

// Handler returns the HTTP handler with metrics instrumentation.
func (s *Server) Handler() http.Handler { return s }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	rq := &request{w: rw, r: r, srv: s}
	s.serve(rq)
	s.metrics.observe(rq, rw.code, time.Since(start))
}

// request carries one API call through the pipeline.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	srv   *Server
	space string
	// kind is space's kind (layout.SpaceKind*), record its record as the
	// request found it.
	kind   string
	record *store.Object
	// data is the space whose objects are served: space, or for a
	// resource request the Space's name (a view's source).
	data string
	// sp holds the objects of a resource request (Config.Space).
	sp store.Space
	// prefix is the path before the one the space's API is served at
	// ("/spaces/<space>", and a view's "/views/<view>..."), "" for the
	// default space at /.
	prefix string
	// view is the view the request is served from, if any (views.go).
	view *viewRequest
	user user.Info
	info *genericrequest.RequestInfo
	// yamlBody is the body as sent when it was YAML (readBody converts
	// it to JSON), for strict decoding.
	yamlBody []byte
	// strictErrs are the strict decoding errors of the request's body or
	// patch (duplicate fields), reported with the object's unknown fields.
	strictErrs []error
	// patch is the JSON, merge or strategic merge patch being applied.
	patch *patchRequest
	// verb label for metrics (WATCH, LIST, GET, ...)
	metricVerb     string
	metricResource string
	// stored is the version the request wrote (or, for an update that
	// changed nothing, left), if any: a protobuf answer of it goes through
	// the encoding cache, where the lists and watch events that send it
	// next find it.
	stored *store.Object
}

func (s *Server) serve(rq *request) {
	r := rq.r
	path := r.URL.Path
	// Probes answer without credentials so that process supervisors can
	// use them; everything else needs an authenticated user.
	switch path {
	case "/healthz", "/livez":
		writeText(rq.w, http.StatusOK, "ok")
		return
	case "/readyz":
		if s.cfg.Ready != nil {
			if err := s.cfg.Ready(); err != nil {
				writeText(rq.w, http.StatusServiceUnavailable, "not ready: "+err.Error())
				return
			}
		}
		writeText(rq.w, http.StatusOK, "ok")
		return
	}

	// Credentials are checked before the space is looked up, so that a
	// caller without them learns nothing, not even which spaces exist.
	space, rest := splitSpace(path)
	u, err := s.cfg.Authenticator.Authenticate(r, space)
	if err != nil {
		rq.writeError(apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	rec, err := s.lookupSpace(space)
	if err != nil {
		rq.writeError(err)
		return
	}
	kind, terminating := layout.SpaceOf(rec)
	rq.space, rq.kind, rq.data, rq.record = space, kind, space, rec
	if u, err = s.cfg.Authorizer.Impersonate(r.Context(), space, u, r.Header); err != nil {
		rq.writeError(asForbidden(err))
		return
	}
	rq.user = u
	if strings.HasPrefix(path, "/spaces/") {
		rq.prefix = "/spaces/" + space
	}
	if s.cfg.Views != nil {
		_, escaped := splitSpace(r.URL.EscapedPath())
		if vp, ok := parseViewPath(escaped); ok {
			s.serveView(rq, vp)
			return
		}
	}
	info, err := s.requestInfo(rq, rest)
	if err != nil {
		rq.writeError(err)
		return
	}

	attrs := attributesFor(u, info)
	dec, reason, err := s.cfg.Authorizer.Authorize(r.Context(), space, attrs)
	if err != nil && dec != authorizer.DecisionAllow {
		s.log.Warn("authorization error", "space", space, "error", err)
	}
	if dec != authorizer.DecisionAllow {
		rq.writeError(auth.NewForbidden(u, attrs, reason))
		return
	}

	if !info.IsResourceRequest {
		s.serveNonResource(rq, rest)
		return
	}
	switch info.Verb {
	case "create", "update", "patch":
		if terminating {
			rq.writeError(terminatingSpace(space))
			return
		}
	}
	if kind == layout.SpaceKindSystem {
		rq.sp = s.systemSpaceData(space, info.APIGroup, info.Resource)
	} else if rq.sp, err = s.space(space, kind, schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, u); err != nil {
		rq.writeError(err)
		return
	}
	rq.data = rq.sp.Name()
	if err := refusesWrite(rq.sp, info); err != nil {
		rq.writeError(err)
		return
	}
	s.serveResource(rq)
}

// requestInfo parses rest, the path below the space's (or a view's)
// prefix, into rq.info.
func (s *Server) requestInfo(rq *request, rest string) (*genericrequest.RequestInfo, error) {
	r2 := rq.r.Clone(rq.r.Context())
	r2.URL.Path = rest
	info, err := s.infoFact.NewRequestInfo(r2)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	rq.info = info
	rq.metricVerb = strings.ToUpper(info.Verb)
	rq.metricResource = info.Resource
	return info, nil
}

// space is the Space a resource request to space is served from
// (Config.Space).
func (s *Server) space(space, kind string, gr schema.GroupResource, u user.Info) (store.Space, error) {
	if s.cfg.Space != nil {
		if sp, err := s.cfg.Space(space, kind, gr, u); sp != nil || err != nil {
			return sp, err
		}
	}
	return s.store.Space(space), nil
}

// refusesWrite refuses a write to a space that takes none
// (store.Space.Writable) before anything else is done: a 403 with the
// space's reason, or the kube Status it gives.
func refusesWrite(sp store.Space, info *genericrequest.RequestInfo) error {
	switch info.Verb {
	case "get", "list", "watch":
		return nil
	}
	err := sp.Writable()
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: err.Error(),
	}}
}

// notReady is the answer of a server that is not ready to say whether a
// space exists: 503 with a Retry-After of a second, which client-go
// retries by itself.
func notReady(err error) *apierrors.StatusError {
	st := apierrors.NewServiceUnavailable("not ready: " + err.Error())
	st.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return st
}

// splitSpace strips the /spaces/<name> prefix. Paths without it belong to
// the default space.
func splitSpace(path string) (space, rest string) {
	p, ok := strings.CutPrefix(path, "/spaces/")
	if !ok {
		return layout.DefaultSpace, path
	}
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, "/"
}

// lookupSpace returns the record of space, which must exist.
func (s *Server) lookupSpace(space string) (*store.Object, error) {
	rec := s.catalog.space(space)
	if rec == nil {
		// A server that is not ready (a replica catching up after a
		// restart) may simply not have the space yet: the client should
		// try again, not conclude it does not exist.
		if s.cfg.Ready != nil {
			if err := s.cfg.Ready(); err != nil {
				return nil, notReady(err)
			}
		}
		return nil, apierrors.NewNotFound(spacesGR, space)
	}
	return rec, nil
}

func (s *Server) serveNonResource(rq *request, rest string) {
	switch {
	case rest == "/version" || rest == "/version/":
		writeJSON(rq, http.StatusOK, s.cfg.Version)
	case rest == "/metrics":
		s.metrics.serve(rq.w, rq.r)
	case rest == "/api" || rest == "/api/":
		s.serveDiscoveryRoot(rq, true)
	case rest == "/apis" || rest == "/apis/":
		s.serveDiscoveryRoot(rq, false)
	case strings.HasPrefix(rest, "/openapi/"):
		s.serveOpenAPI(rq, rest)
	case rest == "/healthz" || rest == "/livez" || rest == "/readyz":
		writeText(rq.w, http.StatusOK, "ok")
	case strings.HasPrefix(rest, "/api/") || strings.HasPrefix(rest, "/apis/"):
		if !s.serveDiscoveryPath(rq, rest) {
			rq.writeError(errNoResource())
		}
	default:
		rq.writeError(errNoResource())
	}
}

func attributesFor(u user.Info, info *genericrequest.RequestInfo) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User:            u,
		Verb:            info.Verb,
		Namespace:       info.Namespace,
		APIGroup:        info.APIGroup,
		APIVersion:      info.APIVersion,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Name:            info.Name,
		ResourceRequest: info.IsResourceRequest,
		Path:            info.Path,
	}
}

// statusRecorder remembers the status code for metrics and passes Flush
// through for watches.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes an upgrade (exec, attach, portforward) through, recorded
// as 101 Switching Protocols.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil && !s.wrote {
		s.code, s.wrote = http.StatusSwitchingProtocols, true
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
