package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/canopy-dev/canopy/relay/destproxy"
	"github.com/canopy-dev/canopy/relay/transport/proxy"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/siblings"
	"github.com/canopy-dev/canopy/syncer"
)

// ChildConfig configures a region or edge relay.
type ChildConfig struct {
	Role    pki.ChildRole
	Name    string
	DataDir string
	// Parents are the parent's link addresses (any of them).
	Parents   []string
	JoinToken string
	// LinkAddr is where a region's own children dial in.
	LinkAddr string
	// PeerAddr, for a region, is where it gossips with its siblings
	// (regions of the same tree under the same parent, found with
	// memberlist; UDP and TCP), and Join names other siblings' PeerAddr
	// (any one suffices). The region tells its children its siblings'
	// link addresses, so that they re-home to one when it dies. Empty: no
	// siblings. The gossip runs on the host's network even with Network.
	PeerAddr string
	Join     []string
	// RenewBefore is how long before its certificate expires the relay
	// asks its parent for a new one over the link (docs/security.md,
	// "Renewal"). Zero: once two thirds of the certificate's lifetime have
	// passed (pki.RenewAt).
	RenewBefore time.Duration
	// ChildCertValidity, for a region, is how long the certificates it
	// issues to its children are valid, never past its own. Zero:
	// pki.ChildCertValidity (a year).
	ChildCertValidity time.Duration
	// ParentTimeout is how long the link to the parent may stay silent
	// before it is given up and the parent, or a sibling, dialed again
	// (link.Config.MaxIdleTimeout; keep-alives every third of it). Zero:
	// the link's default (45 s).
	ParentTimeout time.Duration
	// StatusWindow (--status-window), for a region, bounds how long its
	// children's reports must stay quiet before it merges them into its
	// own (reports.Window: a two-hundredth of it after a quarter of it
	// without reports, up to all of it under a stream, which waits at most
	// reports.MaxWaits windows). Zero: DefaultStatusWindow.
	StatusWindow time.Duration
	// Proxy forces the TLS/TCP transport through an HTTP CONNECT proxy.
	Proxy *url.URL
	// VirtualCluster gives an edge an in-memory cluster; Kubeconfig
	// names a real one; InCluster is the cluster the edge runs in as a
	// pod (rest.InClusterConfig: its ServiceAccount's token and CA). The
	// edge's syncer applies its inbox to the one given.
	VirtualCluster bool
	Kubeconfig     string
	InCluster      bool
	Labels         map[string]string
	// StatusAddr, when set, serves /metrics, /healthz, /readyz and
	// /debug/inbox.
	StatusAddr string
	// Network, when set, carries this relay's links instead of the host's
	// UDP and TCP: simulations and tests run whole trees over an in-memory
	// packet network (relay/transport/link/memnet), QUIC only.
	Network *Network
	// InMemory keeps the store in memory (no log on disk): for simulations
	// and benchmarks running hundreds of relays in one process. The inbox
	// then does not survive a restart.
	InMemory bool
	// StoreHistory is the number of store events kept for watch resumption
	// (store.Options.HistorySize): every kept event pins an object version
	// in memory. A watcher resuming from further back (a child that
	// reconnects, a parent resuming this relay's reports, a watcher that
	// fell behind) gets store.ErrExpired and resyncs from a list instead.
	// Zero means DefaultInMemoryEdgeHistory or DefaultInMemoryRegionHistory
	// for an InMemory child, the store's default (100 000) otherwise.
	StoreHistory int
	// RejectApply, with VirtualCluster, makes the cluster refuse (403, as
	// an admission webhook would) every write of an object for which it
	// returns an error: a fault for simulations (vcluster.Options.Reject).
	RejectApply func(resource, namespace, name string) error
	// MaxProxyStreams, for a region, bounds the requests to destinations
	// open at once on one child's link (--max-proxy-streams). Zero:
	// session.DefaultMaxProxyStreams.
	MaxProxyStreams int
	// ImpersonationPrefix and ImpersonationGroups, for an edge, are how
	// requests from the root's users reach its cluster
	// (--impersonation-prefix, --impersonation-group;
	// destproxy.EdgeConfig.UserPrefix and Groups).
	ImpersonationPrefix string
	ImpersonationGroups []string
}

