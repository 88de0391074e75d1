package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"

	"github.com/canopy-dev/canopy/relay/store"
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrNotLeader: this node cannot accept writes; the command was not
	// appended to the log. Propose on a replica of a cluster forwards to
	// the leader instead of returning it.
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrOutcomeUnknown: the command may or may not be applied, now or
	// later (it reached the leader, or the log, and the answer was lost).
	// It is never retried by this package. A caller must not blindly
	// propose it again unless the command is idempotent or guarded by a
	// precondition (the store's ExpectRevision/ExpectUID, a create that
	// fails with ErrExists); otherwise it reads the state back to learn
	// what happened, as after a kube API timeout.
	// It is the store's ErrOutcomeUnknown, which the store's own group
	// commit returns too.
	ErrOutcomeUnknown = store.ErrOutcomeUnknown
	// ErrLeadershipLost: leadership was lost while the command was in
	// flight; it may or may not be applied. errors.Is(ErrLeadershipLost,
	// ErrOutcomeUnknown) is true.
	ErrLeadershipLost error = outcomeUnknownError("consensus: leadership lost, outcome unknown")
	// ErrNoLeader: no leader was reachable before ctx ended (or, for a ctx
	// without deadline, within 10 s); the command was not appended. The
	// error also matches ctx.Err() (or context.DeadlineExceeded).
	ErrNoLeader = errors.New("consensus: no leader")
	// ErrClosed: the node is closed. For a command in flight when Close
	// was called the outcome is unknown: it applies on reopen if it reached
	// the log.
	ErrClosed = errors.New("consensus: closed")
)

// outcomeUnknownError is a sentinel that also matches ErrOutcomeUnknown.
type outcomeUnknownError string

