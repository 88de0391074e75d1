package destproxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/proxy"
)

// DefaultUserPrefix is prepended to the user's name and groups at the
// destination unless EdgeConfig.UserPrefix says otherwise: the root's
// "alice" in "devs" is "canopy:alice" in "canopy:devs" there, so that
// the destination's own users and groups (system:masters) are never
// reached by name from the root.
const DefaultUserPrefix = "canopy:"

// EdgeConfig configures an Edge.
type EdgeConfig struct {
	// Name is the destination the edge serves.
	Name string
	// Cluster serves the requests as the destination's kube API would:
	// ClusterHandler for a real cluster, a virtual cluster's handler.
	Cluster http.Handler
	// UserPrefix is prepended to the impersonated user name and groups
	// (default DefaultUserPrefix; "-" for none). Groups are added to every
	// impersonated user's groups, as they are.
	UserPrefix string
	Groups     []string
	Logger     *slog.Logger
}

// Edge serves the proxy streams that reach an edge (ServeStream is
// UplinkConfig.ServeProxy) with HTTP, passing each request to the
// cluster as the root's user. It runs no goroutine of its own: each
// stream is served by its own (serveConn) until Close.
type Edge struct {
	cfg EdgeConfig
	srv *http.Server
}

// NewEdge returns an Edge for cfg.
func NewEdge(cfg EdgeConfig) *Edge {
	switch cfg.UserPrefix {
	case "":
		cfg.UserPrefix = DefaultUserPrefix
	case "-":
		cfg.UserPrefix = ""
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Edge{cfg: cfg}
	e.srv = &http.Server{
		Handler:           http.HandlerFunc(e.serve),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, requestKey{}, c.(*proxy.Conn).Request())
		},
	}
	return e
}

type requestKey struct{}

// ServeStream answers a proxy stream the edge's parent opened.
func (e *Edge) ServeStream(_ context.Context, st link.Stream) {
	c, err := proxy.Accept(st, e.cfg.Name)
	if err != nil {
		e.cfg.Logger.Info("refused a proxy stream", "error", err)
		return
	}
	serveConn(e.srv, c)
}

// Close ends the requests being served and refuses the next streams.
func (e *Edge) Close() error { return e.srv.Close() }

// serveConn serves HTTP on c with srv, as srv.Serve does a connection
// its listener accepted, with no listener and no goroutine waiting on
// one: srv.Serve takes c from a listener of that one connection, starts
// serving it and returns. c is closed at once if srv is closed;
// srv.Close closes it later.
func serveConn(srv *http.Server, c net.Conn) {
	_ = srv.Serve(&oneConn{c: c, addr: c.LocalAddr()})
}

// oneConn is a net.Listener that accepts one connection, then ends.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	addr net.Addr
}

var errServed = errors.New("destproxy: the one connection is served")

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.c
	l.c = nil
	if c == nil {
		return nil, errServed
	}
	return c, nil
}

// Close closes the connection unless it was accepted.
func (l *oneConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// serve passes one request to the cluster as the root's user.
func (e *Edge) serve(w http.ResponseWriter, r *http.Request) {
	req := r.Context().Value(requestKey{}).(proxy.Request)
	stripCredentials(r.Header)
	impersonate(r.Header, e.cfg.UserPrefix, req.User, req.UID, req.Groups, req.Extra, e.cfg.Groups)
	e.cfg.Cluster.ServeHTTP(w, r)
}

// ClusterHandler is a reverse proxy to the kube API that rc names, with
// rc's credentials (the edge's).
func ClusterHandler(rc *rest.Config) (http.Handler, error) {
	tr, err := rest.TransportFor(rc)
	if err != nil {
		return nil, err
	}
	host := rc.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(host)
	if err != nil {
		return nil, err
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Host = base.Host
		},
		Transport:     tr,
		FlushInterval: -1,
	}, nil
}
