package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// leaderTerm is one uninterrupted leadership of this node (one raft term).
type leaderTerm struct {
	raftTerm uint64
	// ready is closed once everything committed before this term has been
	// applied here (a barrier of this term went through the FSM).
	ready chan struct{}
	// ctx is cancelled when leadership is lost or the node closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// monitorLeadership follows raft's leadership signal and runs leaderLoop
// for each term this node leads (nomad's monitorLeadership). Raft's signal
// keeps only its latest value, so with poll > 0 the loop also checks
// raft's state and term every poll, to end a term whose loss was coalesced
// away.
func (n *Node) monitorLeadership(poll time.Duration) {
	defer n.wg.Done()
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	var term *leaderTerm
	end := func() {
		if term != nil {
			term.cancel()
			n.setTerm(nil)
			n.log.Info("lost leadership", "term", term.raftTerm)
			term = nil
		}
	}
	check := func() {
		leading := n.raft.State() == raft.Leader
		current := n.raft.CurrentTerm()
		if term != nil && (!leading || current != term.raftTerm) {
			end()
		}
		if leading && term == nil {
			ctx, cancel := context.WithCancel(n.ctx)
			term = &leaderTerm{raftTerm: current, ready: make(chan struct{}), ctx: ctx, cancel: cancel}
			n.setTerm(term)
			n.wg.Add(1)
			go n.leaderLoop(term)
		}
	}
	for {
		select {
		case <-n.raft.LeaderCh():
			check()
		case <-tick:
			check()
		case <-n.stop:
			end()
			return
		}
	}
}

func (n *Node) setTerm(t *leaderTerm) {
	n.leaderMu.Lock()
	n.term = t
	close(n.leaderChanged)
	n.leaderChanged = make(chan struct{})
	n.leaderMu.Unlock()
}

// leaderLoop is the work of the leader for one term: first a barrier, so
// that this node has applied all that earlier leaders committed before it
// serves reads or runs leader work, then, in a cluster, keeping the Raft
// configuration in line with gossip until the term ends.
func (n *Node) leaderLoop(t *leaderTerm) {
	defer n.wg.Done()
	for {
		err := n.await(t.ctx, n.raft.Barrier(0))
		if err == nil {
			break
		}
		if t.ctx.Err() != nil || n.closing.Load() {
			return
		}
		n.log.Warn("leader barrier failed; retrying", "error", err)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-t.ctx.Done():
			return
		}
	}
	close(t.ready)
	n.notifyLeaderChanged()
	n.log.Info("leading", "term", t.raftTerm, "revision", n.AppliedIndex())
	if n.cluster == nil {
		return
	}
	dead := map[raft.ServerID]time.Time{}
	tick := time.NewTicker(reconcileInterval)
	defer tick.Stop()
	for {
		n.reconcile(t, dead)
		select {
		case <-tick.C:
		case <-n.cluster.members.notify:
		case <-t.ctx.Done():
			return
		}
	}
}