func (e outcomeUnknownError) Error() string        { return string(e) }
func (e outcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Defaults of the snapshot settings of Config (the root's
// --snapshot-threshold, --snapshot-interval and --trailing-logs).
const (
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 30 * time.Second
	DefaultTrailingLogs      = 10240
	// MaxRaftMultiplier bounds Config.RaftMultiplier.
	MaxRaftMultiplier = 10
	// MinSnapshotInterval is the shortest SnapshotInterval raft accepts.
	MinSnapshotInterval = 5 * time.Millisecond
)

const (
	defaultReadyTimeout = 10 * time.Second
	// defaultProposeTimeout bounds how long Propose waits to queue a command
	// when ctx has no deadline.
	defaultProposeTimeout = 10 * time.Second
	snapshotsRetained     = 2

	defaultClusterID       = "canopy"
	defaultDeadServerGrace = 30 * time.Second
	// reconcileInterval is how often the leader compares gossip with the
	// Raft configuration (it also does on every gossip change).
	reconcileInterval = time.Second
	// maxClusterIDLen keeps the gossip label and metadata small.
	maxClusterIDLen = 128
)

// Config configures a Node. Only Dir and NodeID are required; the zero value
// of every other field selects the default given in its comment.
//
// Without RaftAddr the node is a single voter on an in-memory transport
// (the default, and what every relay below the root uses). With RaftAddr
// (and PeerAddr and TLS) it is one replica of a cluster: see docs/ha.md.
type Config struct {
	// Dir holds the raft state: Dir/wal (log and stable store) and
	// Dir/snapshots. It is created if missing. One Node at a time may use
	// a Dir: raft-wal's metadata database waits, without a timeout, for the
	// file lock held by another Node on the same Dir.
	Dir string
	// NodeID is the raft ServerID and the gossip node name: the relay
	// name. It must be unique in a cluster and stable across restarts.
	NodeID string
	// SnapshotThreshold is how many log entries since the last snapshot
	// make raft take a new one (default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks SnapshotThreshold; each
	// check waits a random time between it and twice it (default 30s).
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries are kept in the log after a
	// snapshot, so a briefly lagging follower can catch up without a full
	// snapshot (default 10240).
	TrailingLogs uint64
	// RaftMultiplier scales raft's timers of a cluster replica (heartbeat,
	// election and leader lease timeouts, 1 s each by default), as
	// Consul's raft_multiplier does: 1 (the default) suits replicas with
	// cores of their own; a higher value rides out replicas starved of CPU
	// (a busy shared host) at the cost of a slower failover. At most 10.
	RaftMultiplier int
	// ReadyTimeout bounds how long Open of a single node waits for
	// leadership and for the FSM to apply the log found on disk (default
	// 10s). Open of a cluster replica does not wait: see WaitReady.
	ReadyTimeout time.Duration
	// Logger receives the node's, raft's and memberlist's logs (default
	// slog.Default()). Raft's Info messages are logged at Debug; see
	// newHCLogger.
	Logger *slog.Logger

	// RaftAddr (host:port), when set, makes this node a cluster replica:
	// it listens there (TCP) for Raft and for requests forwarded by
	// followers, all over mutually authenticated TLS. Port 0 picks a free
	// port. The address is advertised to peers as is, unless
	// AdvertiseHost is set; so its host must then be one peers can reach.
	RaftAddr string
	// TLS is required with RaftAddr: this node's certificate (presented
	// as server and as client) and the CA that peers' certificates must
	// chain to (RootCAs or ClientCAs; either serves both sides). See
	// PeerTLSConfig.
	TLS *tls.Config
	// PeerAddr (host:port) is where memberlist gossips (UDP and TCP);
	// required with RaftAddr. Port 0 picks a free port.
	PeerAddr string
	// AdvertiseHost, when set, is the host (name or IP) peers use to reach
	// this node's RaftAddr and PeerAddr ports, for a node that binds to
	// all interfaces. Gossip advertises its first IP; PeerAddr then needs a
	// fixed port.
	AdvertiseHost string
	// Join lists gossip addresses (host:port) of other replicas, any one
	// of which suffices. Joining is retried in the background until a
	// peer answers, and again whenever fewer replicas are seen than the
	// Raft configuration has.
	Join []string
	// BootstrapExpect is how many replicas form a new cluster (default 1).
	// A node without Raft state waits until that many replicas without
	// state see each other, then they bootstrap one configuration
	// together; a node with state never bootstraps again. With the
	// default 1, a node without state and without Join bootstraps alone
	// at once, and a node with Join never bootstraps: it joins an
	// existing cluster and waits for its leader to add it.
	BootstrapExpect int
	// ClusterID names the cluster (default "canopy"). Gossip is labelled
	// with it: packets of another cluster are dropped, and members that
	// gossip another id are refused (logged), never added to Raft.
	ClusterID string
	// GossipKey, when set (16, 24 or 32 bytes), encrypts gossip with
	// AES-GCM (memberlist's SecretKey). Raft and forwarded requests are
	// always TLS.
	GossipKey []byte
	// Meta is gossiped opaquely with this node (the root puts its API URL
	// there) and shown by Members. Together with the rest of the node's
	// gossip metadata it must fit memberlist's 512 bytes.
	Meta []byte
	// Features names what this node's release can read in the log beyond
	// what every release could (VotersHave): a proposer that writes a
	// command an older release cannot apply waits until every voter
	// gossips the feature, so that no replica diverges during an upgrade.
	// Gossiped with Meta.
	Features []string
	// DeadServerGrace is how long a server must be dead to gossip, as seen
	// by the leader, before the leader removes it from the Raft
	// configuration (default 30s).
	DeadServerGrace time.Duration
	// Deliver, when set, takes on the leader what replicas send it with
	// Node.Deliver: state the leader needs and the log must not hold (the
	// root's children's reports, DESIGN.md section 2). It runs on the
	// leader only, for a message of this node or one forwarded by a
	// follower; an error goes back to the sender.
	Deliver func(ctx context.Context, payload []byte) error

	// tune adjusts raft's and memberlist's timing (tests).
	tune *tuning
}

// tuning is a test hook: it runs on the derived configurations.
type tuning struct {
	raft       func(*raft.Config)
	memberlist func(*memberlist.Config)
	// walSegmentSize, when set, replaces raft-wal's 64 MiB segments.
	// raft-wal serves compacted entries until their whole segment is
	// deleted, so only small segments make compaction visible in a test.
	walSegmentSize int
	// vfs, when set, wraps the file system raft-wal writes segments with.
	vfs func(types.VFS) types.VFS
}

// complete returns cfg with defaults filled in, or an error naming the
// missing required fields.
func (cfg Config) complete() (Config, error) {
	var errs []error
	if cfg.Dir == "" {
		errs = append(errs, errors.New("consensus: Config.Dir is required"))
	}
	if cfg.NodeID == "" {
		errs = append(errs, errors.New("consensus: Config.NodeID is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = DefaultSnapshotInterval
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = DefaultTrailingLogs
	}
	if cfg.RaftMultiplier == 0 {
		cfg.RaftMultiplier = 1
	}
	if cfg.RaftMultiplier < 1 || cfg.RaftMultiplier > MaxRaftMultiplier {
		errs = append(errs, fmt.Errorf("consensus: RaftMultiplier %d is not from 1 to %d", cfg.RaftMultiplier, MaxRaftMultiplier))
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = defaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RaftAddr == "" {
		errs = nil
		if cfg.PeerAddr != "" {
			errs = append(errs, errors.New("consensus: PeerAddr needs RaftAddr"))
		}
		if len(cfg.Join) > 0 {
			errs = append(errs, errors.New("consensus: Join needs RaftAddr and PeerAddr"))
		}
		if cfg.BootstrapExpect > 1 {
			errs = append(errs, fmt.Errorf("consensus: BootstrapExpect %d needs RaftAddr and PeerAddr", cfg.BootstrapExpect))
		}
		return cfg, errors.Join(errs...)
	}
	if cfg.PeerAddr == "" {
		errs = append(errs, errors.New("consensus: RaftAddr needs PeerAddr"))
	}
	if cfg.TLS == nil {
		errs = append(errs, errors.New("consensus: RaftAddr needs TLS"))
	}
	if cfg.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("consensus: BootstrapExpect %d is negative", cfg.BootstrapExpect))
	}
	if cfg.BootstrapExpect == 0 {
		cfg.BootstrapExpect = 1
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = defaultClusterID
	}
	if len(cfg.ClusterID) > maxClusterIDLen {
		errs = append(errs, fmt.Errorf("consensus: ClusterID longer than %d bytes", maxClusterIDLen))
	}
	switch len(cfg.GossipKey) {
	case 0, 16, 24, 32:
	default:
		errs = append(errs, fmt.Errorf("consensus: GossipKey of %d bytes, want 16, 24 or 32", len(cfg.GossipKey)))
	}
	if cfg.DeadServerGrace == 0 {
		cfg.DeadServerGrace = defaultDeadServerGrace
	}
	if _, port, err := splitHostPort(cfg.PeerAddr); err == nil && port == 0 && cfg.AdvertiseHost != "" {
		errs = append(errs, errors.New("consensus: PeerAddr needs a fixed port with AdvertiseHost"))
	}
	for _, a := range []struct{ name, addr string }{{"RaftAddr", cfg.RaftAddr}, {"PeerAddr", cfg.PeerAddr}} {
		if a.addr == "" {
			continue
		}
		host, _, err := splitHostPort(a.addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("consensus: %s: %w", a.name, err))
		} else if cfg.AdvertiseHost == "" && (host == "" || net.ParseIP(host).IsUnspecified()) {
			errs = append(errs, fmt.Errorf("consensus: %s %q binds all interfaces: set AdvertiseHost to a host peers can reach", a.name, a.addr))
		}
	}
	return cfg, errors.Join(errs...)
}

// raftConfig translates cfg into raft's configuration.
func (cfg Config) raftConfig(logger *slog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = newHCLogger(logger, "raft").(*hclogAdapter).quieting(cfg.quietRaftMessages()...)

	if cfg.RaftAddr == "" {
		// A single voter has no network to ride out, so the timeouts only
		// decide how long a restarted node stays a follower before
		// electing itself: a random time between HeartbeatTimeout and
		// twice that. 100 ms makes Open ready in about 0.1–0.2 s rather
		// than raft's default 1–2 s. A cluster keeps raft's defaults
		// (1 s): a follower starts an election 1–2 s after the leader's
		// last heartbeat.
		rc.HeartbeatTimeout = 100 * time.Millisecond
		rc.ElectionTimeout = 100 * time.Millisecond
		rc.LeaderLeaseTimeout = 100 * time.Millisecond
	} else if m := time.Duration(max(cfg.RaftMultiplier, 1)); m > 1 {
		rc.HeartbeatTimeout *= m
		rc.ElectionTimeout *= m
		rc.LeaderLeaseTimeout *= m
	}

	// Group commit: commands queued while the log is busy (up to
	// MaxAppendEntries, raft's maximum) are appended with one fsync and
	// handed to the FSM as one batch.
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 1024

	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	if cfg.tune != nil && cfg.tune.raft != nil {
		cfg.tune.raft(rc)
	}
	return rc
}

// quietRaftMessages are raft's messages that this package logs at Debug:
//   - a single voter's election at every start ("heartbeat timeout
//     reached, starting election"): with no other voter to hear from, it
//     is how it becomes leader, not news. A cluster replica keeps it at
//     Warn, where it tells that the leader went silent.
//   - a failed append ("failed to commit logs", "failed to append to
//     logs"), which raft repeats at every attempt: walStore logs each
//     new cause once, and once when appends succeed again.
func (cfg Config) quietRaftMessages() []string {
	msgs := []string{"failed to commit logs", "failed to append to logs"}
	if cfg.RaftAddr == "" {
		msgs = append(msgs, "heartbeat timeout reached, starting election")
	}
	return msgs
}

// Node is one replica of the root's replicated log driving a store.FSM. It
// implements store.Log. All methods are safe for concurrent use.
type Node struct {
	cfg  Config
	log  *slog.Logger
	id   raft.ServerID
	raft *raft.Raft
	fsm  *fsmAdapter
	wal  *walStore

	// Cluster mode only (cfg.RaftAddr set); nil otherwise.
	cluster *clusterParts

	// stop is closed by Close: background loops end. ctx is cancelled
	// with it.
	stop   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	leaderMu sync.Mutex
	// term is the current leadership of this node, nil when it is not
	// the leader.
	term *leaderTerm
	// leaderChanged is closed (and replaced) when this node's view of
	// the leader changes.
	leaderChanged chan struct{}

	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error
	// done is closed once raft has shut down: a future not answered by
	// then never will be.
	done chan struct{}
}

// clusterParts are the parts of a cluster replica.
type clusterParts struct {
	raftAddr   string // advertised
	gossipAddr string // advertised
	mux        *muxLayer
	fwd        *forwardClient
	fsrv       *forwardServer
	ml         *memberlist.Memberlist
	members    *members
	observer   *raft.Observer
}

var _ store.Log = (*Node)(nil)

// Open starts the node whose state lives in cfg.Dir and drives fsm, which
// must be empty.
//
// A single node (no RaftAddr) bootstraps a single-voter cluster on first
// start; Open returns once it is leader and fsm has applied every entry
// that was in the log (from the latest snapshot on), so the store is
// complete before it serves; it fails if that takes longer than
// cfg.ReadyTimeout.
//
// A cluster replica (RaftAddr set) starts listening, gossiping and joining,
// and returns without waiting for peers: writes wait for a leader (bounded
// by their context) and WaitReady waits until this replica has caught up.
func Open(cfg Config, fsm store.FSM) (*Node, error) {
	if fsm == nil {
		return nil, errors.New("consensus: nil FSM")
	}
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("relay", cfg.NodeID)

	walDir := filepath.Join(cfg.Dir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return nil, fmt.Errorf("consensus: %w", err)
	}
	// Both the snapshots and the log are checked before raft reads them: a
	// damaged one is refused (ErrDamaged), never skipped.
	snapIndex, err := checkSnapshots(filepath.Join(cfg.Dir, "snapshots"))
	if err != nil {
		return nil, err
	}
	wcfg := walConfig{dir: walDir, log: logger, snapshot: snapIndex}
	if cfg.tune != nil {
		wcfg.segmentSize, wcfg.vfs = cfg.tune.walSegmentSize, cfg.tune.vfs
	}
	wal, err := openWAL(wcfg)
	if err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, snapshotsRetained, newHCLogger(logger, "raft-snapshot"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("consensus: opening snapshots: %w", err), wal.Close())
	}
	exists, err := raft.HasExistingState(wal, wal, snaps)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("consensus: reading state: %w", err), wal.Close())
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, log: logger, id: raft.ServerID(cfg.NodeID), fsm: newFSMAdapter(fsm), wal: wal,
		stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		leaderChanged: make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.RaftAddr == "" {
		return n.openSingle(snaps, exists)
	}
	return n.openCluster(snaps, exists)
}

