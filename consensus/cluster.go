package consensus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// openCluster starts a cluster replica: the TLS listener shared by raft and
// the forward protocol, raft on a NetworkTransport, memberlist, and the
// background loops (leadership, bootstrap, join).
func (n *Node) openCluster(snaps raft.SnapshotStore, exists bool) (*Node, error) {
	cfg := n.cfg
	serverTLS, clientTLS, err := peerTLS(cfg.TLS)
	if err != nil {
		return nil, n.failOpen(err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, n.failOpen(fmt.Errorf("consensus: RaftAddr: %w", err))
	}
	advertise := ln.Addr().String()
	if cfg.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(advertise)
		advertise = net.JoinHostPort(cfg.AdvertiseHost, port)
	}
	local := gossipMeta{Cluster: cfg.ClusterID, Raft: advertise, App: cfg.Meta, Features: cfg.Features}
	if probe := (gossipMeta{Cluster: cfg.ClusterID, Raft: advertise, App: cfg.Meta, Features: cfg.Features, State: true, Boot: strings.Repeat("f", 16)}).encode(); len(probe) > memberlist.MetaMaxSize {
		_ = ln.Close()
		return nil, n.failOpen(fmt.Errorf("consensus: gossip metadata of %d bytes exceeds %d: shorten Meta or ClusterID", len(probe), memberlist.MetaMaxSize))
	}

	c := &clusterParts{raftAddr: advertise}
	c.fsrv = newForwardServer(n.ctx, n.handleForward)
	c.mux = newMuxLayer(ln, advertise, serverTLS, clientTLS, n.log, c.fsrv.serve)
	c.fwd = newForwardClient(func(addr string, timeout time.Duration) (net.Conn, error) {
		return c.mux.dial(addr, protoForward, timeout)
	})
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: c.mux, MaxPool: 3, Timeout: 10 * time.Second, Logger: newHCLogger(n.log, "raft-net"),
	})
	abort := func(err error) (*Node, error) {
		_ = trans.Close() // closes c.mux too
		c.fsrv.close()
		c.mux.wait()
		return nil, n.failOpen(err)
	}
	rc := cfg.raftConfig(n.log)
	alone := cfg.BootstrapExpect == 1 && len(cfg.Join) == 0
	boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: n.id, Address: raft.ServerAddress(advertise)}}}
	seeded, err := n.openSeed(exists, snaps, trans, boot, alone)
	if err != nil {
		return abort(err)
	}
	if !exists && alone {
		if !seeded {
			if err := raft.BootstrapCluster(rc, n.wal, n.wal, snaps, trans, boot); err != nil {
				return abort(fmt.Errorf("consensus: bootstrapping: %w", err))
			}
		}
		exists = true
		n.log.Info("bootstrapped a one-server cluster", "raft", advertise, "seeded", seeded)
	}
	r, err := raft.NewRaft(rc, n.fsm, n.wal, n.wal, snaps, trans)
	if err != nil {
		return abort(fmt.Errorf("consensus: starting raft: %w", err))
	}
	n.raft = r
	n.cluster = c

	local.State = exists
	c.members = newMembers(cfg.NodeID, cfg.ClusterID, local, n.log)
	mc, err := cfg.memberlistConfig(c.members, n.log)
	if err == nil {
		if h := cfg.AdvertiseHost; h != "" {
			// Memberlist advertises an IP: resolve a name once.
			mc.AdvertiseAddr = h
			if net.ParseIP(h) == nil {
				var ips []net.IP
				if ips, err = net.LookupIP(h); err == nil && len(ips) > 0 {
					mc.AdvertiseAddr = ips[0].String()
				} else if err == nil {
					err = fmt.Errorf("AdvertiseHost %s has no address", h)
				}
			}
		}
	}
	if err == nil {
		c.ml, err = memberlist.Create(mc)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("consensus: gossip on PeerAddr %s: %w", cfg.PeerAddr, err), n.Close())
	}
	// LocalNode's fields change under memberlist's lock: copy the address
	// before anything else runs.
	c.gossipAddr = c.ml.LocalNode().Address()

	// Leader changes seen by a follower wake proposals waiting for one.
	obs := make(chan raft.Observation, 16)
	c.observer = raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(c.observer)
	n.wg.Add(3)
	go n.observeLeader(obs)
	go n.monitorLeadership(250 * time.Millisecond)
	go n.joinLoop()
	if !exists {
		n.wg.Add(1)
		go n.bootstrapLoop()
	}
	n.log.Info("consensus replica started", "raft", advertise, "gossip", c.gossipAddr,
		"cluster", cfg.ClusterID, "bootstrap_expect", cfg.BootstrapExpect, "has_state", exists)
	return n, nil
}

