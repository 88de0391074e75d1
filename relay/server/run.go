// Package server wires a root relay together: PKI, the store on its log,
// authentication and authorization, the kube API and its controllers.
//
// It owns start-up and shutdown order and the data directory layout; it
// must not contain API semantics (relay/apiserver/kubeapi) or storage logic
// (relay/store, consensus).
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/canopy-dev/canopy/relay/backing"
	"github.com/canopy-dev/canopy/relay/destproxy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/buildinfo"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/registry"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/topology/placement"
)

// Root is a running root relay.
type Root struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	// reports holds the children's reports, in memory (reportSet).
	reports *reportSet
	// relays is what the kube API serves as the inventory's Relays.
	relays  *relayView
	node    *consensus.Node
	api     *kubeapi.Server
	authn   *auth.Authenticator
	authz   *auth.Authorizer
	tls     *tls.Config
	serving *servingCert // presented by tls and the link listener
	ca      *pki.CA
	token   string
	ln      net.Listener
	links   *link.Listener
	down    *session.Downlink
	// destinations serves destproxy.Prefix; audit is its log.
	destinations *destproxy.Root
	// backed serves the spaces whose objects a backend keeps.
	backed *backedSpaces
	audit  *os.File
	// mailboxes are the children's mailboxes over the downsync space.
	mailboxes *mailbox.Mailboxes
	lock      *os.File
	ready     chan struct{}
	server    string
	crds      startupCRDs // the edge.canopy.dev CRDs /readyz waits for
	// kubeconfigStale is signalled when a space appears or goes: the
	// admin kubeconfig is rewritten soon after (maintainKubeconfig).
	kubeconfigStale chan struct{}
}

// KubeconfigChildren is how many children's spaces (mailbox-<child> and
// reports-<child>, children by name) the admin kubeconfig lists as
// contexts. A root with thousands of children (a flat fleet) would
// otherwise rewrite megabytes of YAML for each one that joins; `relay
// kubeconfig --space` prints any child space's context.
const KubeconfigChildren = 100

// kubeconfigDelay gathers the spaces of children that join together into
// one rewrite of the admin kubeconfig. A variable for tests.
var kubeconfigDelay = time.Second

// Run starts a root relay and blocks until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	r, err := OpenContext(ctx, cfg, slog.Default())
	if err != nil {
		return err
	}
	return r.Serve(ctx)
}

// Open prepares a root: it creates or loads the data directory, replays the
// log into the store, makes sure the initial spaces exist and binds the API
// address. Serve then serves until its context ends.
func Open(cfg Config, log *slog.Logger) (*Root, error) {
	return OpenContext(context.Background(), cfg, log)
}

