package consensus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Gossip: every node runs a memberlist on PeerAddr whose node name is its
// NodeID and whose metadata is a gossipMeta. Memberlist only discovers and
// detects failures; the leader alone turns that into Raft membership
// (leader.go), and before any leader exists the bootstrap loop below turns
// BootstrapExpect discovered servers into the first configuration.

// gossipMeta is what a node gossips about itself (memberlist node metadata,
// at most memberlist.MetaMaxSize bytes once encoded).
type gossipMeta struct {
	Cluster string `json:"c"`
	Raft    string `json:"r"`
	// State: the node has Raft state (a log or a snapshot): it belongs to
	// a cluster that was bootstrapped, and never bootstraps again.
	State bool `json:"s,omitempty"`
	// Boot is the fingerprint of the bootstrap configuration this node
	// proposes (bootstrapFingerprint), empty when it proposes none.
	Boot string `json:"b,omitempty"`
	// App is Config.Meta.
	App []byte `json:"m,omitempty"`
	// Features is Config.Features (a release before them gossips none).
	Features []string `json:"f,omitempty"`
}

func (m gossipMeta) encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

func decodeGossipMeta(b []byte) (gossipMeta, error) {
	var m gossipMeta
	err := json.Unmarshal(b, &m)
	return m, err
}

// gossipLabel is memberlist's label for a cluster: memberlist drops every
// packet and stream whose label differs (and authenticates it as GCM
// associated data when gossip is encrypted), so nodes of different
// clusters never exchange membership.
func gossipLabel(clusterID string) string { return "canopy/" + clusterID }

// peer is what this node knows of another from gossip.
type peer struct {
	id    string
	meta  gossipMeta
	addr  string // gossip address
	alive bool
}

// members is this node's view of the gossip: delegates update it from
// memberlist's goroutines.
type members struct {
	self    string
	cluster string
	log     *slog.Logger
	// notify is signalled (without blocking) on every change.
	notify chan struct{}

	mu      sync.Mutex
	peers   map[string]*peer
	refused map[string]bool // foreign nodes already logged
	local   gossipMeta      // what NodeMeta returns
}

func newMembers(self, cluster string, local gossipMeta, log *slog.Logger) *members {
	return &members{
		self: self, cluster: cluster, log: log, notify: make(chan struct{}, 1),
		peers: map[string]*peer{}, refused: map[string]bool{}, local: local,
	}
}

func (ms *members) signal() {
	select {
	case ms.notify <- struct{}{}:
	default:
	}
}

// setLocal changes this node's metadata and reports whether it changed
// (memberlist must then be told with UpdateNode).
func (ms *members) setLocal(update func(*gossipMeta)) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	before := ms.local
	update(&ms.local)
	return before.State != ms.local.State || before.Boot != ms.local.Boot
}

func (ms *members) localMeta() gossipMeta {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.local
}

// snapshot returns the known peers (self included once gossip reported it).
func (ms *members) snapshot() map[string]peer {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make(map[string]peer, len(ms.peers))
	for id, p := range ms.peers {
		out[id] = *p
	}
	return out
}

// check refuses a node of another cluster, logging it once.
func (ms *members) check(n *memberlist.Node) error {
	m, err := decodeGossipMeta(n.Meta)
	if err == nil && m.Cluster == ms.cluster && m.Raft != "" {
		return nil
	}
	reason := fmt.Sprintf("cluster id %q, not %q", m.Cluster, ms.cluster)
	if err != nil || m.Raft == "" {
		reason = "no canopy metadata"
	}
	ms.mu.Lock()
	first := !ms.refused[n.Name]
	ms.refused[n.Name] = true
	ms.mu.Unlock()
	if first {
		ms.log.Warn("refusing gossip member from another cluster", "peer", n.Name, "addr", n.Address(), "reason", reason)
	}
	return fmt.Errorf("consensus: member %s refused: %s", n.Name, reason)
}

func (ms *members) update(n *memberlist.Node, alive bool) {
	m, err := decodeGossipMeta(n.Meta)
	if err != nil || m.Cluster != ms.cluster {
		return // refused by check; never recorded
	}
	ms.mu.Lock()
	ms.peers[n.Name] = &peer{id: n.Name, meta: m, addr: n.Address(), alive: alive}
	ms.mu.Unlock()
	ms.signal()
}

