// Package layout is the contract between tiers: the names every relay, the
// root's kube API, placement and the edge syncer agree on for what a relay's
// store holds.
//
// # What it owns
//
//   - Space names: DefaultSpace and InventorySpace (the root's users'
//     spaces), DownsyncSpace (the root's placed objects), MailboxSpace and
//     ReportsSpace (one of each per child at every tier), InboxSpace and
//     OutboxSpace (a child relay's share from its parent and its reports
//     to it), and SystemNamespaces, which every space has.
//   - Space kinds (DESIGN.md section 3): the kind a space record
//     (SpaceResource, in the system space "") gives its space, read with
//     SpaceKindOf.
//   - Records of the system space "" that more than one package reads or
//     writes: route records (RouteResource; written by a parent's
//     downlink, read by its senders, the inventory and placement) and
//     cursors (CursorResource, Cursor; written by the tree's receiving
//     sides, read by the edge syncer).
//
// Annotations and labels of the API group edge.canopy.dev are not here:
// they belong to topology/api/v1alpha1.
//
// # What it must not do
//
// It holds names and the stored form of shared records, no behaviour: it
// imports nothing of Canopy but relay/store, so that the kube API server,
// the tree transport, topology and the syncer can all import it without
// importing each other.
package layout
