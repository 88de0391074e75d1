package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/canopy-dev/canopy/relay/backing"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/inventory"
	"github.com/canopy-dev/canopy/topology/placement"
)

// Replication makes a root one replica of a Raft cluster of roots
// (docs/ha.md). Its zero value is a single root: one voter on an in-memory
// transport, as before.
type Replication struct {
	// RaftAddr (host:port, --raft-addr) is where this replica listens for
	// Raft and forwarded writes (TLS). Setting it enables replication.
	RaftAddr string
	// PeerAddr (host:port, --peer-addr) is where it gossips (UDP and TCP).
	PeerAddr string
	// Join (--join) lists gossip addresses of other replicas.
	Join []string
	// BootstrapExpect (--bootstrap-expect, default 1) is how many replicas
	// form a new cluster.
	BootstrapExpect int
	// ClusterID (--cluster-id) names the cluster; by default it is derived
	// from the CA certificate (pki.CA.ClusterID), so replicas sharing a PKI
	// agree without configuration.
	ClusterID string
	// TreeName is the root's name in the relay tree, the same on every
	// replica (default "root"); Config.Name is then this replica's own
	// name, its Raft node id.
	TreeName string
	// SnapshotThreshold (--snapshot-threshold) is how many log entries
	// since the last snapshot make the replica take a new one (0: the
	// default, consensus.DefaultSnapshotThreshold).
	SnapshotThreshold uint64
	// SnapshotInterval (--snapshot-interval) is how often the threshold
	// is checked: each check comes after a random time between it and
	// twice it (0: consensus.DefaultSnapshotInterval).
	SnapshotInterval time.Duration
	// TrailingLogs (--trailing-logs) is how many entries a snapshot leaves
	// in the log for followers that lag a little; one further behind, or
	// a new replica, installs the snapshot (0:
	// consensus.DefaultTrailingLogs).
	TrailingLogs uint64
	// RaftMultiplier (--raft-multiplier) scales Raft's timers (1 s each
	// by default): higher rides out replicas starved of CPU at the cost
	// of a slower failover (0: 1).
	RaftMultiplier int
}

// Enabled reports whether the root is a replica of a cluster.
func (h Replication) Enabled() bool { return h.RaftAddr != "" }

// apiURLs returns the URL a root reaches its own API at (its admin
// kubeconfig, the clients it makes of itself) and the one it gives the
// other replicas. A listener on every interface (--api-addr=0.0.0.0:P or
// [::]:P, as in a pod) is reached at loopback by the root itself, which
// its serving certificate names (::1 when apiAddr asked for [::],
// 127.0.0.1 otherwise), and by the other replicas at the host of raftAddr
// (an address of its own they already reach, which the certificate of a
// wildcard listener names too). Otherwise both are the listener's address.
func apiURLs(listen net.Addr, apiAddr, raftAddr string) (self, advertised string) {
	ap, err := netip.ParseAddrPort(listen.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		u := "https://" + listen.String()
		return u, u
	}
	loopback := "127.0.0.1"
	if host, _, _ := net.SplitHostPort(apiAddr); host == "::" {
		loopback = "::1"
	}
	port := strconv.Itoa(int(ap.Port()))
	self = "https://" + net.JoinHostPort(loopback, port)
	advertised = self
	if host, _, err := net.SplitHostPort(raftAddr); err == nil && host != "" {
		advertised = "https://" + net.JoinHostPort(host, port)
	}
	return self, advertised
}

// consensusConfig returns the consensus configuration of this root: a
// single node, or a replica with its peer certificate (issued from the
// shared CA for the cluster's peer name) and its API URL as gossip Meta.
func consensusConfig(cfg Config, ca *pki.CA, apiURL string, log *slog.Logger) (consensus.Config, string, error) {
	cc := consensus.Config{Dir: raftDir(cfg.DataDir), NodeID: cfg.Name, Logger: log, Features: []string{store.FeatureCheck}}
	h := cfg.HA
	if !h.Enabled() {
		return cc, "", nil
	}
	clusterID := h.ClusterID
	if clusterID == "" {
		clusterID = ca.ClusterID()
	}
	cert, err := ca.EnsurePeer(pki.Dir(cfg.DataDir), clusterID)
	if err != nil {
		return cc, "", err
	}
	cc.RaftAddr, cc.PeerAddr, cc.Join = h.RaftAddr, h.PeerAddr, h.Join
	cc.BootstrapExpect, cc.ClusterID = h.BootstrapExpect, clusterID
	cc.SnapshotThreshold, cc.SnapshotInterval, cc.TrailingLogs = h.SnapshotThreshold, h.SnapshotInterval, h.TrailingLogs
	cc.RaftMultiplier = h.RaftMultiplier
	cc.TLS = consensus.PeerTLSConfig(cert, ca.Pool(), pki.PeerName(clusterID))
	cc.Meta = []byte(apiURL)
	return cc, clusterID, nil
}

// saIssuer is the iss claim of ServiceAccount tokens: the API URL of a
// single root, one name for the whole cluster otherwise, so that a token
// issued by one replica authenticates on every replica.
func saIssuer(clusterID, apiURL string) string {
	if clusterID == "" {
		return apiURL
	}
	return "https://" + clusterID + ".canopy.invalid"
}

