// Package scheduler matches EdgePlacements against the inventory
// (DESIGN.md sections 4–5, step 2): which SyncTargets each placement's
// Locations reach, and how those destinations are paged into
// SinglePlacementSlices.
//
// # What it owns
//
//   - The Engine: an incremental index of the inventory (SyncTargets and
//     Locations, cluster-scoped, by name) and of every workload
//     description space's EdgePlacements (by PlacementRef). An
//     EdgePlacement selects a Location when any of its
//     spec.locationSelectors matches the Location's labels (an empty
//     selector {} selects every Location; no selectors select none); a
//     Location holds the SyncTargets its spec.instanceSelector matches
//     ({} selects every SyncTarget). A placement's destinations are the
//     distinct SyncTargets reached, each reported with the Location that
//     selected it, the first by name when several did.
//   - The exact list of placements each inventory or placement change
//     affects, so that the caller rewrites only those placements' slices.
//   - The Pager: stable paging of one placement's destinations into
//     slices of at most v1alpha1.MaxDestinationsPerSlice, so that a change
//     to one destination rewrites one slice.
//
// # Cost
//
// The Engine keeps, per placement, its selected Locations and its
// destinations (each with the first of those Locations holding it); per
// Location, its member SyncTargets and the placements selecting
// it; per SyncTarget, the Locations holding it (sorted by name); and an
// index of SyncTargets by label (key, value). So:
//
//   - a SyncTarget change costs one selector match per Location plus work
//     proportional to the placements that reach it before or after;
//   - a Location change costs one match of each placement's selectors
//     against its labels (only when those labels change), the SyncTargets
//     its selector may match (found through the label index when the
//     selector has an equality or In requirement, else all of them), and
//     work proportional to the placements selecting it before or after
//     times the SyncTargets whose membership changed;
//   - a placement change costs one match of its selectors per Location
//     plus the members of the Locations it starts or stops selecting.
//
// No operation recomputes every placement.
//
// # What it must not do
//
// It is pure computation: no store, clients, logging or goroutines. It
// does not read or write SinglePlacementSlices (the placement controller
// does, with the Pager's output), does not decide which workload objects
// a placement selects (topology/selection does) and keeps no placement
// status.
//
// # Concurrency
//
// An Engine and a Pager are not safe for concurrent use: call all the
// methods of one of them from one goroutine (or hold a lock around them).
// Neither starts goroutines. The label maps in returned Destinations are
// shared with the Engine and must not be modified.
package scheduler