// openSingle starts a single voter on an in-memory transport.
func (n *Node) openSingle(snaps raft.SnapshotStore, exists bool) (*Node, error) {
	// Addresses on an in-memory transport are just names; using NodeID keeps
	// the address recorded in the configuration stable across restarts.
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(n.cfg.NodeID))
	rc := n.cfg.raftConfig(n.log)
	boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: addr}}}
	seeded, err := n.openSeed(exists, snaps, trans, boot, true)
	if err != nil {
		return nil, n.failOpen(err)
	}
	if !exists && !seeded {
		if err := raft.BootstrapCluster(rc, n.wal, n.wal, snaps, trans, boot); err != nil {
			return nil, n.failOpen(fmt.Errorf("consensus: bootstrapping: %w", err))
		}
	}
	r, err := raft.NewRaft(rc, n.fsm, n.wal, n.wal, snaps, trans)
	if err != nil {
		return nil, n.failOpen(fmt.Errorf("consensus: starting raft: %w", err))
	}
	n.raft = r
	n.wg.Add(1)
	go n.monitorLeadership(0)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ReadyTimeout)
	defer cancel()
	if _, err := n.waitLeading(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("consensus: not leader with the log applied after %s", n.cfg.ReadyTimeout), n.Close())
	}
	n.log.Info("consensus ready", "revision", n.AppliedIndex(), "took", time.Since(start).Round(time.Millisecond))
	return n, nil
}

