// Package backing keeps the spaces of the root whose objects live in an
// existing Kubernetes API server (a space record with spec.backend kube,
// layout.BackendKube): DESIGN.md section 3's second implementation of a
// space.
//
// Placement reads a workload description space from the root's store;
// for a backed space the store holds a copy, and this package keeps it:
//
//   - Controller (leader only) runs one mirror per backed space, started
//     and restarted as its record or its kubeconfig Secret (in the system
//     space, layout.SystemSecretsNamespace) changes, stopped when the
//     space is deleted;
//   - a mirror installs the edge.canopy.dev workload CRDs in the backend,
//     follows with client-go informers what placement reads there
//     (Namespaces, CRDs, EdgePlacements, StatusCollectors, Customizers and
//     every resource a downsync clause names) and copies it into the
//     space, as state: the latest version of each object, in batches. It
//     copies nothing until every informer has listed once, so nothing is
//     placed from a space that is not ready, and it never deletes a copy
//     because the backend went away: only a backend that lists without an
//     object, or says it was deleted, removes it;
//   - what Canopy writes into the space goes back to the backend (server-side
//     apply, field manager FieldManager): the objects it owns
//     (CombinedStatuses, SinglePlacementSlices, upsynced objects) whole, and
//     the status it writes on users' objects (EdgePlacement status,
//     singleton status). The copy keeps its own status: an object's status
//     comes from the backend only when the copy is created;
//   - the record's status says how it goes: conditions Ready (CRDs
//     installed, everything listed; else a reason, SecretNotFound,
//     BadKubeconfig, Forbidden naming the verb and resource, Unreachable)
//     and Reachable (the backend answers now), which Collector exports as
//     metrics on every replica;
//   - the inventory space may be backed too (its Space patched to a kube
//     backend): the inventory CRDs are installed there, SyncTargets and
//     Locations copied with their status, and nothing written back, for
//     the root's inventory controller writes through the root's API,
//     which passes its writes to the backend.
//
// The root's /spaces/<name>/ of a backed space is the backend: relay/server
// passes each request there as the root's user, impersonated (RESTConfig
// makes its client), so one kubeconfig per space works whatever keeps it.
//
// It reads and writes the root's store directly (it is part of the root,
// like placement), and imports neither the kube API server nor the tree
// transport.
package backing
