// Package summary merges what a relay's children reported, at every tier
// (DESIGN.md section 5, step 7): a Summarizer lists the tier's children,
// merges their partial reports (reports.Decoded.Merge: collector
// partials and placement syncs per key; upsynced objects, the live copies
// Views gather and the live state of objects with one destination
// forwarded) and hands the result
// to the tier's Sink.
//
// # What it owns
//
//   - The merge of one tier: which children count (Child, listed by the
//     tier: a child whose reports are not at hand, or that is left out, is
//     not merged), in the order of their names, so that the result does
//     not depend on the order reports arrived in.
//   - Hold: holding reported state back until the children have reported
//     again, or a grace has passed. A tier's reports are in memory (soft
//     state, DESIGN.md section 2) and are lost when it restarts, or when
//     a root replica becomes leader, while what it wrote from them is
//     durable: writing from a partial set would drop what the others
//     reported. Regions and the root use the same Hold.
//   - The region's Sink, Outbox: its outbox, what it reports up, kept
//     equal to the merge, writing only what differs.
//   - Timing (Run): a tier merges once its children's reports have been
//     quiet for a gap that grows under a stream of them, from a
//     two-hundredth of a window to a window, or reports.MaxWaits gaps into
//     a burst (reports.Window).
//
// The tiers use it in two ways. A region runs Summarizer.Run, which
// follows its store of reports and writes its outbox. The root merges
// inside its placement controller's flush (topology/placement), whose
// Sink writes CombinedStatus, singleton status, upsynced objects and
// placement status: those need the placement outcome of that same flush,
// so the controller calls Summarizer.Flush and times it with its own
// window.
//
// # What it must not do
//
// It does not hold or move reports (the relay tree's Collectors write
// them, relay/server mirrors the root's between replicas), decide which
// children are superseded (the tier's mailboxes do: Child.Out), or know
// the kube API. It imports neither the kube API server nor the tree
// transport: the root's placement controller imports it.
//
// # Concurrency
//
// A Summarizer serves one goroutine (Run, or the caller of Flush). A
// Hold is safe for concurrent use.
package summary