// failOpen releases what Open acquired before raft started.
func (n *Node) failOpen(err error) error {
	n.cancel()
	return errors.Join(err, n.wal.Close())
}

// waitLeading waits until this node leads and has applied everything
// committed before its term, and returns that term.
func (n *Node) waitLeading(ctx context.Context) (*leaderTerm, error) {
	for {
		n.leaderMu.Lock()
		t, changed := n.term, n.leaderChanged
		n.leaderMu.Unlock()
		if t != nil {
			select {
			case <-t.ready:
				return t, nil
			case <-t.ctx.Done():
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-n.stop:
				return nil, ErrClosed
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-n.stop:
			return nil, ErrClosed
		}
	}
}

// Propose makes cmd durable (replicated to a quorum in a cluster), waits
// until this node's FSM has applied it, and returns what the FSM's Apply
// returned for it. cmd must not be modified after the call: the FSM may
// retain it.
//
// On a follower, Propose forwards cmd to the leader, which appends it and
// answers with its log index; Propose then waits for the local FSM to apply
// that index and returns the result this replica computed (the FSM is
// deterministic). While there is no leader (an election), Propose waits
// for one, bounded by ctx. A command is never sent twice: Propose retries
// only when the leader certainly did not append it (no connection, or the
// receiver was not the leader).
//
// Errors: ErrOutcomeUnknown (errors.Is) when the command may or may not be
// applied: the connection to the leader broke after sending, the leader
// lost leadership (ErrLeadershipLost), ctx ended after the command was
// queued (the error then also matches ctx.Err()), or the command committed
// but this replica could not apply it, or no longer holds its result,
// before ctx ended. See ErrOutcomeUnknown for what the caller should do.
// A bare ctx.Err() (or a deadline hit while queueing) means the command
// was not appended. ErrClosed after Close. When ctx has no deadline,
// queueing on the leader is bounded by 10 s.
func (n *Node) Propose(ctx context.Context, cmd []byte) (any, error) {
	if n.closing.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.cluster == nil {
		return n.proposeLocal(ctx, cmd)
	}
	var backoff time.Duration
	waitSince := time.Now()
	for {
		if n.raft.State() == raft.Leader {
			resp, err := n.proposeLocal(ctx, cmd)
			if !errors.Is(err, ErrNotLeader) {
				return resp, err
			}
		} else if addr, _ := n.raft.LeaderWithID(); addr != "" {
			resp, err, retry := n.proposeForward(ctx, string(addr), cmd)
			if !retry {
				return resp, err
			}
		}
		backoff = min(max(2*backoff, 10*time.Millisecond), 200*time.Millisecond)
		if err := n.waitForLeader(ctx, backoff, waitSince); err != nil {
			return nil, err
		}
	}
}

// waitForLeader waits (waitLeaderChange) between attempts to reach the
// leader; it fails with ErrNoLeader once ctx ends, or after
// defaultProposeTimeout since waitSince when ctx has no deadline.
func (n *Node) waitForLeader(ctx context.Context, backoff time.Duration, waitSince time.Time) error {
	if _, ok := ctx.Deadline(); !ok && time.Since(waitSince) > defaultProposeTimeout {
		return fmt.Errorf("%w within %s: %w", ErrNoLeader, defaultProposeTimeout, context.DeadlineExceeded)
	}
	if err := n.waitLeaderChange(ctx, backoff); err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return nil
}

// proposeLocal appends cmd on this node, which must be the leader.
func (n *Node) proposeLocal(ctx context.Context, cmd []byte) (any, error) {
	timeout := defaultProposeTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	f := n.raft.Apply(cmd, timeout)
	if err := n.await(ctx, f); err != nil {
		return nil, n.proposeError(err, timeout)
	}
	return f.Response(), nil
}

// proposeForward sends cmd to the leader at addr. retry reports that the
// leader certainly did not append it and another attempt is safe.
func (n *Node) proposeForward(ctx context.Context, addr string, cmd []byte) (resp any, err error, retry bool) {
	n.fsm.startRecording()
	defer n.fsm.stopRecording()
	r, err := n.cluster.fwd.call(ctx, addr, kindPropose, cmd)
	if err != nil {
		var notSent errNotSent
		switch {
		case errors.Is(err, ErrClosed):
			return nil, ErrClosed, false
		case errors.As(err, &notSent):
			n.log.Debug("forwarding to the leader failed; retrying", "leader", addr, "error", err)
			return nil, nil, true
		default:
			return nil, fmt.Errorf("%w: forwarded to %s: %w", ErrOutcomeUnknown, addr, err), false
		}
	}
	switch r.status {
	case statusOK:
	case statusNotLeader:
		return nil, nil, true
	case statusNotQueued:
		return nil, fmt.Errorf("consensus: command not queued by the leader: %s: %w", r.msg, context.DeadlineExceeded), false
	case statusUnknown:
		return nil, fmt.Errorf("%w: leader %s: %s", ErrOutcomeUnknown, addr, r.msg), false
	default:
		return nil, fmt.Errorf("consensus: leader %s refused the command: %s", addr, r.msg), false
	}
	if err := n.WaitApplied(ctx, r.index); err != nil {
		return nil, fmt.Errorf("%w: committed at index %d, not applied on this replica: %w", ErrOutcomeUnknown, r.index, err), false
	}
	resp, ok := n.fsm.result(r.index)
	if !ok {
		return nil, fmt.Errorf("%w: committed at index %d, result no longer kept on this replica", ErrOutcomeUnknown, r.index), false
	}
	return resp, nil, false
}

// waitLeaderChange waits until this node's view of the leader changes or
// d passes.
func (n *Node) waitLeaderChange(ctx context.Context, d time.Duration) error {
	n.leaderMu.Lock()
	changed := n.leaderChanged
	n.leaderMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stop:
		return ErrClosed
	}
}