// Defaults of ChildConfig.StoreHistory for an InMemory child (a
// simulation runs thousands in one process, where the store's default of
// 100 000 events would pin up to 100 000 object versions per relay).
const (
	// DefaultInMemoryEdgeHistory: an edge's store is watched by its own
	// syncer and by the upsync of its reports, which resumes after a
	// reconnect across what the edge wrote meanwhile (about four events
	// per change it receives). EdgeHistoryBytes bounds it first.
	DefaultInMemoryEdgeHistory = 1024
	// DefaultInMemoryRegionHistory: a region's children resume from its
	// store, which also takes their reports (a few events per child and
	// change): 4 096 events cover about ten changes at 100 children.
	DefaultInMemoryRegionHistory = 4096
)

// Bounds of the history of a relay's store by the data of the versions it
// keeps (store.Options.HistoryBytes), on disk or in memory. Every kept
// event pins its version (in memory about three times its data),
// and a watch that resumes from before the history resyncs from a list.
const (
	// EdgeHistoryBytes: an edge's watchers are its own syncer, in
	// process, and the upsync of its reports, which after a gap of more
	// than a few changes resyncs from a list of the few reports an edge
	// holds.
	EdgeHistoryBytes = 16 << 10
	// RegionHistoryBytes: a region's children resume their mailboxes
	// from its store, which also takes their reports, a few events per
	// child and change: 2 MiB keep a few changes at 100 children; a
	// child that was gone longer resyncs its mailbox.
	RegionHistoryBytes = 2 << 20
)

// storeOptions are the options of the child's own store.
func (cfg ChildConfig) storeOptions() store.Options {
	o := store.Options{Fields: mailbox.Fields(nil), Addresses: mailbox.Targets, HistorySize: cfg.StoreHistory, HistoryBytes: RegionHistoryBytes}
	if cfg.Role == pki.RoleEdge {
		o.HistoryBytes = EdgeHistoryBytes
	}
	return o
}

// RunChild runs a region or edge relay until ctx is done.
func RunChild(ctx context.Context, cfg ChildConfig) error {
	c, err := OpenChild(cfg, slog.Default())
	if err != nil {
		return err
	}
	return c.Serve(ctx)
}

// Child is a running region or edge relay.
type Child struct {
	cfg   ChildConfig
	log   *slog.Logger
	lock  *os.File
	store *store.Store
	// reports holds a region's children's reports, in memory (DESIGN.md
	// section 2): its log holds its outbox, the summary it makes of them.
	reports *store.Store
	node    *consensus.Node
	uplink  *session.Uplink

	mu        sync.Mutex // guards ln, mailboxes, downlink and siblings, set once the region has its identity
	ln        *link.Listener
	mailboxes *mailbox.Mailboxes
	downlink  *session.Downlink
	// moved is the parent's last session.Moved, for a downlink started after it.
	moved   *session.Moved
	serving chan struct{} // closed once a region serves its children
	cluster *vcluster.Cluster
	// clusterStarted: Start owns the cluster's cleanup once called.
	clusterStarted bool
	// syncer applies an edge's inbox to its cluster (nil without one);
	// reach serves the requests from the root to that cluster.
	syncer *syncer.Syncer
	reach  *destproxy.Edge
	// dialTransport is the QUIC transport of an in-memory network, closed
	// with the relay.
	dialTransport *quic.Transport
	// siblings finds a region's siblings (nil without PeerAddr, or until
	// the region serves).
	siblings *siblings.Gossip
	// creds are a region's certificate and CA as it serves its children
	// (nil for an edge).
	creds *credentials
}