// observeLeader turns raft's leader observations into leaderChanged.
func (n *Node) observeLeader(obs <-chan raft.Observation) {
	defer n.wg.Done()
	for {
		select {
		case <-obs:
			n.notifyLeaderChanged()
		case <-n.stop:
			return
		}
	}
}

func (n *Node) notifyLeaderChanged() {
	n.leaderMu.Lock()
	close(n.leaderChanged)
	n.leaderChanged = make(chan struct{})
	n.leaderMu.Unlock()
}

// gossipAddr returns the address memberlist advertises for this node.
func (n *Node) gossipAddr() string { return n.cluster.gossipAddr }

// publishMeta changes this node's gossip metadata and tells memberlist.
func (n *Node) publishMeta(update func(*gossipMeta)) {
	if n.cluster.members.setLocal(update) {
		if err := n.cluster.ml.UpdateNode(time.Second); err != nil {
			n.log.Warn("gossip: updating metadata", "error", err)
		}
	}
}

// hasRaftState reports whether this node has a log or a snapshot.
func (n *Node) hasRaftState() bool { return n.raft.LastIndex() > 0 }

// bootstrapLoop runs on a replica that started without Raft state and
// BootstrapExpect > 1, until it has state: by bootstrapping with its peers
// (bootstrapDecision) or by being added by an existing cluster's leader.
func (n *Node) bootstrapLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var lastLog time.Time
	var lastWait string
	for {
		if n.hasRaftState() {
			n.publishMeta(func(m *gossipMeta) { m.State, m.Boot = true, "" })
			n.log.Info("joined the cluster", "revision", n.AppliedIndex())
			return
		}
		view := n.cluster.members.snapshot()
		view[n.cfg.NodeID] = peer{id: n.cfg.NodeID, meta: n.cluster.members.localMeta(), alive: true}
		boot, conf, waiting := bootstrapDecision(n.cfg.NodeID, view, n.cfg.BootstrapExpect)
		if n.cfg.BootstrapExpect == 1 {
			// With Join and no expectation: join an existing cluster,
			// never found one (a second one-node cluster under the
			// same id would be dangerous to merge).
			boot, conf, waiting = "", nil, "joining an existing cluster: waiting for its leader to add this node"
		}
		n.publishMeta(func(m *gossipMeta) { m.Boot = boot })
		if conf != nil {
			err := n.raft.BootstrapCluster(*conf).Error()
			switch {
			case err == nil:
				n.log.Info("bootstrapped the cluster", "servers", serverIDs(conf.Servers))
				n.publishMeta(func(m *gossipMeta) { m.State, m.Boot = true, "" })
				return
			case errors.Is(err, raft.ErrCantBootstrap):
				// The leader's log reached us first: same configuration.
			default:
				n.log.Error("bootstrapping", "error", err)
			}
		} else if waiting != lastWait || time.Since(lastLog) >= 5*time.Second {
			n.log.Info("waiting to bootstrap", "expect", n.cfg.BootstrapExpect, "reason", waiting)
			lastLog, lastWait = time.Now(), waiting
		}
		select {
		case <-tick.C:
		case <-n.stop:
			return
		}
	}
}

func serverIDs(ss []raft.Server) string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = string(s.ID)
	}
	return strings.Join(ids, ",")
}

// joinLoop joins the gossip of cfg.Join, retrying until a peer answers, and
// again whenever this node sees fewer live replicas than the Raft
// configuration lists (a partition that outlasted memberlist's memory).
func (n *Node) joinLoop() {
	defer n.wg.Done()
	if len(n.cfg.Join) == 0 {
		return
	}
	backoff := 100 * time.Millisecond
	joined := false
	var lastLog time.Time
	for {
		want := 2
		if f := n.raft.GetConfiguration(); f.Error() == nil {
			want = max(want, len(f.Configuration().Servers))
		}
		if !joined || n.cluster.ml.NumMembers() < want {
			k, err := n.cluster.ml.Join(n.cfg.Join)
			switch {
			case k > 0 && n.cluster.ml.NumMembers() > 1:
				if !joined {
					n.log.Info("joined gossip", "via", strings.Join(n.cfg.Join, ","), "members", n.cluster.ml.NumMembers())
				}
				joined, backoff = true, 100*time.Millisecond
			case time.Since(lastLog) >= 10*time.Second:
				n.log.Warn("joining gossip failed; retrying", "join", strings.Join(n.cfg.Join, ","), "error", err)
				lastLog = time.Now()
			}
		}
		wait := 10 * time.Second
		if !joined {
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		}
		select {
		case <-time.After(wait):
		case <-n.stop:
			return
		}
	}
}

