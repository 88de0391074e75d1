// Package consensus owns the root's replicated log: it makes every write to the
// root store durable (and, with peers, replicated) before applying it, keeps
// snapshots of the store so the log stays short, rebuilds the store from
// snapshot plus log when a relay restarts, and, for a root of several
// replicas, discovers peers, manages Raft membership, forwards writes to
// the leader and answers linearizable read indexes. docs/ha.md describes
// the cluster design and how the server uses it.
//
// # What it owns
//
//   - The log: hashicorp/raft over a raft-wal write-ahead log (Dir/wal), which
//     is also raft's stable store (term, vote). An entry is fsynced before it
//     is applied, so a Propose that returned survives kill -9 of the process.
//     wal.go wraps raft-wal: it records the last index stored, reopens the
//     log when raft-wal could not start a segment (a full disk), and
//     reports why the log cannot be written (ErrStorage, Node.LogError)
//     until it can.
//   - Checks on open (verify.go): every log segment, batch by batch against
//     raft-wal's CRCs, its length and index, that the log reaches the last
//     index stored, and every snapshot's size and CRC. Damage is refused
//     with a DamageError naming the file and offset (ErrDamaged), never
//     skipped; docs/ha.md, "Damaged data".
//   - Snapshots: raft.FileSnapshotStore in Dir/snapshots, two kept. Raft takes
//     one when SnapshotThreshold entries have accumulated (checked every
//     SnapshotInterval) and then drops all but TrailingLogs entries of the log.
//     A follower too far behind gets the leader's latest snapshot: the log
//     answers raft.ErrLogNotFound below its first index (walStore.GetLog),
//     though raft-wal still holds those entries until their segment goes.
//   - Seeds (seed.go): Seed writes a snapshot into the Dir of a node that
//     never ran (a root restored from a backup); Open installs it as raft's
//     first snapshot, at the index given, instead of bootstrapping an empty
//     log, so the node's commands continue past that index.
//   - Status: raft's Stats parsed, with the log's first index and the
//     snapshots restored, for the root's metrics and `relay members`.
//   - The FSM adapter (fsm.go), which drives a store.FSM from raft: committed
//     commands go to store.FSM.Apply with their log index, in index order,
//     exactly once per Node; snapshots are store.FSM.Snapshot written out by
//     raft's snapshot goroutine; Restore replaces the FSM's state. It keeps
//     a bounded ring of recent Apply results for forwarded proposals.
//   - Two modes, chosen by Config.RaftAddr. Without it (the default, and every
//     relay below the root) a Node is a single voter on an in-memory
//     transport, exactly as before the HA work. With it a Node is a cluster
//     replica:
//   - transport.go: one TCP listener, TLS 1.3 with client certificates both
//     ways, whose first byte selects raft's NetworkTransport or the forward
//     protocol;
//   - forward.go: the forward protocol (a follower's proposals, read-index
//     requests and Deliver messages to the leader, pipelined, with a goaway
//     on close);
//   - membership.go: memberlist gossip (node name = NodeID, metadata = raft
//     address, cluster id, state, app Meta), refusal of other clusters, and
//     the BootstrapExpect protocol;
//   - leader.go: the leadership monitor, the leader loop (barrier, then
//     reconciling the Raft configuration with gossip: add voters, remove
//     servers dead longer than DeadServerGrace) and RunAsLeader;
//   - cluster.go: opening a replica, ReadIndex, WaitReady, Members.
//
// # What it must not do
//
// It never looks inside a command or a snapshot: it does not know about kube
// objects, spaces or revisions beyond the log index it hands to the FSM. The
// store decides what a command means; consensus only orders and persists it.
// It never retries a proposal whose outcome is unknown. Gossip only detects;
// only the leader changes Raft membership.
//
// # FSM concurrency contract
//
// Apply, Snapshot and Restore of the store.FSM are called from one raft
// goroutine, never concurrently with each other. Apply receives strictly
// increasing indexes; the cmd slice it receives is never modified afterwards
// and may be retained. Snapshot must be quick (a copy-on-write handle): the
// returned store.Snapshot's WriteTo runs on another goroutine concurrently
// with later Applies, and Release is called once it is written or discarded.
// Restore is called with no Apply in progress and must replace all state; it
// is called by Open when a snapshot exists, so the FSM given to Open must be
// empty; on a cluster replica it is also called at run time when the leader
// sends a snapshot. Apply must be deterministic: a follower returns, for a
// forwarded proposal, the result its own FSM computed for that index.
//
// A snapshot on disk is one version byte, the index of the last command
// applied (8 bytes, big endian), then the FSM's own encoding. A version
// byte newer than this package writes is refused as written by a newer
// relay, not as damage.
//
// # Node concurrency
//
// All exported methods of Node are safe for concurrent use. Locks: Node.leaderMu
// guards the leadership state, fsmAdapter.mu the result ring and the
// applied-index broadcast, members.mu the gossip view; none is held while
// taking another or while calling raft or memberlist. In forward.go a
// forwardConn's wmu is taken before its mu (never the reverse), and
// forwardClient.mu is never held with either.
package consensus