// OpenChild prepares a child relay: its data directory, its store on a
// local log (so the inbox survives restarts), and its uplink. It completes
// cfg and refuses it, creating and opening nothing, when Validate finds
// problems.
func OpenChild(cfg ChildConfig, log *slog.Logger) (*Child, error) {
	cfg.Complete()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, invalid(errs)
	}
	lock, err := createDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	log = log.With("relay", cfg.Name, "role", cfg.Role.String())
	st := store.New(cfg.storeOptions())
	var node *consensus.Node
	if cfg.InMemory {
		st.SetLog(store.NewMemLog(st))
	} else {
		if node, err = consensus.Open(consensus.Config{Dir: raftDir(cfg.DataDir), NodeID: cfg.Name, Logger: log}, st); err != nil {
			lock.Close()
			return nil, err
		}
		st.SetLog(node)
	}
	c := &Child{cfg: cfg, log: log, lock: lock, store: st, reports: newReportStore(), node: node, serving: make(chan struct{})}
	ucfg := session.UplinkConfig{
		Name: cfg.Name, Role: cfg.Role, DataDir: cfg.DataDir, Parents: cfg.Parents, JoinToken: cfg.JoinToken,
		Store: st, Inbox: layout.InboxSpace, Outbox: layout.OutboxSpace, Proxy: cfg.Proxy, Logger: log,
		Subtree: c.subtree, Moved: c.setMoved, RenewBefore: cfg.RenewBefore,
	}
	if cfg.Role == pki.RoleRegion {
		ucfg.ServeProxy = func(ctx context.Context, st link.Stream) { proxy.Forward(ctx, st, regionOpener{c}, log) }
	}
	if cfg.Role == pki.RoleRegion {
		c.creds = &credentials{dataDir: cfg.DataDir, log: log}
		ucfg.Renewed = c.creds.renewed
	}
	if cfg.Network != nil {
		tr, err := cfg.Network.transport(cfg.Name)
		if err != nil {
			c.close()
			return nil, err
		}
		c.dialTransport = tr
		ucfg.Mode, ucfg.Transport, ucfg.Link = link.ModeQUICOnly, tr, cfg.Network.Link
	}
	if cfg.ParentTimeout > 0 {
		ucfg.Link.MaxIdleTimeout, ucfg.Link.KeepAlivePeriod = cfg.ParentTimeout, cfg.ParentTimeout/3
	}
	if cfg.Role == pki.RoleEdge && cfg.VirtualCluster {
		vc, err := vcluster.New(vcluster.Options{Name: cfg.Name, Logger: log, Reject: cfg.RejectApply})
		if err != nil {
			c.close()
			return nil, err
		}
		c.cluster = vc
	}
	if cfg.Role == pki.RoleEdge && (c.cluster != nil || cfg.Kubeconfig != "" || cfg.InCluster) {
		var rc *rest.Config
		switch {
		case c.cluster != nil:
			rc = c.cluster.RESTConfig()
		case cfg.Kubeconfig != "":
			if rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
				c.close()
				return nil, fmt.Errorf("server: --kubeconfig: %w", err)
			}
		default:
			if rc, err = rest.InClusterConfig(); err != nil {
				c.close()
				return nil, fmt.Errorf("server: in-cluster configuration: %w", err)
			}
		}
		if c.syncer, err = syncer.New(syncer.Config{Name: cfg.Name, Store: st, Inbox: layout.InboxSpace, Outbox: layout.OutboxSpace,
			Cluster: rc, Logger: log}); err != nil {
			c.close()
			return nil, err
		}
		var h http.Handler
		if c.cluster != nil {
			h = c.cluster.Handler()
		} else if h, err = destproxy.ClusterHandler(rc); err != nil {
			c.close()
			return nil, err
		}
		c.reach = destproxy.NewEdge(destproxy.EdgeConfig{Name: cfg.Name, Cluster: h, UserPrefix: cfg.ImpersonationPrefix,
			Groups: cfg.ImpersonationGroups, Logger: log})
		ucfg.ServeProxy = c.reach.ServeStream
	}
	c.uplink = session.NewUplink(ucfg)
	return c, nil
}

// Store exposes the child's store (tests, simulations).
func (c *Child) Store() *store.Store { return c.store }

// Reports exposes the store in memory of a region's children's reports
// (tests, simulations).
func (c *Child) Reports() *store.Store { return c.reports }

// VirtualCluster exposes an edge's in-memory cluster, nil without one
// (simulations write into it what a controller at the edge would).
func (c *Child) VirtualCluster() *vcluster.Cluster { return c.cluster }

// Uplink exposes the link to the parent (tests, status).
func (c *Child) Uplink() *session.Uplink { return c.uplink }

// LinkAddr is a region's listen address once serving (empty for an edge).
func (c *Child) LinkAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln == nil {
		return ""
	}
	return c.ln.Addr().String()
}

// Siblings is a region's sibling discovery (nil without PeerAddr, or
// until it serves).
func (c *Child) Siblings() *siblings.Gossip {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.siblings
}