// WaitApplied waits until this node's FSM has applied the command at index
// (or a snapshot containing it), ctx is done, or the node closes.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		changed := n.fsm.appliedChanged()
		if n.fsm.applied.Load() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return ErrClosed
		}
	}
}

// await waits for f to be answered, for ctx to be done, or for the node to
// shut down, whichever comes first, preferring f's answer when it is there.
// Raft futures offer no channel, so a goroutine waits on f; it ends when f is
// answered, which for an entry queued but never dispatched before shutdown
// is never: raft does not answer those.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	answered := make(chan error, 1)
	go func() { answered <- f.Error() }()
	select {
	case err := <-answered:
		return err
	case <-ctx.Done():
		select {
		case err := <-answered:
			return err
		default:
			return ctx.Err()
		}
	case <-n.done:
		select {
		case err := <-answered:
			return err
		default:
			return ErrClosed
		}
	}
}

// proposeError maps raft's errors, for a command that was queued, to this
// package's.
func (n *Node) proposeError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, raft.ErrRaftShutdown), n.closing.Load():
		return ErrClosed
	case errors.Is(err, ErrStorage):
		return err
	case errors.Is(err, raft.ErrNotLeader):
		// A single node whose log cannot be written steps down after the
		// failed append and keeps trying (an election each time): the
		// cause is the answer, not the election.
		if f := n.wal.LogError(); f != nil && n.cluster == nil {
			return f
		}
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrLeadershipLost
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("consensus: command not queued within %s: %w", timeout, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Queued, then given up on: it may still be applied.
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	default:
		return fmt.Errorf("consensus: %w", err)
	}
}

