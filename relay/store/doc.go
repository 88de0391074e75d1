// Package store is Canopy's multi-space object store: the embedded backend
// behind every space (DESIGN.md §2-3).
//
// # What it owns
//
//   - Objects: immutable versions of JSON objects, addressed by Key (space,
//     resource, namespace, name) and kept in one copy-on-write B-tree per
//     (space, resource), so lists come out ordered by namespace then name and
//     a snapshot is a clone, not a copy.
//   - Revisions: one global revision across all spaces, equal to the Log
//     index of the last applied command. All the writes of a Txn share one
//     revision, which is written into each object as
//     metadata.resourceVersion; Txns proposed together as one group command
//     share it too, and never touch the same key.
//   - History: the last Options.HistorySize events, and at most
//     Options.HistoryBytes of their versions' data, so a watch can resume
//     from a recent revision.
//   - Paged lists: every page is served from the state of the first page's
//     revision, as kube's are. A List that returns a continue token
//     retains the copy-on-write state it listed from (O(1), shared by all
//     lists at that revision) for Options.PagingRetention, at most
//     Options.PagingStates of them; a token whose state is gone is
//     ErrExpired. A retained state pins only what later writes replace
//     (Options.PagingStates tells the worst case).
//   - Watch: per-watcher bounded queues fed by Apply without ever blocking
//     it, drained by a goroutine of the watcher's only while events wait
//     for its receiver, kube selection semantics (Added on entering a selection, Deleted
//     on leaving it) and bookmarks: periodic ones while idle, or one at
//     the end of each write's events (WatchOptions.RevisionEnds).
//   - Spaces (space.go): Space is one space's objects behind an interface
//     (get, list, watch, Txn, revisions), which the kube API server serves
//     every request through; Store.Space is the embedded implementation,
//     ReadOnly and View (a read-only, filtered view of another space) wrap
//     any implementation. Parts that write several spaces in one Txn or
//     watch every space (placement, the summarizer, the tree transport,
//     the API server's own controllers) take the *Store itself.
//
// # What it must not do
//
// The store knows nothing of Kubernetes API semantics beyond reading
// metadata.uid and metadata.labels and writing metadata.resourceVersion: no
// uid or generation assignment, no finalizers, no defaulting or validation
// of kinds. That is the API server's job, above the store.
//
// The store does no I/O. Durability and replication are the Log's job: a
// write becomes a command, the Log makes it durable (with Raft, replicated)
// and applies it through FSM.Apply, which is the only state transition.
// Snapshot and Restore move bytes through the io.Writer and io.Reader they
// are handed.
//
// # Write path
//
// Txn encodes its ops as one versioned binary command and hands it to the
// Log; the Log calls Apply(index, cmd) on every replica; Apply checks every op
// against the current state, applies all or none, appends the events to the
// history and fans them out to the watchers that asked for that (space,
// resource), or for that one key (WatchOptions.Also). NewMemLog is the Log
// for tests and simulations; New uses one until SetLog replaces it.
//
// Group commit (group.go): at most a few proposals are in flight; Txns that
// arrive meanwhile queue, and the next proposal carries all of them that
// touch distinct keys as one group command, in which each Txn succeeds or
// fails on its own. A relay with thousands of children writing at once
// (their reports, link and route records) then makes a few large log
// entries, not thousands of small ones. A Log that hands the FSM several
// entries at once (consensus does) calls ApplyBatch, which takes the lock
// once for all of them.
//
// # Locking
//
// Store.mu (a sync.RWMutex) guards the objects, the revision and the
// history; Store.fanMu guards the watcher registry and serializes fan-out;
// each watcher's own mutex guards its queue. The lock order is mu, then
// fanMu, then a watcher's mutex. Apply commits under mu, takes fanMu, then
// releases mu before fanning out, so readers wait only for the commit, never
// for delivery, and a watcher's consumer never holds any store lock.
// Store.pagesMu guards the states retained for paged lists, taken after mu or
// alone: a next page served from a retained state takes only pagesMu, for a
// lookup, and then reads tables no one modifies.
package store
