// Package syncer is the edge syncer (DESIGN.md section 5, steps 5 and 6):
// it makes one workload execution cluster hold what its destination's
// inbox says, and reports what the cluster really holds.
//
// # What it owns
//
//   - Desired state: Desired turns the inbox (the objects the parent sent,
//     with the destination's SyncTarget, its Locations and the Customizers
//     in use; each object customized with the Location the root chose for
//     it there) into the objects this destination must hold, customized for
//     it (topology/customize) and stripped of Canopy's instructions. An
//     object that cannot be expanded is not applied at all and is reported.
//   - Apply: server-side apply with client-go (dynamic client; kinds are
//     mapped to resources by asking discovery for the group versions in
//     use only, forgotten when CRDs arrive or leave), field
//     manager FieldManager, forced. CRDs first, waiting until they are
//     Established, then namespaces, then the rest. An object the cluster
//     refuses (a 403 from RBAC, an admission webhook) is logged once per
//     answer and reported (below); the others are applied. Every applied
//     object carries ManagedLabel. A namespace that exists without it belongs to
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
//     (without managedFields, annotated v1alpha1.DestinationAnnotation =
//     the destination) under its inbox key, and one DestinationStatus
//     named after the destination (reachable, last error, applied count,
//     failed objects, drift corrections, observed inbox revision). The
//     relay's uplink reports the outbox upward; the syncer owns the
//     outbox and deletes what it did not write.
//   - Placements at the edge (model.go): the inbox's EdgePlacements
//     (reports.PlacedName, v1alpha1.SourceAnnotation = their space) are
//     compiled with topology/selection and matched against the inbox's
//     objects of their space (Namespace labels from the inbox's
//     Namespaces), so the syncer knows which placements hold each object;
//     the StatusCollectors they name are compiled with topology/status.
//   - Reported state (reporter.go, topology/reports): for each (object,
//     placement holding it) whose placement names collectors, one
//     reports.Partial per collector, from status.EvaluateAll over the
//     live object, its associated objects and the destination (SyncTarget
//     name and labels); an object whose apply failed gives each collector's
//     Failed partial with the reason. Per placement, one
//     reports.PlacementSync: the newest source revision of its objects
//     once all are applied at their current inbox version, Failed with
//     the first failure otherwise, Ready when all are ready (workload
//     controllers caught up, Jobs complete, anything else present).
//     Changes are coalesced in Config.StatusWindow (reports.Pacer: an
//     isolated change is evaluated as soon as the pass that applied it is
//     over and the informers show the cluster's answers, settle.go); what
//     one change moves (live state, partials, placement syncs,
//     DestinationStatus) is written in one outbox Txn; a report is written
//     only when its encoding changes, and deleted when it no longer
//     applies. Until the first complete pass after Start the reports of
//     the outbox (those of the previous run) are left as they are, then
//     taken over, so a restart with an unreachable cluster keeps them.
//   - Associated objects (associated.go): ReplicaSets, Jobs and Pods
//     reached by ownerReference chains from an evaluated Deployment,
//     StatefulSet, DaemonSet, Job or CronJob, watched by one informer per
//     (resource, namespace) of such objects, at most
//     Config.MaxAssociated per object, then a TruncatedKind marker.
//   - Upsync (upsync.go): objects of the cluster named by a placement's
//     upsync clauses (discovery resolves wildcards; names are path.Match
//     patterns, matched on the informers' events) that Canopy does not
//     manage, reported under reports.ForwardedName(destination, name),
//     renamed so, with v1alpha1.DestinationAnnotation; deleted when they
//     go or stop matching.
//   - Viewed copies: a managed object whose inbox version carries
//     v1alpha1.ViewedAnnotation (a View of source Placed names its
//     resource) is also reported whole under reports.ForwardedName,
//     annotated so, while it carries it.
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
// Not done yet: denatured objects need no change here today, since
// denaturing keeps objects inert at the centre without rewriting them.
// Placement conflicts are settled at the root. An upsync clause naming a
// resource the cluster does not serve is resolved again every
// ProbeInterval; wildcards are resolved when the inbox changes or CRDs
// are applied, not when someone else adds a CRD. Associated objects are
// watched per namespace: a destination with evaluated workloads in many
// namespaces pays two or three watches in each (a cluster-wide informer
// would cache every Pod of the cluster instead). While the cluster is
// unreachable, partials and placement syncs keep their last values (the
// DestinationStatus says unreachable); they do not turn into failures.
//
// # Concurrency
//
// One worker goroutine does every pass, apply, deletion and drift
// correction, from a rate-limited work queue with client-go's semantics
// (so a burst of inbox changes is one pass, and an isolated change is
// applied at once; retries wait on timers, not goroutines). The worker
// also probes the cluster every Config.ProbeInterval; at the start of each
// pass it hands the reporter the inbox's model, and at the end what it
// applied or failed. Around it run the inbox follower (a store watch), the
// report flusher (one store Txn per batch of dirty keys, written once the
// worker and the reporter are done with a change), the reporter
// (evaluates collectors and placement syncs, starts and stops the
// informers of associated and upsynced objects; it runs in Start's
// goroutine) and the informers (informer.go: list and watch in one
// goroutine each, without client-go's informer machinery), which only
// enqueue work and mark reports dirty. An edge relay is one of thousands
// in a simulation: every goroutine and buffer it keeps while idle counts.
//
// A pass reads the whole inbox (level-triggered), but the worker keeps
// what it derived from each object between passes (memo.go: the expanded
// object, its encoded form and hash; the model keeps each object's
// metadata), so an inbox object that did not change costs a map lookup,
// not a decode, an expansion and an encoding.
//
// Syncer.mu guards the records, the informers and the reported state
// (reportState); it is never held across a request to the cluster, a store
// write or a CEL evaluation. Lock order: Syncer.mu, then an informer's
// cache lock (informers call their handlers without it). Stats, Describe
// and Collect are safe for concurrent use.
package syncer