// Mailboxes are a region's children's mailboxes over its inbox (nil until
// it serves).
func (c *Child) Mailboxes() *mailbox.Mailboxes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mailboxes
}

// Downlink is a region's server for its children (nil until it serves).
func (c *Child) Downlink() *session.Downlink {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.downlink
}

// Serve runs the child's parts until ctx is done or one fails: the uplink;
// a region's downlink; an edge's syncer and, with a virtual cluster, the
// cluster; the status endpoint. Everything stops before the store closes.
func (c *Child) Serve(ctx context.Context) error {
	defer c.close()
	var g group
	g.add("uplink", c.uplink)
	if c.cfg.StatusAddr != "" {
		g.add("status", PartFunc(func(ctx context.Context) error { return c.serveStatus(ctx, c.cfg.StatusAddr) }))
	}
	if c.cluster != nil {
		c.clusterStarted = true
		g.add("virtual cluster", c.cluster)
	}
	if c.syncer != nil {
		// The syncer runs from the inbox on disk, connected or not.
		g.add("syncer", c.syncer)
		// The destination proxy runs no goroutine of its own: it serves
		// the streams the uplink hands it until the relay stops.
		defer c.reach.Close()
	}
	if c.cfg.Role == pki.RoleRegion {
		// A region serves children only once it holds its certificate
		// (its intermediate CA), which the uplink's join provides.
		// Its listener is closed before Serve returns, so that the
		// address is free for the next one.
		g.add("downlink", PartFunc(c.serveChildren))
	}
	err := g.run(ctx, c.log, func() { c.log.Info("relay started", "parents", c.cfg.Parents) })
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// serveChildren waits for the region's identity, then serves its
// children, each its mailbox: the objects of the inbox that target a
// destination it announced (tree.Routing).
func (c *Child) serveChildren(ctx context.Context) error {
	cert, root := waitIdentity(ctx, c.cfg.DataDir)
	if cert == nil {
		return nil
	}
	id, err := pki.IdentityFromCert(cert.Leaf)
	if err != nil {
		return err
	}
	authority := &join.Authority{Validity: c.cfg.ChildCertValidity, Root: root, Path: id.Path, Registrar: c.uplink}
	if err := c.creds.serve(authority); err != nil {
		return err
	}
	lc := link.ListenConfig{TLS: presenting(pki.LinkServerTLS(tls.Certificate{}, root), &c.creds.cert), Addr: c.cfg.LinkAddr}
	if c.cfg.Network != nil {
		if lc, err = c.cfg.Network.listenConfig(c.cfg.LinkAddr, lc.TLS); err != nil {
			return err
		}
	}
	ln, err := link.Listen(lc)
	if err != nil {
		return fmt.Errorf("server: --link-addr: %w", err)
	}
	defer ln.Close()
	var siblingAddrs func() ([]string, <-chan struct{})
	if c.cfg.PeerAddr != "" {
		sib, err := siblings.Open(siblings.Config{Name: c.cfg.Name, PeerAddr: c.cfg.PeerAddr, Join: c.cfg.Join,
			LinkAddr: ln.Addr().String(), Tree: siblings.TreeID(root), Parent: strings.Join(id.Path[:len(id.Path)-1], "/"), Logger: c.log})
		if err != nil {
			return err
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = sib.Start(sctx) }()
		defer func() { stop(); <-done }() // its ports are free when Serve returns
		siblingAddrs = sib.Addrs
		c.mu.Lock()
		c.siblings = sib
		c.mu.Unlock()
		c.log.Info("gossiping with siblings", "peer", sib.PeerAddr(), "join", c.cfg.Join)
	}
	mailboxes := mailbox.New(mailbox.Config{Store: c.store, Space: layout.InboxSpace})
	down := session.NewDownlink(session.DownlinkConfig{
		Name: c.cfg.Name, Path: id.Path, Store: c.store, ReportStore: c.reports, Listener: ln, Logger: c.log, MaxProxyStreams: c.cfg.MaxProxyStreams,
		Authority: authority,
		Registrar: c.uplink, Mailboxes: mailboxes,
		Reports: func(_ context.Context, child pki.Identity) (string, error) {
			return layout.ReportsSpace(child.Name), nil
		},
		Siblings: siblingAddrs,
		// A child that re-homed here is resynced once this region has
		// fetched its mailbox from above.
		Ready: c.uplink.WaitRouted,
	})
	c.mu.Lock()
	c.ln, c.mailboxes, c.downlink = ln, mailboxes, down
	if c.moved != nil {
		down.SetMoved(c.moved)
	}
	c.mu.Unlock()
	close(c.serving)
	c.log.Info("serving children", "link", ln.Addr().String(), "path", id.String())
	go func() {
		sum := regionSummarizer(c.store, c.reports, down, cmp.Or(c.cfg.StatusWindow, DefaultStatusWindow), c.log)
		if err := sum.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("summarizing reports stopped", "error", err)
		}
	}()
	go func() { _ = reportLinks(ctx, c.cfg.Name, down, c.reports, c.log) }()
	return down.Start(ctx)
}

