package tree

import (
	"maps"
	"strings"

	"github.com/canopy-dev/canopy/relay/store"
)

// Superseded returns, per child of space, the destinations that the child's
// route record claims and that are now reached elsewhere: another child
// claims them with a later Since, or above (what this relay's own parent
// said had moved away from it, wire.Moved) holds a later Since. Each is
// mapped to the newest Since known for it.
//
// A destination that re-homes is claimed twice for a while: by its new
// parent at once, by its old one until the old one learns it has moved.
// Summaries must count it once, so a child holding a superseded claim is
// left out of its parent's summaries until it drops the claim; the parent
// tells it (wire.Moved). Claims with equal Since (or none) supersede
// nothing.
func Superseded(r store.Reader, space string, above map[string]int64) (map[string]map[string]int64, error) {
	routes, err := Routes(r, space)
	if err != nil {
		return nil, err
	}
	return routes.Superseded(above), nil
}

// Claims maps each child of a space to the destinations its route record
// lists.
type Claims map[string][]RouteDestination

// Routes reads the route records of every child of space, decoding each
// once.
func Routes(r store.Reader, space string) (Claims, error) {
	return (*RouteCache)(nil).Routes(r, space)
}

// RouteCache keeps the route records it decoded, by stored version (a
// stored object never changes), for a caller that reads them again and
// again: the root's placement controller reads every child's record for
// each report it merges, and at 10 000 destinations decoding them was a
// sixth of the root's CPU. The Claims it returns share their slices with
// the cache: read them, do not change them. Not safe for concurrent use.
type RouteCache struct {
	decoded map[*store.Object][]RouteDestination
	// same says that the last Routes listed the versions the one before
	// did; superseded is what Superseded answered for them without
	// above (nil: not known).
	same       bool
	superseded map[string]map[string]int64
}

// Routes is the package's Routes, reusing what c decoded before; a nil c
// decodes everything.
func (c *RouteCache) Routes(r store.Reader, space string) (Claims, error) {
	lr, err := r.List(store.ListOptions{Resource: RouteResource})
	if err != nil {
		return nil, err
	}
	prefix := space + "."
	claims := Claims{}
	var next map[*store.Object][]RouteDestination
	hits := 0
	if c != nil {
		next = make(map[*store.Object][]RouteDestination, len(lr.Items))
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
			rt, err := decodeRoute(o)
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

func (c *RouteCache) lookup(o *store.Object) ([]RouteDestination, bool) {
	if c == nil {
		return nil, false
	}
	d, ok := c.decoded[o]
	return d, ok
}

// Superseded is the package's Superseded, through c. Without above, and
// while the route records stay the same, it answers what it answered
// before (the root's placement controller asks at every report flush,
// and walking every claim of a fleet of 10 000 is most of that): the
// answer is shared, read it, do not change it.
func (c *RouteCache) Superseded(r store.Reader, space string, above map[string]int64) (map[string]map[string]int64, error) {
	routes, err := c.Routes(r, space)
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

// Superseded is Superseded over claims already read.
func (claims Claims) Superseded(above map[string]int64) map[string]map[string]int64 {
	newest := maps.Clone(above)
	if newest == nil {
		newest = map[string]int64{}
	}
	for _, dests := range claims {
		for _, d := range dests {
			if d.Since > newest[d.Name] {
				newest[d.Name] = d.Since
			}
		}
	}
	out := map[string]map[string]int64{}
	for child, dests := range claims {
		for _, d := range dests {
			if n := newest[d.Name]; d.Since < n {
				if out[child] == nil {
					out[child] = map[string]int64{}
				}
				out[child][d.Name] = n
			}
		}
	}
	return out
}
