// Package selection decides which workload objects of a workload
// description space (WDS) an EdgePlacement's downsync clauses select
// (DESIGN.md sections 4–5, step 3), and which objects of a destination
// its upsync clauses select.
//
// # What it owns
//
//   - Compiling a placement's []v1alpha1.DownsyncClause into a Selector once
//     (label selectors converted, long name lists turned into sets), with
//     errors that name the clause and field at fault.
//   - The matching rules documented on v1alpha1.DownsyncClause: an object
//     matches a clause when it satisfies every field that is set; the
//     Selector reports the first matching clause, whose index lets the
//     caller read that clause's Customizer.
//   - Telling the caller which Namespaces' label changes can change the
//     result (MayMatchNamespace, NamespaceLabelsChangeMatter), so that it
//     re-evaluates only the objects of those namespaces.
//   - The matching rules of v1alpha1.UpsyncClause (UpsyncMatches) and of
//     name patterns (NameMatches, path.Match syntax), shared by the edge,
//     which reports what its cluster holds, and the root, which writes
//     those reports into the placements' spaces.
//
// # What it must not do
//
// It is pure computation: no clients, informers, logging or goroutines. It
// does not know which Locations a placement selects (the scheduler does),
// does not route objects to destinations (the placement translator does)
// and does not look up Namespace objects itself: the caller passes their
// labels in.
//
// # Concurrency
//
// A Selector is immutable after Compile; all its methods are safe for
// concurrent use. Matches calls its nsLabels function at most once per
// call, from the calling goroutine, and only when a clause needs it.
package selection
