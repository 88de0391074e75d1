package siblings

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrJoin: none of the --join addresses answered.
var ErrJoin = errors.New("siblings: no sibling answered --join")

// Config configures a region's sibling discovery.
type Config struct {
	// Name is the region's name, its gossip node name.
	Name string
	// PeerAddr is where it gossips (UDP and TCP), host:port; port 0 picks
	// a free one (PeerAddr reports it).
	PeerAddr string
	// Join are other siblings' PeerAddr; any one that answers suffices.
	// Until one does, joining is retried every JoinRetry.
	Join      []string
	JoinRetry time.Duration
	// LinkAddr is the region's link address as its siblings' children
	// should dial it. A host that listens on every interface (0.0.0.0,
	// [::], empty) is replaced by the gossip address's host.
	LinkAddr string
	// Tree identifies the tree: relays of another tree never exchange
	// gossip (it is memberlist's label). TreeID derives it from the root
	// CA certificate.
	Tree string
	// Parent is the parent's path from the root ("root", "root/eu"):
	// a relay gossiping another parent is refused.
	Parent string
	Logger *slog.Logger

	// Tune, when set, adjusts memberlist's configuration (tests: faster
	// timers).
	Tune func(*memberlist.Config)
}

// TreeID names the tree whose root CA certificate is root.
func TreeID(root *x509.Certificate) string {
	sum := sha256.Sum256(root.Raw)
	return hex.EncodeToString(sum[:8])
}

// siblingMeta is what a region gossips about itself (memberlist node
// metadata, at most memberlist.MetaMaxSize bytes).
type siblingMeta struct {
	Tree   string `json:"t"`
	Parent string `json:"p"`
	Link   string `json:"l"`
}

// Gossip finds a region's siblings. Its methods are safe for concurrent
// use; memberlist calls its delegates from its own goroutines.
type Gossip struct {
	cfg  Config
	log  *slog.Logger
	ml   *memberlist.Memberlist
	meta []byte

	mu      sync.Mutex
	links   map[string]string // alive siblings (node name → link address), self excluded
	refused map[string]bool   // nodes already logged as refused
	changed chan struct{}     // closed (and replaced) when links change
}

// Open starts gossiping on cfg.PeerAddr; Start joins the others.
func Open(cfg Config) (*Gossip, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.JoinRetry <= 0 {
		cfg.JoinRetry = 2 * time.Second
	}
	host, port, err := splitPeerAddr(cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("server: --peer-addr: %w", err)
	}
	s := &Gossip{cfg: cfg, log: cfg.Logger.With("gossip", "siblings"), links: map[string]string{},
		refused: map[string]bool{}, changed: make(chan struct{})}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	if host != "" {
		mc.BindAddr = host
	}
	mc.BindPort, mc.AdvertisePort = port, port
	mc.Label = "canopy-siblings/" + cfg.Tree
	mc.Delegate, mc.Events, mc.Alive, mc.Merge = siblingDelegate{s}, siblingDelegate{s}, siblingDelegate{s}, siblingDelegate{s}
	mc.LogOutput = memberlistLog{s.log}
	mc.DeadNodeReclaimTime = 10 * time.Second // a region back on another address
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	// The link address's host is known once memberlist has bound.
	s.meta = []byte("{}")
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("server: sibling gossip on %s: %w", cfg.PeerAddr, err)
	}
	s.ml = ml
	self := ml.LocalNode()
	meta, err := json.Marshal(siblingMeta{Tree: cfg.Tree, Parent: cfg.Parent, Link: advertiseLink(cfg.LinkAddr, self.Addr.String())})
	if err == nil && len(meta) > memberlist.MetaMaxSize {
		err = fmt.Errorf("%d bytes of metadata, more than %d", len(meta), memberlist.MetaMaxSize)
	}
	if err != nil {
		_ = ml.Shutdown()
		return nil, fmt.Errorf("server: sibling gossip: %w", err)
	}
	s.mu.Lock()
	s.meta = meta
	s.mu.Unlock()
	if err := ml.UpdateNode(5 * time.Second); err != nil {
		_ = ml.Shutdown()
		return nil, fmt.Errorf("server: sibling gossip: %w", err)
	}
	return s, nil
}

// PeerAddr is the address this region gossips at.
func (s *Gossip) PeerAddr() string {
	n := s.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Addrs returns the link addresses of the alive siblings (this region's
// own excluded), sorted, and a channel closed when they change: what
// DownlinkConfig.Siblings wants.
func (s *Gossip) Addrs() ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.links))
	for _, a := range s.links {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, s.changed
}