// gossipDelegate implements memberlist's Delegate, EventDelegate,
// AliveDelegate and MergeDelegate for a node. Memberlist calls these from
// its own goroutines, some with its locks held: they never call memberlist.
type gossipDelegate struct{ ms *members }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	b := d.ms.localMeta().encode()
	if len(b) > limit {
		// Open checked the size with the largest Boot; never reached.
		return nil
	}
	return b
}
func (gossipDelegate) NotifyMsg([]byte)                           {}
func (gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (gossipDelegate) LocalState(join bool) []byte                { return nil }
func (gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}

func (d gossipDelegate) NotifyJoin(n *memberlist.Node)   { d.ms.update(n, true) }
func (d gossipDelegate) NotifyLeave(n *memberlist.Node)  { d.ms.update(n, false) }
func (d gossipDelegate) NotifyUpdate(n *memberlist.Node) { d.ms.update(n, true) }

func (d gossipDelegate) NotifyAlive(n *memberlist.Node) error { return d.ms.check(n) }

// NotifyMerge refuses a push/pull (a join, typically) that would bring in a
// node of another cluster.
func (d gossipDelegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := d.ms.check(n); err != nil {
			return err
		}
	}
	return nil
}

// memberlistConfig builds memberlist's configuration for a node.
func (cfg Config) memberlistConfig(ms *members, logger *slog.Logger) (*memberlist.Config, error) {
	host, port, err := splitHostPort(cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("consensus: PeerAddr: %w", err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	if host != "" {
		mc.BindAddr = host
	}
	mc.BindPort, mc.AdvertisePort = port, port
	mc.Label = gossipLabel(cfg.ClusterID)
	mc.SecretKey = cfg.GossipKey
	d := gossipDelegate{ms}
	mc.Delegate, mc.Events, mc.Alive, mc.Merge = d, d, d, d
	mc.Logger = newHCLogger(logger, "memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	// A replica that comes back on another address (a new pod IP) may
	// reclaim its name once memberlist has considered the old one dead for
	// this long.
	mc.DeadNodeReclaimTime = 10 * time.Second
	if cfg.tune != nil && cfg.tune.memberlist != nil {
		cfg.tune.memberlist(mc)
	}
	return mc, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return host, port, nil
}

// bootstrapServers returns the configuration that the servers in ps would
// bootstrap: sorted by ID, so every node computes the same bytes.
func bootstrapServers(ps []peer) raft.Configuration {
	slices.SortFunc(ps, func(a, b peer) int { return strings.Compare(a.id, b.id) })
	var c raft.Configuration
	for _, p := range ps {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.id), Address: raft.ServerAddress(p.meta.Raft)})
	}
	return c
}

// bootstrapFingerprint names a bootstrap configuration in gossip.
func bootstrapFingerprint(c raft.Configuration) string {
	h := sha256.New()
	for _, s := range c.Servers {
		fmt.Fprintf(h, "%s\x00%s\x00", s.ID, s.Address)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// bootstrapDecision is one step of the bootstrap protocol for a node
// without Raft state, given its gossip view (self included):
//
//   - If any alive member has Raft state, a cluster exists: propose
//     nothing and wait for its leader to add this node.
//   - Else, once at least expect alive members without state are known,
//     the expect smallest IDs among them form the candidate configuration.
//     A node in it proposes it (gossips its fingerprint); a node outside
//     proposes nothing and waits to be added.
//   - A node bootstraps when every member of its candidate configuration
//     is alive and proposes the same fingerprint. Every member does so on
//     seeing that agreement, with the same configuration (identical entry
//     at index 1, as Consul's bootstrap_expect does), which Raft accepts;
//     a member that got the log from the leader first just has state.
//
// It returns the fingerprint to gossip, the configuration to bootstrap
// (non-nil only when agreement is seen) and, for logs, why it waits.
func bootstrapDecision(self string, view map[string]peer, expect int) (boot string, conf *raft.Configuration, waiting string) {
	var cands []peer
	for _, p := range view {
		if !p.alive {
			continue
		}
		if p.meta.State {
			return "", nil, fmt.Sprintf("member %s has raft state: waiting for the leader to add this node", p.id)
		}
		cands = append(cands, p)
	}
	if len(cands) < expect {
		ids := make([]string, len(cands))
		for i, p := range cands {
			ids[i] = p.id
		}
		slices.Sort(ids)
		return "", nil, fmt.Sprintf("%d of %d servers known (%s): waiting for more to join", len(cands), expect, strings.Join(ids, ", "))
	}
	c := bootstrapServers(cands)
	c.Servers = c.Servers[:expect]
	if !slices.ContainsFunc(c.Servers, func(s raft.Server) bool { return string(s.ID) == self }) {
		return "", nil, "not among the first servers of the bootstrap configuration: waiting for the leader to add this node"
	}
	fp := bootstrapFingerprint(c)
	for _, s := range c.Servers {
		if string(s.ID) == self {
			continue
		}
		if p := view[string(s.ID)]; p.meta.Boot != fp {
			return fp, nil, fmt.Sprintf("waiting for %s to agree on the bootstrap configuration", s.ID)
		}
	}
	return fp, &c, ""
}
