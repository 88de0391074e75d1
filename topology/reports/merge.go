package reports

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/status"
)

// Merged is what a relay's children reported, merged: one partial and
// one placement sync per key, and the forwarded objects (upsynced, live
// copies Views gather, live state of objects with one destination) and
// the links of the relays below (LinksResource) unchanged.
type Merged struct {
	Partials  map[store.Key]Partial
	Syncs     map[store.Key]PlacementSync
	Forwarded map[store.Key]*store.Object
	Relays    map[store.Key]*store.Object
	// decoded is what Decoded.Merge decoded, by the reports' own keys:
	// where Encoded keeps the Canonical form of each forwarded version
	// once made, so that a tier that merges after every burst encodes each
	// version once (and one that never encodes pays nothing). The next
	// Merge clears it: Encoded then encodes again.
	decoded map[store.Key]decodedReport
}

// Merge merges the reports of several children (each a list of a
// reports-<child> space's objects), leaving the relays' links out
// (Decoded.Relays). Children report disjoint
// destinations, so their partials and placement syncs merge; a forwarded
// object or relay link reported by two children (a destination or relay
// that moved) is taken from
// the first child in the order given, so callers pass children in a stable
// order.
//
// wantForward says whether a child's report that is neither a partial nor
// a placement sync travels on (nil: every one that names its destination).
func Merge(children [][]*store.Object, wantForward func(*store.Object) bool) Merged {
	return new(Decoded).Merge(children, wantForward)
}

// Decoded remembers what Merge decoded of each report, by store key and
// revision, so that merging again after a few reports changed decodes only
// those: a root or region merges all its children's reports after each
// burst. The zero value is ready; a Decoded serves one goroutine.
type Decoded struct {
	// Relays keeps the links of the relays below (Merged.Relays, one
	// report per relay with children), for a tier that forwards them (a
	// region); without it they are left out (the root gathers them
	// itself).
	Relays bool

	reports map[store.Key]decodedReport
	spare   map[store.Key]decodedReport // the map before last, cleared: the next call fills it
}

// decodedReport is one report as Merge uses it.
type decodedReport struct {
	rev       int64
	partial   *Partial
	sync      *PlacementSync
	forwarded bool // names the destination it comes from
	relay     bool // a link to a relay below
	bad       bool // malformed: counts for nothing
	// canonical is the report's Canonical form once Encoded made it
	// (forwarded objects and relays).
	canonical *[]byte
}

func decodeReport(o *store.Object) decodedReport {
	d := decodedReport{rev: o.Revision}
	switch o.Key.Resource {
	case PartialResource:
		p, err := Decode[Partial](o.Data)
		d.partial, d.bad = &p, err != nil
	case PlacementSyncResource:
		s, err := Decode[PlacementSync](o.Data)
		d.sync, d.bad = &s, err != nil
	case LinksResource:
		d.relay, d.canonical = true, new([]byte)
	default:
		if d.forwarded = isForwarded(o); d.forwarded {
			d.canonical = new([]byte)
		}
	}
	return d
}

// Merge is the package's Merge, decoding only the reports (by key and
// revision) that the previous call did not; it forgets those not given.
// The Merged it returns shares decoded reports with d: callers read it
// and do not change it.
func (d *Decoded) Merge(children [][]*store.Object, wantForward func(*store.Object) bool) Merged {
	m := Merged{Partials: map[store.Key]Partial{}, Syncs: map[store.Key]PlacementSync{}, Forwarded: map[store.Key]*store.Object{}, Relays: map[store.Key]*store.Object{}}
	partials := map[store.Key][]*Partial{}
	syncs := map[store.Key][]PlacementSync{}
	seen := d.spare
	if seen == nil {
		seen = make(map[store.Key]decodedReport, len(d.reports))
	}
	for _, objs := range children {
		for _, o := range objs {
			if o.Key.Resource == LinksResource && !d.Relays {
				continue // not even remembered
			}
			r, ok := d.reports[o.Key]
			if !ok || r.rev != o.Revision {
				r = decodeReport(o)
			}
			seen[o.Key] = r
			k := o.Key
			k.Space = ""
			switch {
			case r.bad:
			case r.partial != nil:
				partials[k] = append(partials[k], r.partial)
			case r.sync != nil:
				syncs[k] = append(syncs[k], *r.sync)
			case r.relay:
				if _, ok := m.Relays[k]; !ok {
					m.Relays[k] = o
				}
			case r.forwarded && (wantForward == nil || wantForward(o)):
				if _, ok := m.Forwarded[k]; !ok {
					m.Forwarded[k] = o
				}
			}
		}
	}
	clear(d.reports)
	d.reports, d.spare = seen, d.reports
	m.decoded = seen
	for k, ps := range partials {
		merged := *ps[0]
		if len(ps) > 1 {
			parts := make([]status.Partial, len(ps))
			for i, p := range ps {
				parts[i] = p.Partial
			}
			merged.Partial = status.MergeAll(parts...)
		}
		m.Partials[k] = merged
	}
	for k, ss := range syncs {
		m.Syncs[k] = MergeSync(ss...)
	}
	return m
}

