// Package placement is the root's placement controller (DESIGN.md
// sections 4 and 5): it turns EdgePlacements into what each destination
// receives.
//
// It owns, at the root:
//
//   - scheduling: it feeds the inventory (SyncTargets, Locations) and every
//     workload description space's EdgePlacements to a topology/scheduler
//     Engine and writes the result as SinglePlacementSlices (owned by their
//     EdgePlacement, paged by scheduler.Pager);
//   - translation: every workload object selected by a placement's
//     downsync clauses (topology/selection) is written once into the
//     downsync space, annotated with the destinations it targets
//     (v1alpha1.DestinationsAnnotation), with the time it was first placed
//     as its creationTimestamp (kept by every later write, so that a
//     rewrite never changes it); the relay tree routes it from there.
//     The namespaces of selected objects, the Customizers they refer to and
//     each destination's own SyncTarget and Locations (the parameters of
//     customization, which happens at the edge) travel the same way. An
//     object is customized at a destination with the Location its
//     placement selected the destination through: the SyncTarget names
//     the first Location by name that holds it, and an object placed
//     through another lists it (v1alpha1.LocationOverridesAnnotation);
//   - conflicts: when placements choose different Customizers for one
//     object at one destination, or reach the destination through
//     different Locations for an object that is customized, the placement
//     first by (space, name) wins and every placement involved lists the
//     conflict in its status;
//   - reported state, as the root's summary.Sink (reportedState): what the
//     children reported, merged by a topology/summary Summarizer, becomes
//     a CombinedStatus per (object, placement), the singleton status of
//     objects with one destination, and each placement's status (matched
//     destinations, conflicts, observed generation, Synced and Ready). The
//     merge runs inside the controller's flush, not apart: it is written
//     against that flush's outcome, and it waits for the children to
//     report again after a restart or an election (Config.Hold);
//   - upsync into the workload description spaces: the objects
//     destinations report as upsynced are written into the space of each
//     placement whose upsync clause names them and that has the
//     destination, labelled v1alpha1.UpsyncedLabel (one destination's
//     version, the first by name, when several report one; the
//     placement's Upsynced condition says so), and deleted when no report
//     wants them;
//   - the rule for RBAC objects of a workload description space: those
//     labelled v1alpha1.SpaceRBACLabel (and the default roles) govern the
//     space and are never placed; the others are workload, placed like
//     any object and inert in the space (InertInWDS, which the root sets
//     as the kube API authorizer's Inert).
//
// It reads and writes the store directly (it is part of the root, like
// the kube API's own controllers). Of the workload objects users write it
// writes only the status of singletons; the upsynced objects it writes
// are its own, and it never writes over an object it did not write.
//
// It imports neither the kube API server (relay/apiserver) nor the tree
// transport (relay/transport): space names, kinds and shared records come
// from relay/layout, annotations and labels from topology/api/v1alpha1,
// and what only the tree knows (where the children's reports are held,
// which children's claims are superseded: Config.Claims) from Config.
package placement