// retryTransient runs f until it succeeds, fails with an error other than
// consensus.ErrNoLeader or ErrOutcomeUnknown, or ctx ends. Only for
// idempotent f (EnsureSpace is: an existing space is success).
func retryTransient(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil || ctx.Err() != nil ||
			!(errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrOutcomeUnknown)) {
			return err
		}
		log.Info("retrying after a leader change", "what", what, "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// placementConfig configures the leader's placement controller: it reads
// the children's reports from memory (reportSet), and reported state
// waits, after a restart or an election, until they have reported again
// (reportSet.hold). It leaves out children whose claims are superseded
// (mailbox.Mailboxes.Superseded, through the root's route cache).
func (r *Root) placementConfig() placement.Config {
	return placement.Config{Store: r.store, Inventory: layout.InventorySpace, Downsync: layout.DownsyncSpace,
		ReportWindow: cmp.Or(r.cfg.StatusWindow, DefaultStatusWindow), Logger: r.log.With("controller", "placement"),
		Reports: r.reports.Store, ReportsChanged: r.reports.Changed(), Hold: r.reports.hold,
		Claims: r.mailboxes}
}

// inventoryController is the leader's inventory controller: it installs
// the inventory CRDs through the root's own API, as the admin, and keeps a
// SyncTarget per destination below the children of every replica (the
// replicated route and link records: session.Fleet).
func (r *Root) inventoryController() (*inventory.Controller, error) {
	dc, err := r.spaceClient(layout.InventorySpace)
	if err != nil {
		return nil, err
	}
	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		return nil, err
	}
	return inventory.New(inventory.Config{
		Store: r.store, Client: dc, Root: r.cfg.treeName(), Logger: r.log,
		Fleet: func() ([]inventory.Destination, error) {
			dests, err := session.Fleet(r.store, layout.DownsyncSpace)
			out := make([]inventory.Destination, len(dests))
			for i, d := range dests {
				out[i] = inventory.Destination{Name: d.Name, Labels: d.Labels, Path: d.Path, Connected: d.Connected, LastSeen: d.LastSeen}
			}
			return out, err
		},
		FleetRecords: []store.Resource{layout.RouteResource, session.LinkResource},
		InstallCRDs:  func(ctx context.Context) error { return installCRDs(ctx, dc, manifests) },
		CRDChanged:   crdTouched,
		Installed:    func() { r.crds.inventory.Store(true) },
	}), nil
}

// leaderWork runs the parts of the root that only one replica may run: the
// kube API's controllers, the inventory, the workload CRDs, placement and
// the copies of backed spaces.
// It returns when ctx ends (leadership lost), or as soon as one part
// returns: a part that stops while ctx is live is an error, so that
// RunAsLeader starts the group again.
func (r *Root) leaderWork(ctx context.Context) error {
	r.reports.beginTerm()
	inv, err := r.inventoryController()
	if err != nil {
		return err
	}
	var g group
	g.add("kube API controllers", PartFunc(r.api.StartControllers))
	g.add("inventory", inv)
	g.add("workload CRDs", PartFunc(r.maintainWorkloadCRDs))
	g.add("placement", PartFunc(placement.New(r.placementConfig()).Run))
	g.add("backed spaces", backing.New(backing.Config{Store: r.store, Logger: r.log}))
	return g.run(ctx, r.log, nil)
}

// startupCRDsReady is /readyz's CRD check (part of replicaReady). The
// leader installs the CRDs (r.crds); a follower is ready once it has
// replicated them.
func (r *Root) startupCRDsReady() error {
	err := r.crds.ready()
	if err == nil || !r.cfg.HA.Enabled() {
		return err
	}
	for _, want := range []struct {
		space     string
		resources []string
	}{
		{layout.InventorySpace, edgev1alpha1.InventoryResources},
		{layout.DefaultSpace, edgev1alpha1.WorkloadResources},
	} {
		for _, res := range want.resources {
			k := store.Key{Space: want.space, Resource: store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, Name: edgev1alpha1.CRDName(res)}
			if _, err := r.store.Get(k); err != nil {
				return fmt.Errorf("CRD %s not replicated yet in space %s", k.Name, want.space)
			}
		}
	}
	return nil
}

// Members describes the replicas as this root sees them (one, without
// replication).
func (r *Root) Members() []consensus.Member { return r.node.Members() }

// IsLeader reports whether this root currently runs the leader-only work.
func (r *Root) IsLeader() bool { return r.node.IsLeader() }

// DefaultTreeName is the name of a replicated root in the relay tree.
const DefaultTreeName = "root"

// treeName is the root's name in the relay tree: its children's
// certificates and paths start with it, so all replicas share it. A single
// root uses its own name; a replica (whose Name is its Raft node id)
// uses HA.TreeName, "root" by default.
func (cfg Config) treeName() string {
	switch {
	case !cfg.HA.Enabled():
		return cfg.Name
	case cfg.HA.TreeName != "":
		return cfg.HA.TreeName
	}
	return DefaultTreeName
}