// OpenContext is Open bounded by ctx. It completes cfg and refuses it,
// creating and opening nothing, when Validate finds problems. A replica of
// a cluster (cfg.HA) waits, until ctx ends, for the cluster to have a
// leader and for its store to catch up (consensus.Node.WaitReady) before
// it makes sure the initial spaces exist; a single root waits at most 30 s
// for those writes.
func OpenContext(ctx context.Context, cfg Config, log *slog.Logger) (*Root, error) {
	cfg.Complete()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, invalid(errs)
	}
	lock, err := createDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	pkiDir := pki.Dir(cfg.DataDir)
	ca, err := pki.LoadOrCreateCA(pkiDir)
	if err != nil {
		return nil, err
	}
	hosts, err := pki.ServingHosts(cfg.Name, cfg.APIAddr, cfg.LinkAddr)
	if err != nil {
		return nil, err
	}
	hosts = append(hosts, cfg.ServingNames...)
	cert, err := ca.EnsureServing(pkiDir, hosts)
	if err != nil {
		return nil, err
	}
	token, err := pki.LoadOrCreateToken(filepath.Join(pkiDir, pki.AdminTokenFile))
	if err != nil {
		return nil, err
	}
	saKey, err := pki.LoadOrCreateSigningKey(filepath.Join(pkiDir, pki.SigningKeyFile))
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("server: --api-addr: %w", err)
	}
	server, advertised := apiURLs(ln.Addr(), cfg.APIAddr, cfg.HA.RaftAddr)
	ccfg, clusterID, err := consensusConfig(cfg, ca, advertised, log)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	st := store.New(store.Options{Fields: mailbox.Fields(kubeapi.FieldsFor), Addresses: mailbox.Targets})
	// The children's reports are kept in memory, out of the log: reported
	// state is soft (DESIGN.md section 2). A replica's followers mirror
	// theirs to the leader (reportSet).
	reports := newReportSet(cfg.Name, st, cfg.HA.Enabled(), log)
	relays := newRelayView(st, reports, log)
	ccfg.Deliver = reports.deliver
	node, err := consensus.Open(ccfg, st)
	if err != nil {
		_ = ln.Close()
		reports.close()
		return nil, err
	}
	st.SetLog(node)
	serving := newServingCert(ca, pkiDir, hosts, cert, log)
	lc := link.ListenConfig{TLS: serving.serve(pki.LinkServerTLS(cert, ca.Cert)), Addr: cfg.LinkAddr}
	if cfg.Network != nil {
		if lc, err = cfg.Network.listenConfig(cfg.LinkAddr, lc.TLS); err != nil {
			_ = ln.Close()
			node.Close()
			return nil, err
		}
	}
	links, err := link.Listen(lc)
	if err != nil {
		_ = ln.Close()
		node.Close()
		return nil, fmt.Errorf("server: --link-addr: %w", err)
	}

	authn, err := auth.NewAuthenticator(auth.AuthenticatorConfig{
		AdminToken: token, ClientCAs: ca.Pool(), SAKey: saKey, Store: st, Issuer: saIssuer(clusterID, server),
	})
	if err != nil {
		_ = ln.Close()
		_ = links.Close()
		node.Close()
		return nil, err
	}
	authz := auth.NewAuthorizer(st)
	var r *Root // the downlink's callbacks run once r is complete
	rcfg := registry.Config{Store: st, Root: ca.Cert, RootName: cfg.treeName(), Logger: log}
	if cfg.HA.Enabled() {
		rcfg.ReadIndex = node // a token or a move recorded through another replica is seen
	}
	reg := registry.New(rcfg)
	mailboxes := mailbox.New(mailbox.Config{Store: st, Space: layout.DownsyncSpace})
	down := session.NewDownlink(session.DownlinkConfig{
		Name: cfg.treeName(), Replica: cfg.Name, Path: []string{cfg.treeName()}, Store: st, ReportStore: reports.local, Listener: links, Logger: log,
		Authority: &join.Authority{CA: ca, Validity: cfg.ChildCertValidity, Root: ca.Cert, Path: []string{cfg.treeName()}, Registrar: reg},
		Registrar: reg, Mailboxes: mailboxes,
		Mailbox: func(ctx context.Context, c pki.Identity) error {
			_, err := r.childSpace(ctx, layout.MailboxSpace(c.Name))
			return err
		},
		Reports: func(ctx context.Context, c pki.Identity) (string, error) {
			return r.childSpace(ctx, layout.ReportsSpace(c.Name))
		},
		MaxProxyStreams: cfg.MaxProxyStreams,
	})
	audit, err := os.OpenFile(cfg.ProxyAuditLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		_ = ln.Close()
		_ = links.Close()
		node.Close()
		return nil, fmt.Errorf("server: --proxy-audit-log: %w", err)
	}
	destinations := destproxy.NewRoot(destproxy.RootConfig{
		Authenticate: func(req *http.Request) (user.Info, error) { return authn.Authenticate(req, layout.InventorySpace) },
		Impersonate: func(ctx context.Context, u user.Info, h http.Header) (user.Info, error) {
			return authz.Impersonate(ctx, layout.InventorySpace, u, h)
		},
		Authorize: func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			return authz.Authorize(ctx, layout.InventorySpace, a)
		},
		Opener: down, Audit: audit, Logger: log,
		Replica:   func(name string) string { return r.replicaURL(name) },
		Peer:      &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
		PeerToken: token,
	})
	var readIndex kubeapi.ReadIndexer // linearizable reads need one only with replicas
	if cfg.HA.Enabled() {
		readIndex = node
	}
	var api *kubeapi.Server // Validate asks it what a space serves
	api = kubeapi.New(kubeapi.Config{
		Store: st, Authenticator: authn, Authorizer: authz, Tokens: authn,
		Logger: log, Version: Version(), ProcessMetrics: true, Collectors: []prometheus.Collector{down, raftCollector{node}, destinationsCollector{st}, destinations, backing.Collector{Store: st}},
		Validate: func(space string, gr schema.GroupResource, obj *unstructured.Unstructured) field.ErrorList {
			return validateEdgeKinds(space, gr, obj, api.Serves)
		},
		Views:        views(st),
		BeforeDelete: beforeDeleteOf(&r), ReadIndex: readIndex,
		CanCheck: func() bool { return node.VotersHave(store.FeatureCheck) },
		Space: rootSpaces{
			store:   st,
			mailbox: mailboxes.Matcher,
			reports: func(space string) *store.Store { return cmp.Or(reports.Store(space), reports.local) },
			relays:  relays.store(),
		}.space,
		Ready: func() error {
			if !authz.Synced() {
				return errors.New("authorizer not synced")
			}
			return r.replicaReady()
		},
	})
	authz.Inert = placement.InertInWDS(func(space string) bool {
		kind, _ := api.SpaceKind(space)
		return kind == layout.SpaceKindWDS
	})
	r = &Root{
		audit:        audit,
		destinations: destinations,
		backed:       &backedSpaces{store: st, authenticate: authn.Authenticate, impersonate: authz.Impersonate},
		down:         down, mailboxes: mailboxes, cfg: cfg, log: log, store: st, reports: reports, relays: relays, node: node, api: api, authn: authn, authz: authz, ca: ca, token: token, ln: ln, links: links, server: server,
		ready: make(chan struct{}), kubeconfigStale: make(chan struct{}, 1),
		serving: serving,
		tls: serving.serve(&tls.Config{
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  ca.Pool(),
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"},
		}),
	}
	var cancel context.CancelFunc
	if cfg.HA.Enabled() {
		ctx, cancel = context.WithCancel(ctx)
		log.Info("waiting for the cluster", "relay", cfg.Name, "cluster", clusterID, "bootstrap_expect", cfg.HA.BootstrapExpect)
		if err := node.WaitReady(ctx); err != nil {
			cancel()
			r.close()
			return nil, fmt.Errorf("server: waiting for the cluster %s: %w", clusterID, err)
		}
	} else {
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	}
	defer cancel()
	for _, sp := range []struct{ name, kind string }{
		{layout.DefaultSpace, layout.SpaceKindWDS},
		{layout.InventorySpace, layout.SpaceKindInventory},
		{layout.DownsyncSpace, layout.SpaceKindDownsync},
		{layout.SystemSpace, layout.SpaceKindSystem},
	} {
		err := retryTransient(ctx, log, "creating space "+sp.name, func(ctx context.Context) error {
			return api.EnsureSpace(ctx, sp.name, sp.kind)
		})
		if err != nil {
			r.close()
			return nil, fmt.Errorf("server: creating space %q: %w", sp.name, err)
		}
	}
	if err := r.writeKubeconfig(); err != nil {
		r.close()
		return nil, err
	}
	r.lock, ok = lock, true
	return r, nil
}

