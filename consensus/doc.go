// Package consensus owns the root's replicated log: it makes every write to the
// root store durable (and, with peers, replicated) before applying it, keeps
// snapshots of the store so the log stays short, and rebuilds the store from
// snapshot plus log when a relay restarts.
//
// # What it owns
//
//   - The log: hashicorp/raft over a raft-wal write-ahead log (Dir/wal), which
//     is also raft's stable store (term, vote). An entry is fsynced before it
//     is applied, so a Propose that returned survives kill -9 of the process.
//   - Snapshots: raft.FileSnapshotStore in Dir/snapshots, two kept. Raft takes
//     one when SnapshotThreshold entries have accumulated (checked every
//     SnapshotInterval) and then drops all but TrailingLogs entries of the log.
//   - The FSM adapter, which drives a store.FSM from raft: committed commands
//     go to store.FSM.Apply with their log index, in index order, exactly once
//     per Node; snapshots are store.FSM.Snapshot written out by raft's
//     snapshot goroutine; Restore replaces the FSM's state.
//   - Later (the HA issue): membership. Today a Node is a single voter on an
//     in-memory transport that has no peers; the HA issue swaps in a network
//     transport, discovers peers with memberlist and forwards writes that
//     reach a follower to the leader. The bootstrap configuration records the
//     node's address as its NodeID, which that change must re-address.
//
// # What it must not do
//
// It never looks inside a command or a snapshot: it does not know about kube
// objects, spaces or revisions beyond the log index it hands to the FSM. The
// store decides what a command means; consensus only orders and persists it.
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
// empty.
//
// A snapshot on disk is one version byte, the index of the last command
// applied (8 bytes, big endian), then the FSM's own encoding.
package consensus