// AppliedIndex returns the log index of the last command the FSM has applied
// (restored from a snapshot or applied since), or 0 before the first command.
func (n *Node) AppliedIndex() uint64 {
	return n.fsm.applied.Load()
}

// LogError reports why this node's log cannot be written (an ErrStorage
// naming the cause, such as a full disk), or nil. It is set by a failed
// append and cleared by the next one that succeeds; meanwhile this node
// refuses writes (a single node) or cannot follow (a replica), and the
// root's /readyz fails. Recovery needs no restart: the log is reopened and
// appends are retried as raft retries them.
func (n *Node) LogError() error {
	return n.wal.LogError()
}

// Stats returns raft's statistics (state, term, indexes, configuration) as
// raft.Raft.Stats reports them.
func (n *Node) Stats() map[string]string {
	return n.raft.Stats()
}

// Status is this node's Raft state at one instant: raft's Stats, parsed,
// and what this package adds. The root exports it as metrics and serves
// it with its members (docs/ha.md).
type Status struct {
	// State is raft's state: Leader, Follower, Candidate or Shutdown.
	State string
	// Term is the current term.
	Term uint64
	// FirstLogIndex is the first entry the log still holds (0 for an
	// empty log): past 1 once a snapshot has compacted the log, so a new
	// replica can only catch up from a snapshot.
	FirstLogIndex uint64
	// LastLogIndex, CommitIndex and AppliedIndex are raft's: the last
	// entry in the log, the last one known committed and the last one
	// applied (configuration entries included).
	LastLogIndex, CommitIndex, AppliedIndex uint64
	// Revision is the index of the last command the FSM applied
	// (Node.AppliedIndex): the store's revision.
	Revision uint64
	// LastSnapshotIndex is the last entry of the latest snapshot, taken
	// here or installed from the leader (0: none).
	LastSnapshotIndex uint64
	// SnapshotsRestored counts the snapshots restored into the FSM since
	// Open: from disk at start, or sent by the leader to a replica that
	// was too far behind.
	SnapshotsRestored uint64
	// LastContact is how long ago the leader was last heard from: 0 on
	// the leader, -1 if never.
	LastContact time.Duration
	// NumPeers is the number of other voters in the configuration.
	NumPeers int
}

