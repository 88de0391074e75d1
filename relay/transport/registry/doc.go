// Package registry is the root's record of who belongs to the relay tree
// (DESIGN.md section 6, "Security"): which relay names are joined, with
// which key, where each relay is linked now, and which join tokens may
// still be used.
//
// # What it owns
//
//   - Relay records (system space, relays.registry.canopy.dev, one per
//     name): the relay's role, the [pki.KeyID] of the key it joined with,
//     the path it joined at, its home (the path it is linked at now) and
//     its generation. A name is joined once: a join token cannot take a
//     name that has a record, only a token made with --rekey and naming
//     it can give the name a new key.
//   - Generations. Every time a relay is linked at another path (it
//     re-homed), its generation grows (to at least the root's clock in
//     unix nanoseconds). Parents order claims of one destination by it
//     (wire.Destination.Since): the root, never a child's clock, decides
//     which claim is newest.
//   - Token records: Secrets of type [TokenSecretType] in the inventory
//     space's [TokenNamespace], one per token, written by "relay token
//     create" and deleted by "relay token revoke". A token whose record is
//     gone is refused; the record counts the token's uses.
//
// [Registry.Register] answers the wire.Register requests that every
// parent sends toward the root: a join (before a parent signs a
// certificate) and a link (when a child with a certificate connects, so
// that its key is checked and its home recorded). Parents below the root
// forward them (relay/transport/session); the root's Downlink calls the Registry.
//
// # Boundaries
//
// It decides and records; it does not sign certificates (relay/transport/join), hold
// links (relay/transport/session) or serve the kube API. Its records live in the
// root's store, so they are replicated with Raft like every other write.
// A Registry is safe for concurrent use.
package registry
