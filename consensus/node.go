package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/canopy-dev/canopy/relay/store"
)

// Sentinel errors returned by Propose. Test them with errors.Is.
var (
	// ErrNotLeader: this node cannot accept writes; the command was not
	// appended to the log.
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrLeadershipLost: leadership was lost while the command was in
	// flight; it may or may not be applied.
	ErrLeadershipLost = errors.New("consensus: leadership lost, outcome unknown")
	// ErrClosed: the node is closed. For a command in flight when Close
	// was called the outcome is unknown: it applies on reopen if it reached
	// the log.
	ErrClosed = errors.New("consensus: closed")
)

const (
	defaultSnapshotThreshold = 8192
	defaultSnapshotInterval  = 30 * time.Second
	defaultTrailingLogs      = 10240
	defaultReadyTimeout      = 10 * time.Second
	// defaultProposeTimeout bounds how long Propose waits to queue a command
	// when ctx has no deadline.
	defaultProposeTimeout = 10 * time.Second
	snapshotsRetained     = 2
)

// Config configures a Node. Only Dir and NodeID are required; the zero value
// of every other field selects the default given in its comment.
type Config struct {
	// Dir holds the raft state: Dir/wal (log and stable store) and
	// Dir/snapshots. It is created if missing. One Node at a time may use
	// a Dir: raft-wal's metadata database waits, without a timeout, for the
	// file lock held by another Node on the same Dir.
	Dir string
	// NodeID is the raft ServerID: the relay name.
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
	// ReadyTimeout bounds how long Open waits for leadership and for the
	// FSM to apply the log found on disk (default 10s).
	ReadyTimeout time.Duration
	// Logger receives the node's and raft's logs (default slog.Default()).
	// Raft's Info messages are logged at Debug; see newHCLogger.
	Logger *slog.Logger
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
		cfg.SnapshotThreshold = defaultSnapshotThreshold
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = defaultSnapshotInterval
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = defaultTrailingLogs
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = defaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// raftConfig translates cfg into raft's configuration.
func (cfg Config) raftConfig(logger *slog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = newHCLogger(logger, "raft")

	// A single voter has no network to ride out, so the timeouts only decide
	// how long a restarted node stays a follower before electing itself: a
	// random time between HeartbeatTimeout and twice that. 100 ms makes Open
	// ready in about 0.1–0.2 s rather than raft's default 1–2 s. The HA issue
	// must restore network-scale values (raft's defaults) once peers exist.
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 100 * time.Millisecond

	// Group commit: commands queued while the log is busy (up to
	// MaxAppendEntries, raft's maximum) are appended with one fsync and
	// handed to the FSM as one batch.
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 1024

	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	return rc
}

// Node is one replica of the root's replicated log driving a store.FSM. It
// implements store.Log. All methods are safe for concurrent use.
type Node struct {
	raft *raft.Raft
	fsm  *fsmAdapter
	wal  *walStore

	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error
	// done is closed once raft has shut down: a future not answered by
	// then never will be.
	done chan struct{}
}

var _ store.Log = (*Node)(nil)

// walStore is raft's log and stable store. raft-wal's Close leaves its
// metadata database open (and its file locked), so walStore owns that
// database and closes it too.
type walStore struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func openWAL(dir string, logger hclog.Logger) (*walStore, error) {
	meta := &metadb.BoltMetaDB{}
	wal, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithLogger(logger))
	if err != nil {
		return nil, errors.Join(err, meta.Close())
	}
	return &walStore{WAL: wal, meta: meta}, nil
}

// Close closes the log, then its metadata database.
func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}

