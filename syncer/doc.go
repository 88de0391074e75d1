// Package syncer is the edge syncer (DESIGN.md section 5, steps 5 and 6):
// it makes one workload execution cluster hold what its destination's
// inbox says, and reports what the cluster really holds.
//
// # What it owns
//
//   - Desired state: Desired turns the inbox (the objects the parent sent,
//     with the destination's SyncTarget, its Location and the Customizers
//     in use) into the objects this destination must hold, customized for
//     it (topology/customize) and stripped of Canopy's instructions. An
//     object that cannot be expanded is not applied at all and is reported.
//   - Apply: server-side apply with client-go (dynamic client, a RESTMapper
//     over discovery that is reset when CRDs arrive or leave), field
//     manager FieldManager, forced. CRDs first, waiting until they are
//     Established, then namespaces, then the rest. Every applied object
//     carries ManagedLabel. A namespace that exists without it belongs to
//     someone else: the syncer neither applies, labels nor deletes it.
//   - Prune: what the syncer manages and the inbox no longer holds is
//     deleted, others first, then namespaces, then CRDs, and only if it
//     still carries ManagedLabel (with its UID as a precondition).
//   - Records: what it manages (resource, namespace, name, whether it
//     created it, what it last applied and what the cluster answered) is
//     kept in the edge store's system space (AppliedResource), written
//     before the first apply, so a restarted syncer knows what it manages
//     and does not apply again what has not changed.
//   - Drift: one informer per resource of managed objects (label
//     ManagedLabel=true); an object deleted, or changed on a field the
//     syncer set (the live object projected on what was applied differs
//     from the cluster's answer to the apply), is applied again and
//     counted (Stats, canopy_syncer_drift_corrections_total).
//   - Reports: the outbox space holds, per managed object, its live state
//     (without managedFields) under its inbox key, and one
//     DestinationStatus named after the destination (reachable, last
//     error, applied count, failed objects, drift corrections, observed
//     inbox revision). The relay's uplink reports the outbox upward; the
//     syncer owns the outbox and deletes what it did not write.
//   - Autonomy: it runs from the inbox on local disk whether or not the
//     parent is connected. When the cluster's API does not answer, work
//     is retried with exponential backoff (Config.RetryMin, RetryMax) and
//     the destination is reported unreachable; a probe of /version every
//     Config.ProbeInterval notices the return and starts a pass.
//
// # What it must not do
//
// It never touches an object it does not manage: one it did not apply, or
// one that lost ManagedLabel. It never writes the inbox (the tree's
// Receiver alone does) and never applies objects of group
// edge.canopy.dev (Canopy's own, not the workload's). It holds no global
// knowledge: only its destination's inbox.
//
// Not done yet (issue 5, later parts): associated objects (ReplicaSets and
// Pods of a Deployment, Jobs of a CronJob) are neither watched nor
// reported; upsync clauses are ignored (nothing created in the cluster is
// sent up); StatusCollectors are not evaluated; denatured objects need no
// change here today, since denaturing keeps objects inert at the centre
// without rewriting them. Placement conflicts are settled at the root.
//
// # Concurrency
//
// One worker goroutine does every pass, apply, deletion and drift
// correction, from a client-go rate-limited work queue (so a burst of
// inbox changes is one pass, and an isolated change is applied at once).
// The worker also probes the cluster every Config.ProbeInterval. Around it
// run the inbox follower (a store watch), the report flusher (one store
// Txn per batch of dirty keys) and the informers, which only enqueue work
// and mark reports dirty. Syncer.mu
// guards the records, the informers and the reported state; it is never
// held across a request to the cluster or a store write. Stats, Describe
// and Collect are safe for concurrent use.
package syncer