// isForwarded reports whether a report is one that travels up unchanged:
// it names the destination it comes from.
func isForwarded(o *store.Object) bool { return DestinationOf(o) != "" }

// DestinationOf returns the destination a forwarded report comes from.
func DestinationOf(o *store.Object) string {
	return annotations(o.Data)[v1alpha1.DestinationAnnotation]
}

// ForwardedOf returns the destination a forwarded report comes from, and
// whether it is the live copy of a placed object that a View gathers
// (v1alpha1.ViewedAnnotation) rather than an upsynced object.
func ForwardedOf(o *store.Object) (dest string, viewed bool) {
	a := annotations(o.Data)
	return a[v1alpha1.DestinationAnnotation], a[v1alpha1.ViewedAnnotation] == "true"
}

// annotations reads the annotations of an object's JSON.
func annotations(data []byte) map[string]string {
	var md struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &md)
	return md.Metadata.Annotations
}

// Encoded returns the stored form of every merged report, by key, for a
// tier that reports them upward in turn.
func (m Merged) Encoded() (map[store.Key][]byte, error) {
	out := make(map[store.Key][]byte, len(m.Partials)+len(m.Syncs)+len(m.Forwarded)+len(m.Relays))
	for k, p := range m.Partials {
		b, err := Encode(KindPartial, k.Name, p)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	for k, s := range m.Syncs {
		b, err := Encode(KindPlacementSync, k.Name, s)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	for _, objs := range []map[store.Key]*store.Object{m.Forwarded, m.Relays} {
		for k, o := range objs {
			c := m.decoded[o.Key].canonical
			if c == nil {
				c = new([]byte)
			}
			if *c == nil {
				*c = Canonical(o.Data)
			}
			out[k] = *c
		}
	}
	return out, nil
}

// Canonical returns an object's JSON without metadata.resourceVersion
// (which each store assigns anew), re-encoded with sorted keys: two
// versions with equal content are byte-equal.
func Canonical(data []byte) []byte {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return b
}

// SortedKeys returns the keys of a map of reports in a stable order: by
// their String form, each formatted once.
func SortedKeys[V any](m map[store.Key]V) []store.Key {
	type named struct {
		k store.Key
		s string
	}
	all := make([]named, 0, len(m))
	for k := range m {
		all = append(all, named{k, k.String()})
	}
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.s, b.s) })
	keys := make([]store.Key, len(all))
	for i, n := range all {
		keys[i] = n.k
	}
	return keys
}

// ForwardFilter is the wantForward of Merge for a relay whose placed
// objects are in placedSpace of r: upsynced objects and the live copies
// Views gather (neither is placed from above under its key) travel on,
// and so does the live state of a placed object with a single
// destination (a candidate for singleton status). The live state of
// objects placed on several destinations is summarized by collectors
// instead: forwarding it would bring every destination's copy to the root.
//
// Each placed object is read once per filter: a filter serves one Merge,
// in which every child may report the same object (at a root with
// thousands of children, a placed object's destination list is long).
func ForwardFilter(r store.Reader, placedSpace string) func(*store.Object) bool {
	single := map[store.Key]bool{}
	return func(o *store.Object) bool {
		k := o.Key
		k.Space = placedSpace
		if s, ok := single[k]; ok {
			return s
		}
		s := true // not placed here: upsynced
		if placed, err := r.Get(k); err == nil {
			d := annotations(placed.Data)[v1alpha1.DestinationsAnnotation]
			s = d != "" && !strings.Contains(d, ",")
		}
		single[k] = s
		return s
	}
}