// setMoved passes what the parent says has moved away from this relay to
// its downlink (a region's; an edge has no claims to drop).
func (c *Child) setMoved(m *session.Moved) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moved = m
	if c.downlink != nil {
		c.downlink.SetMoved(m)
	}
}

// subtree is what this relay announces to its parent: an edge is one
// destination (its cluster); a region announces what its children
// announced, once it serves them.
func (c *Child) subtree() ([]session.Destination, <-chan struct{}) {
	if c.cfg.Role == pki.RoleEdge {
		self := session.Destination{Name: c.cfg.Name, Labels: c.cfg.Labels, Connected: true, LastSeen: time.Now().UnixNano()}
		return []session.Destination{self}, nil // never changes while running
	}
	if d := c.Downlink(); d != nil {
		return d.Subtree()
	}
	return nil, c.serving
}

// credentials are what a region presents to its children and signs their
// certificates with: its relay certificate and intermediate CA, read from
// its data directory when it starts to serve and again whenever its
// uplink renewed them (session.UplinkConfig.Renewed). The key stays the
// same, so the certificates the region issued before still verify; its
// children get the renewed certificate in their chains when they renew.
type credentials struct {
	dataDir string
	log     *slog.Logger
	cert    atomic.Pointer[tls.Certificate]

	mu        sync.Mutex // serializes loads
	authority *join.Authority
}

// load reads the certificate and the CA in the data directory and uses
// them from now on.
func (cr *credentials) load() error {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cert, _, err := pki.LoadChildIdentity(cr.dataDir)
	if err != nil {
		return err
	}
	ca, err := pki.LoadChildCA(cr.dataDir)
	if err != nil {
		return err
	}
	cr.cert.Store(&cert)
	if cr.authority != nil {
		cr.authority.SetCA(ca)
	}
	return nil
}

// serve makes a sign with the region's CA, from now on.
func (cr *credentials) serve(a *join.Authority) error {
	cr.mu.Lock()
	cr.authority = a
	cr.mu.Unlock()
	return cr.load()
}

// renewed is the uplink's Renewed.
func (cr *credentials) renewed() {
	if err := cr.load(); err != nil {
		cr.log.Error("loading the renewed certificate; children are served with the previous one", "error", err)
	}
}

// waitIdentity polls the data directory until the uplink has saved the
// relay's certificate.
func waitIdentity(ctx context.Context, dataDir string) (*tls.Certificate, *x509.Certificate) {
	for {
		cert, root, err := pki.LoadChildIdentity(dataDir)
		if err == nil {
			return &cert, root
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Child) close() {
	c.store.Close()
	c.reports.Close()
	if c.node != nil {
		if err := c.node.Close(); err != nil {
			c.log.Warn("closing log", "error", err)
		}
	}
	if c.cluster != nil && !c.clusterStarted {
		c.cluster.Close()
	}
	if c.dialTransport != nil {
		_ = c.dialTransport.Close()
	}
	_ = c.lock.Close()
}

// regionOpener opens a region's proxy streams on its downlink, once it
// serves its children.
type regionOpener struct{ c *Child }

func (o regionOpener) OpenProxy(ctx context.Context, dest string) (link.Stream, error) {
	d := o.c.Downlink()
	if d == nil {
		return nil, proxy.Errorf(proxy.Unavailable, "relay %s does not serve its children yet", o.c.cfg.Name)
	}
	return d.OpenProxy(ctx, dest)
}
