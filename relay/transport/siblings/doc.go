// Package siblings finds a region's siblings (docs/ha.md, "Sibling
// regions"): regions of one tree under one parent find each other with
// memberlist. Each gossips its link address; a region's downlink tells its
// children the others' (wire.Siblings, relay/transport/session), so that a
// child whose parent dies dials a sibling, which then fetches the child's
// mailbox from above.
//
// It owns the gossip only. Nothing it carries is trusted beyond being an
// address to try: a child dialing a sibling still verifies it (a region
// certificate of the same root CA) and the sibling verifies the child.
// A relay of another tree never exchanges gossip (memberlist's label),
// and one of another parent is refused.
package siblings
