package mailbox

import (
	"strings"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// Claims maps each child of a space to the destinations its route record
// lists.
type Claims map[string][]tree.RouteDestination

// Routes reads the route records of every child of space, decoding each
// once.
func Routes(r store.Reader, space string) (Claims, error) {
	return (*routeCache)(nil).routes(r, space)
}

// routeCache keeps the route records it decoded, by stored version (a
// stored object never changes), for a caller that reads them again and
// again: the root's placement controller reads every child's record for
// each report it merges, and at 10 000 destinations decoding them was a
// sixth of the root's CPU. The Claims it returns share their slices with
// the cache: read them, do not change them. Not safe for concurrent use.
type routeCache struct {
	decoded map[*store.Object][]tree.RouteDestination
	// same says that the last routes listed the versions the one before
	// did; superseded is what superseded answered for them without
	// above (nil: not known).
	same       bool
	superseded map[string]map[string]int64
}

// routes is Routes, reusing what c decoded before; a nil c decodes
// everything.
func (c *routeCache) routes(r store.Reader, space string) (Claims, error) {
	lr, err := r.List(store.ListOptions{Resource: layout.RouteResource})
	if err != nil {
		return nil, err
	}
	prefix := space + "."
	claims := Claims{}
	var next map[*store.Object][]tree.RouteDestination
	hits := 0
	if c != nil {
		next = make(map[*store.Object][]tree.RouteDestination, len(lr.Items))
	}
	for _, o := range lr.Items {
		child, ok := strings.CutPrefix(o.Key.Name, prefix)
		if !ok {
			continue
		}
		dests, ok := c.lookup(o)
		if ok {
			hits++
		} else {
			rt, err := tree.DecodeRoute(o)
			if err != nil {
				return nil, err
			}
			dests = rt.Destinations
		}
		if next != nil {
			next[o] = dests
		}
		claims[child] = dests
	}
	if c != nil {
		c.same = len(next) == len(c.decoded) && hits == len(next)
		if !c.same {
			c.superseded = nil
		}
		c.decoded = next // the versions listed now: older ones go
	}
	return claims, nil
}

func (c *routeCache) lookup(o *store.Object) ([]tree.RouteDestination, bool) {
	if c == nil {
		return nil, false
	}
	d, ok := c.decoded[o]
	return d, ok
}

// supersededOf is Claims.Superseded over the route records of space,
// through c. Without above, and while the route records stay the same, it
// answers what it answered before (the root's placement controller asks
// at every report flush, and walking every claim of a fleet of 10 000 is
// most of that): the answer is shared, read it, do not change it.
func (c *routeCache) supersededOf(r store.Reader, space string, above map[string]int64) (map[string]map[string]int64, error) {
	routes, err := c.routes(r, space)
	if err != nil {
		return nil, err
	}
	if above != nil || c == nil {
		return routes.Superseded(above), nil
	}
	if !c.same || c.superseded == nil {
		c.superseded = routes.Superseded(nil)
	}
	return c.superseded, nil
}

// Superseded returns, per child, the destinations that the child's
// route record claims and that are now reached elsewhere: another child
// claims them with a better claim, or above (what this relay's own parent
// said had moved away from it, wire.Moved) holds a later Since. Each is
// mapped to the Since of the claim that won (or above's).
//
// A destination that re-homes is claimed twice for a while: by its new
// parent at once, by its old one until the old one learns it has moved.
// Summaries must count it once, so a child holding a superseded claim is
// left out of its parent's summaries until it drops the claim; the parent
// tells it (wire.Moved).
//
// Of two claims, one that says the destination is connected beats one
// that does not (a parent marks a child's claims disconnected when the
// child's link goes down): a stale claim of a relay that is gone never
// takes a destination from the child it is connected to. Between claims
// alike in that, the greater Since wins: the generation the root gave the
// destination when it linked along that path (relay/transport/registry). Equal
// claims supersede nothing. What the parent says moved away supersedes
// only claims of destinations not connected here: a destination linked to
// a child cannot be linked elsewhere, so the parent's news is older than
// the link, and the parent learns better from this relay's announcement.
func (claims Claims) Superseded(above map[string]int64) map[string]map[string]int64 {
	best := map[string]claimRank{}
	for _, dests := range claims {
		for _, d := range dests {
			r := rankOf(d)
			if b, ok := best[d.Name]; !ok || b.less(r) {
				best[d.Name] = r
			}
		}
	}
	out := map[string]map[string]int64{}
	for child, dests := range claims {
		for _, d := range dests {
			winner := int64(0)
			if b := best[d.Name]; rankOf(d).less(b) {
				winner = b.since
			} else if a, ok := above[d.Name]; ok && d.Since < a && !d.Connected {
				winner = a
			} else {
				continue
			}
			if out[child] == nil {
				out[child] = map[string]int64{}
			}
			out[child][d.Name] = winner
		}
	}
	return out
}

// claimRank orders the claims of one destination (Superseded).
type claimRank struct {
	connected bool
	since     int64
}

func rankOf(d tree.RouteDestination) claimRank { return claimRank{d.Connected, d.Since} }

func (a claimRank) less(b claimRank) bool {
	if a.connected != b.connected {
		return b.connected
	}
	return a.since < b.since
}