// handleForward answers a request forwarded by a follower.
func (n *Node) handleForward(ctx context.Context, kind byte, payload []byte) forwardResponse {
	switch kind {
	case kindPropose:
		if n.raft.State() != raft.Leader {
			return forwardResponse{status: statusNotLeader}
		}
		timeout := defaultProposeTimeout
		if deadline, ok := ctx.Deadline(); ok {
			timeout = time.Until(deadline)
		}
		f := n.raft.Apply(payload, timeout)
		err := n.await(ctx, f)
		switch {
		case err == nil:
			return forwardResponse{status: statusOK, index: f.Index()}
		case errors.Is(err, raft.ErrNotLeader):
			return forwardResponse{status: statusNotLeader}
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return forwardResponse{status: statusNotQueued, msg: err.Error()}
		default:
			return forwardResponse{status: statusUnknown, msg: err.Error()}
		}
	case kindReadIndex:
		idx, err := n.leaderReadIndex(ctx)
		switch {
		case err == nil:
			return forwardResponse{status: statusOK, index: idx}
		case errors.Is(err, ErrNotLeader):
			return forwardResponse{status: statusNotLeader}
		default:
			return forwardResponse{status: statusFailed, msg: err.Error()}
		}
	case kindDeliver:
		if n.raft.State() != raft.Leader {
			return forwardResponse{status: statusNotLeader}
		}
		if n.cfg.Deliver == nil {
			return forwardResponse{status: statusFailed, msg: "nothing takes messages"}
		}
		if err := n.cfg.Deliver(ctx, payload); err != nil {
			return forwardResponse{status: statusFailed, msg: err.Error()}
		}
		return forwardResponse{status: statusOK}
	default:
		return forwardResponse{status: statusFailed, msg: "unknown request " + strconv.Itoa(int(kind))}
	}
}

// ErrDeliverRefused wraps what the leader's Config.Deliver answered.
var ErrDeliverRefused = errors.New("consensus: the leader refused the message")

// Deliver hands payload to the leader's Config.Deliver, this node's own
// when it leads, and returns the ID of the leader that took it. Nothing is
// logged: a message is lost with the leader that took it, so a sender
// notices a new leader (the ID changes) and sends again what it must hold.
// During an election Deliver waits for a leader, bounded by ctx (or 10 s
// without a deadline). An error of the leader's Deliver comes back
// wrapping ErrDeliverRefused.
func (n *Node) Deliver(ctx context.Context, payload []byte) (string, error) {
	if n.closing.Load() {
		return "", ErrClosed
	}
	if n.cluster == nil {
		return n.cfg.NodeID, n.deliverLocal(ctx, payload)
	}
	var backoff time.Duration
	waitSince := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if n.raft.State() == raft.Leader {
			return n.cfg.NodeID, n.deliverLocal(ctx, payload)
		}
		if addr, id := n.raft.LeaderWithID(); addr != "" {
			r, err := n.cluster.fwd.call(ctx, string(addr), kindDeliver, payload)
			switch {
			case errors.Is(err, ErrClosed):
				return "", ErrClosed
			case err != nil && ctx.Err() != nil:
				return "", ctx.Err()
			case err == nil && r.status == statusOK:
				return string(id), nil
			case err == nil && r.status == statusFailed:
				return string(id), fmt.Errorf("%w: %s", ErrDeliverRefused, r.msg)
			}
			// Not the leader any more, or not reached: ask again.
		}
		backoff = min(max(2*backoff, 10*time.Millisecond), 200*time.Millisecond)
		if err := n.waitForLeader(ctx, backoff, waitSince); err != nil {
			return "", err
		}
	}
}

// deliverLocal runs Config.Deliver on this node, the leader.
func (n *Node) deliverLocal(ctx context.Context, payload []byte) error {
	if n.cfg.Deliver == nil {
		return fmt.Errorf("%w: nothing takes messages", ErrDeliverRefused)
	}
	if err := n.cfg.Deliver(ctx, payload); err != nil {
		return fmt.Errorf("%w: %w", ErrDeliverRefused, err)
	}
	return nil
}