// Status returns this node's Raft state (see Status).
func (n *Node) Status() Status {
	stats := n.raft.Stats()
	num := func(key string) uint64 {
		v, _ := strconv.ParseUint(stats[key], 10, 64)
		return v
	}
	st := Status{
		State:             stats["state"],
		Term:              num("term"),
		LastLogIndex:      num("last_log_index"),
		CommitIndex:       num("commit_index"),
		AppliedIndex:      num("applied_index"),
		Revision:          n.fsm.applied.Load(),
		LastSnapshotIndex: num("last_snapshot_index"),
		SnapshotsRestored: n.fsm.restores.Load(),
		NumPeers:          int(num("num_peers")),
		LastContact:       -1,
	}
	if first, err := n.wal.FirstIndex(); err == nil {
		st.FirstLogIndex = first
	}
	switch c := stats["last_contact"]; c {
	case "never":
	case "0":
		st.LastContact = 0
	default:
		if d, err := time.ParseDuration(c); err == nil {
			st.LastContact = d
		}
	}
	return st
}

// Snapshot takes a snapshot now and compacts the log behind it (keeping
// TrailingLogs entries), as raft does on its own every SnapshotThreshold
// entries.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("consensus: snapshot: %w", err)
	}
	return nil
}

// Close shuts the node down without leaving the cluster: gossip stops (peers
// see it fail), raft shuts down (and with it the transport), waiting for an
// Apply or snapshot in progress, then the log is closed. A replica that
// stays down longer than DeadServerGrace is removed from the configuration
// by the leader, and added back when it returns. Proposals after Close fail
// with ErrClosed. Close is idempotent; later calls return the first call's
// result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.closing.Store(true)
		close(n.stop)
		n.cancel()
		var errs []error
		c := n.cluster
		if c != nil {
			// Followers learn first that requests to this node fail:
			// new connections are refused, open ones are closed.
			c.mux.stopAccepting()
			c.fsrv.close()
			if c.ml != nil {
				errs = append(errs, c.ml.Shutdown())
			}
		}
		errs = append(errs, n.raft.Shutdown().Error())
		close(n.done)
		if c != nil {
			if c.observer != nil {
				n.raft.DeregisterObserver(c.observer)
			}
			_ = c.mux.Close()
			c.fwd.close()
			c.mux.wait()
		}
		n.wg.Wait()
		errs = append(errs, n.wal.Close())
		if err := errors.Join(errs...); err != nil {
			n.closeErr = fmt.Errorf("consensus: closing: %w", err)
		}
	})
	return n.closeErr
}
