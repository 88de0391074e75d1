// Package inventory keeps the root's inventory space (DESIGN.md sections 3
// and 4): the inventory CRDs (SyncTarget, Location) installed, and one
// SyncTarget per destination the relay tree announces.
//
// It owns, with its Controller:
//
//   - the inventory CRDs: installed at start (Config.InstallCRDs), and
//     again at once when one is deleted or changed;
//   - the SyncTargets of the fleet (Config.Fleet): a connected
//     destination has one, created if missing (the edge owns it),
//     labelled as announced, its status the path from the root, CONNECTED
//     True and LAST-SEEN when it (re)connected. A disconnected one keeps
//     its SyncTarget, if it has one, with CONNECTED False and LAST-SEEN
//     when it was last heard from: when this Controller saw it go, or
//     otherwise (a restart) the time already shown or announced, whichever
//     is later. Its SyncTarget is not created again once deleted, so an
//     edge is retired by stopping it and then deleting its SyncTarget. A
//     SyncTarget that no edge relay announces shows PATH NoPath and
//     CONNECTED False.
//
// It writes through the root's own kube API as the admin (Config.Client),
// like any client, and only what changed: a change in the fleet costs
// writes for the destinations it touched, not for the whole fleet. It
// reads the store only to follow it. Locations are the users'; it never
// writes them.
//
// It runs on the root's leader only. It imports neither the kube API
// server nor the tree transport: the fleet, where its records are kept and
// how CRDs are installed come from Config.
package inventory