// Open starts the node whose state lives in cfg.Dir, bootstrapping a
// single-voter cluster on first start, and drives fsm, which must be empty.
// It returns once the node is leader and fsm has applied every entry that was
// in the log (from the latest snapshot on), so the store is complete before
// it serves; it fails if that takes longer than cfg.ReadyTimeout.
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
	wal, err := openWAL(walDir, newHCLogger(logger, "raft-wal"))
	if err != nil {
		return nil, fmt.Errorf("consensus: opening log %s: %w", walDir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, snapshotsRetained, newHCLogger(logger, "raft-snapshot"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("consensus: opening snapshots: %w", err), wal.Close())
	}
	// Addresses on an in-memory transport are just names; using NodeID keeps
	// the address recorded in the configuration stable across restarts.
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
	rc := cfg.raftConfig(logger)

	fail := func(err error) (*Node, error) {
		return nil, errors.Join(err, wal.Close())
	}
	exists, err := raft.HasExistingState(wal, wal, snaps)
	if err != nil {
		return fail(fmt.Errorf("consensus: reading state: %w", err))
	}
	if !exists {
		boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(rc, wal, wal, snaps, trans, boot); err != nil {
			return fail(fmt.Errorf("consensus: bootstrapping: %w", err))
		}
	}
	adapter := &fsmAdapter{fsm: fsm}
	r, err := raft.NewRaft(rc, adapter, wal, wal, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("consensus: starting raft: %w", err))
	}

	n := &Node{raft: r, fsm: adapter, wal: wal, done: make(chan struct{})}
	start := time.Now()
	if err := n.waitReady(cfg.ReadyTimeout); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	logger.Info("consensus ready", "revision", n.AppliedIndex(), "took", time.Since(start).Round(time.Millisecond))
	return n, nil
}

// waitReady waits until the node is leader and its FSM has applied all of
// the log, for at most timeout.
func (n *Node) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for n.raft.State() != raft.Leader {
		select {
		case <-n.raft.LeaderCh():
		case <-ctx.Done():
			return fmt.Errorf("consensus: not leader after %s", timeout)
		}
	}
	// A barrier is answered once everything before it has been applied.
	// Its own timeout only bounds queueing; n.await bounds the whole wait.
	if err := n.await(ctx, n.raft.Barrier(timeout)); err != nil {
		return fmt.Errorf("consensus: applying the log: %w", err)
	}
	return nil
}

// Propose appends cmd to the log, waits until it is durable and applied, and
// returns what the FSM's Apply returned for it. cmd must not be modified
// after the call: the FSM may retain it.
//
// If ctx is done first, Propose returns ctx.Err(), yet the command may still
// be applied: raft cannot withdraw an entry it has queued. The same holds for
// ErrLeadershipLost, and for ErrClosed when Close raced with the proposal.
// ErrNotLeader and a deadline hit while queueing mean the command was not
// appended. When ctx has no deadline, queueing is bounded by 10 s.
func (n *Node) Propose(ctx context.Context, cmd []byte) (any, error) {
	if n.closing.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
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

// proposeError maps raft's errors to this package's.
func (n *Node) proposeError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, raft.ErrRaftShutdown), n.closing.Load():
		return ErrClosed
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrLeadershipLost
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("consensus: command not queued within %s: %w", timeout, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	default:
		return fmt.Errorf("consensus: %w", err)
	}
}

// AppliedIndex returns the log index of the last command the FSM has applied
// (restored from a snapshot or applied since), or 0 before the first command.
func (n *Node) AppliedIndex() uint64 {
	return n.fsm.applied.Load()
}

// Stats returns raft's statistics (state, term, indexes, configuration) as
// raft.Raft.Stats reports them.
func (n *Node) Stats() map[string]string {
	return n.raft.Stats()
}

// Close shuts raft down (and with it the transport), waiting for an Apply or
// snapshot in progress, then closes the log. Proposals after Close fail with ErrClosed. Close is
// idempotent; later calls return the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.closing.Store(true)
		err := n.raft.Shutdown().Error()
		close(n.done)
		if err = errors.Join(err, n.wal.Close()); err != nil {
			n.closeErr = fmt.Errorf("consensus: closing: %w", err)
		}
	})
	return n.closeErr
}