// Start joins the siblings named by Join (retrying until one answers),
// then gossips until ctx is done, and leaves.
func (s *Gossip) Start(ctx context.Context) error {
	defer func() {
		_ = s.ml.Leave(time.Second)
		_ = s.ml.Shutdown()
	}()
	joined := len(s.cfg.Join) == 0
	for {
		// Join again when alone: at first, or after every sibling was lost
		// (a partition that memberlist gave up on).
		if len(s.cfg.Join) > 0 && s.ml.NumMembers() < 2 {
			if n, err := s.ml.Join(s.cfg.Join); n > 0 {
				if !joined {
					s.log.Info("joined siblings", "members", s.ml.NumMembers())
				}
				joined = true
			} else if !joined {
				s.log.Info("no sibling answered yet, retrying", "join", s.cfg.Join, "wait", s.cfg.JoinRetry,
					"error", fmt.Errorf("%w: %v", ErrJoin, err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.cfg.JoinRetry):
		}
	}
}

// check refuses a node of another parent (the label keeps other trees
// out), logging it once.
func (s *Gossip) check(n *memberlist.Node) error {
	if n.Name == s.cfg.Name {
		return nil
	}
	var m siblingMeta
	err := json.Unmarshal(n.Meta, &m)
	if err == nil && m.Tree == s.cfg.Tree && m.Parent == s.cfg.Parent {
		return nil
	}
	reason := fmt.Sprintf("parent %q, not %q", m.Parent, s.cfg.Parent)
	switch {
	case err != nil || m.Tree == "":
		reason = "no sibling metadata"
	case m.Tree != s.cfg.Tree:
		reason = fmt.Sprintf("tree %q, not %q", m.Tree, s.cfg.Tree)
	}
	s.mu.Lock()
	first := !s.refused[n.Name]
	s.refused[n.Name] = true
	s.mu.Unlock()
	if first {
		s.log.Warn("refusing a relay that is not a sibling", "peer", n.Name, "addr", n.Address(), "reason", reason)
	}
	return fmt.Errorf("server: %s is not a sibling: %s", n.Name, reason)
}

// update records a node's link address (alive) or forgets it.
func (s *Gossip) update(n *memberlist.Node, alive bool) {
	if n.Name == s.cfg.Name {
		return
	}
	var m siblingMeta
	if json.Unmarshal(n.Meta, &m) != nil || m.Tree != s.cfg.Tree || m.Parent != s.cfg.Parent || m.Link == "" {
		alive = false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before, had := s.links[n.Name]
	if alive {
		s.links[n.Name] = m.Link
	} else {
		delete(s.links, n.Name)
	}
	if after, has := s.links[n.Name]; had != has || before != after {
		s.log.Info("siblings changed", "peer", n.Name, "alive", alive, "link", m.Link)
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// siblingDelegate implements memberlist's Delegate, EventDelegate,
// AliveDelegate and MergeDelegate. Its methods never call memberlist.
type siblingDelegate struct{ s *Gossip }

func (d siblingDelegate) NodeMeta(limit int) []byte {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if len(d.s.meta) > limit {
		return nil // checked by Open
	}
	return d.s.meta
}
func (siblingDelegate) NotifyMsg([]byte)                           {}
func (siblingDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (siblingDelegate) LocalState(join bool) []byte                { return nil }
func (siblingDelegate) MergeRemoteState(buf []byte, join bool)     {}

func (d siblingDelegate) NotifyJoin(n *memberlist.Node)        { d.s.update(n, true) }
func (d siblingDelegate) NotifyLeave(n *memberlist.Node)       { d.s.update(n, false) }
func (d siblingDelegate) NotifyUpdate(n *memberlist.Node)      { d.s.update(n, true) }
func (d siblingDelegate) NotifyAlive(n *memberlist.Node) error { return d.s.check(n) }

// NotifyMerge refuses a push/pull (a join) that would bring in a relay
// that is not a sibling.
func (d siblingDelegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := d.s.check(n); err != nil {
			return err
		}
	}
	return nil
}

// advertiseLink returns the link address to gossip: listen, with a host
// listening on every interface replaced by host.
func advertiseLink(listen, host string) string {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host, p)
	}
	return listen
}

func splitPeerAddr(addr string) (string, int, error) {
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

// memberlistLog passes memberlist's log lines ("[WARN] memberlist: ...")
// to slog at their level.
type memberlistLog struct{ log *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	switch {
	case strings.Contains(msg, "[ERR]"):
		level = slog.LevelError
	case strings.Contains(msg, "[WARN]"):
		level = slog.LevelWarn
	case strings.Contains(msg, "[INFO]"):
		level = slog.LevelInfo
	}
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}