// reconcile makes the Raft configuration follow gossip: every live member
// of this cluster is a voter at the Raft address it gossips; a server that
// gossip has not seen alive for DeadServerGrace (counted from when this
// leader first saw it missing) is removed. dead carries those first
// sightings across calls of one term. Only the leader changes membership;
// gossip only detects (nomad's serf.go / leader.go split).
func (n *Node) reconcile(t *leaderTerm, dead map[raft.ServerID]time.Time) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	servers := map[raft.ServerID]raft.Server{}
	for _, s := range f.Configuration().Servers {
		servers[s.ID] = s
	}
	view := n.cluster.members.snapshot()
	view[n.cfg.NodeID] = peer{id: n.cfg.NodeID, meta: n.cluster.members.localMeta(), alive: true}
	ids := make([]string, 0, len(view))
	for id := range view {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := view[id]
		if !p.alive || p.meta.Raft == "" {
			continue
		}
		s, ok := servers[raft.ServerID(id)]
		if ok && s.Suffrage == raft.Voter && string(s.Address) == p.meta.Raft {
			continue
		}
		if t.ctx.Err() != nil {
			return
		}
		if ok {
			n.log.Info("updating voter", "peer", id, "raft", p.meta.Raft, "was", string(s.Address))
		} else {
			n.log.Info("adding voter", "peer", id, "raft", p.meta.Raft)
		}
		if err := n.await(t.ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(p.meta.Raft), 0, 10*time.Second)); err != nil {
			n.log.Warn("adding voter failed", "peer", id, "error", err)
			return
		}
	}
	now := time.Now()
	for id := range servers {
		if id == n.id {
			continue
		}
		if p, ok := view[string(id)]; ok && p.alive {
			delete(dead, id)
			continue
		}
		since, seen := dead[id]
		if !seen {
			dead[id] = now
			n.log.Warn("server not alive in gossip", "peer", string(id), "grace", n.cfg.DeadServerGrace)
			continue
		}
		if now.Sub(since) < n.cfg.DeadServerGrace || t.ctx.Err() != nil {
			continue
		}
		n.log.Warn("removing dead server", "peer", string(id), "dead_for", now.Sub(since).Round(time.Second))
		if err := n.await(t.ctx, n.raft.RemoveServer(id, 0, 10*time.Second)); err != nil {
			n.log.Warn("removing server failed", "peer", string(id), "error", err)
			return
		}
		delete(dead, id)
	}
}

// IsLeader reports whether this node is the leader and has applied
// everything committed before its term (so its state is current). It may
// be stale as soon as it returns: for leader-only work use RunAsLeader.
func (n *Node) IsLeader() bool {
	n.leaderMu.Lock()
	t := n.term
	n.leaderMu.Unlock()
	if t == nil || t.ctx.Err() != nil {
		return false
	}
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// leaderRetryDelay is how long RunAsLeader waits before running fn again
// after it failed while this node still leads.
const leaderRetryDelay = time.Second

// RunAsLeader runs fn whenever this node leads, until ctx is done, and
// returns nil then (ErrClosed if the node closes first). Each time this
// node becomes leader and has applied everything committed before, fn runs
// with a context that is cancelled when leadership is lost (or ctx ends);
// fn must then return promptly. If fn returns an error while still
// leader, it is logged and fn runs again after a second; if it returns nil,
// it runs again only on the next leadership.
//
// Leadership is not a lock: for a short time after a partition two nodes
// may both run fn (the old leader learns of its loss only after
// LeaderLeaseTimeout). Leader work must write through Propose with
// preconditions (the store's ExpectRevision) and be idempotent, as kube
// controllers are.
func (n *Node) RunAsLeader(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		t, err := n.waitLeading(ctx)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return ErrClosed
			}
			return nil
		}
		for {
			runCtx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(t.ctx, cancel)
			err := fn(runCtx)
			stop()
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil || t.ctx.Err() != nil {
				break
			}
			n.log.Error("leader work failed; retrying", "error", err)
			select {
			case <-time.After(leaderRetryDelay):
			case <-t.ctx.Done():
			case <-ctx.Done():
				return nil
			}
			if t.ctx.Err() != nil {
				break
			}
		}
		// Wait for this term to end before waiting for the next.
		select {
		case <-t.ctx.Done():
		case <-ctx.Done():
			return nil
		}
	}
}

// TransferLeadership hands leadership from this node, which must lead,
// to the voter id (raft's LeadershipTransferToServer): id is brought up to
// date, then told to start an election at once. It returns once the
// transfer is done or failed; ErrNotLeader on another node.
func (n *Node) TransferLeadership(id string) error {
	if n.cluster == nil || n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return n.raft.LeadershipTransferToServer(s.ID, s.Address).Error()
		}
	}
	return fmt.Errorf("consensus: %s is not a voter", id)
}
