// Package mailbox owns a tier's mailboxes (DESIGN.md section 3): which
// objects each child of a relay receives. A mailbox never copies objects:
// it is an index over the tier's one shared space (the root's downsync
// space, a region's inbox), by the destinations each object targets and
// those each child announced below it.
//
// # What it owns
//
//   - Addressing: an object's destinations are its
//     v1alpha1.DestinationsAnnotation, read once per stored version into a
//     store field (Fields, Targets: the store's Options), and cut to a
//     child's subtree as it is sent, from a template encoded once per
//     version (trim).
//   - Route records: per child, the destinations it announced (written by
//     SaveRoute and MarkDisconnected, in the format of relay/transport/tree,
//     whose Sender follows them at every revision).
//   - Per child, the Routing its Sender uses and the Matcher the kube API's
//     read-only mailbox view filters with (View).
//   - Claims: which child's claim of a destination wins when several claim
//     it after a re-homing (Claims.Superseded), read through one cache per
//     tier (Mailboxes.Routes, Mailboxes.Superseded).
//
// Mailboxes is built once per tier over its store and shared space, and
// handed to the downlink (relay/transport/session), to the root's
// placement controller (as placement.Claims) and to the kube API's
// mailbox view.
//
// # What it must not do
//
// It moves nothing along a link (relay/transport/tree does), decides no
// placement (topology/placement writes the annotation), and tells no
// child what moved (the downlink does, from Superseded). It does not
// import the kube API server.
//
// Mailboxes's methods are safe for concurrent use.
package mailbox