// ReadIndex returns a log index R such that every write acknowledged by any
// replica (a Propose that returned without error) before ReadIndex was
// called has index <= R, and R is committed. A read served from this
// replica's FSM once it has applied R (WaitApplied, or the store's
// WaitForRevision(R)) is linearizable.
//
// The leader confirms it is still the leader (a heartbeat round with a
// quorum, raft's VerifyLeader) and answers the last command index its FSM
// has applied, once it has applied everything committed by earlier leaders;
// a follower asks the leader over the forward protocol. During an election
// ReadIndex waits for a leader, bounded by ctx. On a single node it returns
// AppliedIndex.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if n.closing.Load() {
		return 0, ErrClosed
	}
	if n.cluster == nil {
		return n.fsm.applied.Load(), nil
	}
	var backoff time.Duration
	waitSince := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if n.raft.State() == raft.Leader {
			idx, err := n.leaderReadIndex(ctx)
			if !errors.Is(err, ErrNotLeader) {
				return idx, err
			}
		} else if addr, _ := n.raft.LeaderWithID(); addr != "" {
			r, err := n.cluster.fwd.call(ctx, string(addr), kindReadIndex, nil)
			switch {
			case errors.Is(err, ErrClosed):
				return 0, ErrClosed
			case err != nil && ctx.Err() != nil:
				return 0, ctx.Err()
			case err == nil && r.status == statusOK:
				return r.index, nil
			case err == nil && r.status == statusFailed:
				n.log.Debug("read index refused by the leader; retrying", "leader", addr, "error", r.msg)
			}
		}
		backoff = min(max(2*backoff, 10*time.Millisecond), 200*time.Millisecond)
		if err := n.waitForLeader(ctx, backoff, waitSince); err != nil {
			return 0, err
		}
	}
}

// leaderReadIndex is ReadIndex on the leader.
func (n *Node) leaderReadIndex(ctx context.Context) (uint64, error) {
	n.leaderMu.Lock()
	t := n.term
	n.leaderMu.Unlock()
	if t == nil {
		return 0, ErrNotLeader
	}
	select {
	case <-t.ready:
	case <-t.ctx.Done():
		return 0, ErrNotLeader
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	idx := n.fsm.applied.Load()
	if err := n.await(ctx, n.raft.VerifyLeader()); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return 0, ErrNotLeader
		case errors.Is(err, raft.ErrRaftShutdown):
			return 0, ErrClosed
		}
		return 0, err
	}
	return idx, nil
}

// WaitReady waits until this replica is part of a cluster with a leader and
// has applied everything committed before the call (ReadIndex, then
// WaitApplied), so its store can serve. While a new cluster waits for
// BootstrapExpect replicas this blocks (the node logs what it waits for).
// On a single node it returns at once: Open already waited.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		idx, err := n.ReadIndex(ctx)
		if err == nil {
			return n.WaitApplied(ctx, idx)
		}
		if !errors.Is(err, ErrNoLeader) || ctx.Err() != nil {
			return err
		}
	}
}

// Member is one replica as this node sees it: from the Raft configuration
// (Voter) and from gossip (Alive, Meta).
type Member struct {
	ID string
	// RaftAddr is the address in the Raft configuration, or the gossiped
	// one for a member not (yet) in it.
	RaftAddr string
	// Meta is the member's Config.Meta and Features its Config.Features
	// (nil if gossip has not seen it).
	Meta     []byte
	Features []string
	Voter    bool // a voter in the latest Raft configuration
	Leader   bool // the leader as this node knows it
	Alive    bool // alive to gossip (this node: always)
}

// Members returns the replicas this node knows, sorted by ID: the servers
// of the latest Raft configuration and the live members of gossip. On a
// single node it is just this node.
func (n *Node) Members() []Member {
	_, leaderID := n.raft.LeaderWithID()
	byID := map[string]*Member{}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			byID[string(s.ID)] = &Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		}
	}
	if n.cluster != nil {
		for id, p := range n.cluster.members.snapshot() {
			m := byID[id]
			if m == nil {
				if !p.alive {
					continue
				}
				m = &Member{ID: id, RaftAddr: p.meta.Raft}
				byID[id] = m
			}
			m.Meta, m.Features, m.Alive = p.meta.App, p.meta.Features, p.alive
		}
	}
	self := byID[n.cfg.NodeID]
	if self == nil {
		self = &Member{ID: n.cfg.NodeID}
		byID[n.cfg.NodeID] = self
	}
	self.Alive, self.Meta, self.Features = true, n.cfg.Meta, n.cfg.Features
	if n.cluster != nil {
		self.RaftAddr = n.cluster.raftAddr
	}
	out := make([]Member, 0, len(byID))
	for _, m := range byID {
		m.Leader = m.ID == string(leaderID)
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// VotersHave reports whether every voter of the Raft configuration gossips
// feature (Config.Features), this node included: false while one is not
// seen in gossip, or runs a release without it. A single node has its own
// features.
func (n *Node) VotersHave(feature string) bool {
	voters := 0
	for _, m := range n.Members() {
		if !m.Voter && n.cluster != nil {
			continue
		}
		voters++
		if !slices.Contains(m.Features, feature) {
			return false
		}
	}
	return voters > 0
}

// Leader returns the leader as this node knows it, and false while there
// is none (an election, or a cluster not bootstrapped yet).
func (n *Node) Leader() (Member, bool) {
	for _, m := range n.Members() {
		if m.Leader {
			return m, true
		}
	}
	return Member{}, false
}