// childSpace makes sure a per-child space exists at the root (visible to
// the admin as a kubeconfig context, soon) and returns its name.
func (r *Root) childSpace(ctx context.Context, name string) (string, error) {
	if err := r.api.EnsureSpace(ctx, name, layout.SpaceKindMailbox); err != nil {
		return "", err
	}
	r.staleKubeconfig()
	return name, nil
}

// staleKubeconfig asks maintainKubeconfig for a rewrite.
func (r *Root) staleKubeconfig() {
	select {
	case r.kubeconfigStale <- struct{}{}:
	default: // a rewrite is pending already
	}
}

// followSpaces asks for the admin kubeconfig to be rewritten whenever a
// space is created or deleted (through the system space's API, or by the
// root for a child), until ctx is done.
func (r *Root) followSpaces(ctx context.Context) error {
	rev := r.store.Revision()
	for ctx.Err() == nil {
		w, err := r.store.Watch(ctx, store.WatchOptions{Resource: layout.SpaceResource, Since: rev})
		if err == nil {
			for ev := range w.Events() {
				rev = ev.Object.Revision
				if ev.Type == store.Added || ev.Type == store.Deleted {
					r.staleKubeconfig()
				}
			}
			w.Stop()
			err = w.Err()
		}
		if err != nil && ctx.Err() == nil {
			// Too old a revision, say: start over from now, rewriting
			// once for what may have been missed.
			r.log.Warn("watching the space records", "error", err)
			rev = r.store.Revision()
			r.staleKubeconfig()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// maintainKubeconfig rewrites the admin kubeconfig after spaces appear or
// go (childSpace, followSpaces), once per kubeconfigDelay at most, until ctx is done.
func (r *Root) maintainKubeconfig(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kubeconfigStale:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(kubeconfigDelay):
		}
		if err := r.writeKubeconfig(); err != nil {
			r.log.Warn("writing the admin kubeconfig", "error", err)
		}
	}
}

// LinkAddr is where children dial (useful with port 0).
func (r *Root) LinkAddr() string { return r.links.Addr().String() }

// Children reports the root's children and their links.
func (r *Root) Children() []session.ChildStatus { return r.down.Children() }

// Routing is how the root routes to child: its mailbox over the downsync
// space, as the child receives it (tree.RoutedContentHash).
func (r *Root) Routing(child string) tree.Routing { return r.mailboxes.Routing(child) }

// Addr is the API's listen address (useful with port 0).
func (r *Root) Addr() string { return r.ln.Addr().String() }

// Server is the https URL of the API.
func (r *Root) Server() string { return r.server }

// KubeconfigPath is where the admin kubeconfig is written.
func (r *Root) KubeconfigPath() string { return filepath.Join(r.cfg.DataDir, pki.AdminKubeconfigFile) }

// Store exposes the store, for tests and benchmarks in this module.
func (r *Root) Store() *store.Store { return r.store }

// Reports returns the store in memory that holds the reports-<child>
// spaces of the children linked to this replica.
func (r *Root) Reports() *store.Store { return r.reports.local }

// Ready is closed once the API serves requests.
func (r *Root) Ready() <-chan struct{} { return r.ready }

func (r *Root) writeKubeconfig() error {
	all, err := r.api.Spaces()
	if err != nil {
		return err
	}
	spaces := kubeconfigSpaces(all, KubeconfigChildren)
	kc, err := pki.BuildKubeconfig(pki.KubeconfigOptions{
		Server: r.server, CAPEM: r.ca.CertPEM, Token: r.token, Spaces: spaces, Current: layout.DefaultSpace,
	})
	if err != nil {
		return err
	}
	return pki.WriteKubeconfig(r.KubeconfigPath(), kc)
}

// kubeconfigSpaces returns the spaces of all that the admin kubeconfig
// lists: every space that is not a child's, and the mailbox and reports
// spaces of the first children by name, at most children of them.
func kubeconfigSpaces(all []string, children int) []string {
	names := map[string]bool{}
	for _, sp := range all {
		if c, ok := ChildOfSpace(sp); ok {
			names[c] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(names))
	for _, c := range sorted[min(len(sorted), children):] {
		delete(names, c) // beyond the first children: not listed
	}
	out := make([]string, 0, len(all))
	for _, sp := range all {
		if c, ok := ChildOfSpace(sp); !ok || names[c] {
			out = append(out, sp)
		}
	}
	return out
}

// ChildOfSpace returns the child whose mailbox or reports space (at the
// root) sp is named as.
func ChildOfSpace(sp string) (string, bool) {
	for _, prefix := range []string{layout.MailboxSpace(""), layout.ReportsSpace("")} {
		if c, ok := strings.CutPrefix(sp, prefix); ok && c != "" {
			return c, true
		}
	}
	return "", false
}

// Serve runs the root's parts until ctx is done or one fails, then stops
// them all before the store and the log close. Every replica serves the
// API and its children and authorizes; the leader-only work (controllers,
// inventory, CRDs, placement) runs on the leader (leaderWork).
func (r *Root) Serve(ctx context.Context) error {
	defer r.close()
	var g group
	g.add("authorizer", r.authz)
	g.add("downlink", r.down)
	g.add("kubeconfig", PartFunc(r.maintainKubeconfig))
	g.add("kubeconfig spaces", PartFunc(r.followSpaces))
	g.add("serving certificate", r.serving)
	g.add("reports", PartFunc(r.reports.follow))
	g.add("links", PartFunc(func(ctx context.Context) error { return reportLinks(ctx, r.cfg.Name, r.down, r.reports.local, r.log) }))
	g.add("relays", r.relays)
	if r.cfg.HA.Enabled() {
		g.add("report pump", PartFunc(func(ctx context.Context) error { return r.reports.pump(ctx, r.node) }))
		g.add("leader work", PartFunc(func(ctx context.Context) error { return r.node.RunAsLeader(ctx, r.leaderWork) }))
	} else {
		g.add("leader work", PartFunc(r.leaderWork))
	}
	api, err := r.apiServer()
	if err != nil {
		return err
	}
	g.add("kube API", api)
	return g.run(ctx, r.log, func() {
		close(r.ready)
		r.log.Info("root relay serving", "relay", r.cfg.Name, "api", r.server, "link", r.LinkAddr(), "kubeconfig", r.KubeconfigPath())
	})
}

// apiServer is the part that serves the kube API on r.ln: when its
// context ends, it stops accepting and lets requests finish (5 s at
// most).
func (r *Root) apiServer() (Part, error) {
	hs := &http.Server{
		Handler:           r.handler(),
		TLSConfig:         r.tls,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	if err := http2.ConfigureServer(hs, apiHTTP2()); err != nil {
		return nil, fmt.Errorf("configuring HTTP/2: %w", err)
	}
	return PartFunc(func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- hs.Serve(tls.NewListener(r.ln, r.tls)) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}), nil
}

// apiStreams is how many streams one HTTP/2 connection to the API may have
// open, kube-apiserver's default (--http2-max-streams-per-connection): a
// client-go process's watches share one connection up to that.
const apiStreams = 1000

// apiHTTP2 is the API server's HTTP/2 configuration. Its write scheduler is
// x/net's random one. The default ones (net/http's round robin, x/net's
// RFC 9218) walk a connection's open streams until one has a frame, so an
// event sent to a thousand watches of one connection cost up to a million
// steps (docs/benchmarks.md, *Where the time goes*); the random one holds only
// the streams with frames queued. API clients set no priorities to lose.
func apiHTTP2() *http2.Server {
	return &http2.Server{MaxConcurrentStreams: apiStreams, NewWriteScheduler: http2.NewRandomWriteScheduler}
}

func (r *Root) close() {
	_ = r.ln.Close()
	_ = r.links.Close()
	r.store.Close()
	r.reports.close()
	_ = r.audit.Close()
	if err := r.node.Close(); err != nil {
		r.log.Warn("closing log", "error", err)
	}
	if r.lock != nil {
		_ = r.lock.Close()
	}
}

// Version is what /version reports: the Kubernetes release of the API
// types compiled in, marked as Canopy's with the relay's version, and the
// commit it was built from (buildinfo.Get).
func Version() version.Info {
	bi := buildinfo.Get()
	minor, _ := bi.Kube()
	v := version.Info{Major: "1", Minor: minor, GitVersion: bi.KubeGitVersion(), GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi.Commit != buildinfo.Unknown {
		v.GitCommit = bi.Commit
	}
	return v
}
