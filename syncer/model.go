package syncer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/selection"
	"github.com/canopy-dev/canopy/topology/status"
)

// Inbox resources of Canopy's own objects that drive reporting.
var (
	placementsResource = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceEdgePlacements}
	collectorsResource = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceStatusCollectors}
	targetsResource    = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}
	namespacesResource = store.Resource{Resource: "namespaces"}
)

// model is what the inbox says about reporting at this destination: the
// EdgePlacements that place something here, the StatusCollectors they
// name, which placed objects each placement holds, and what collectors see
// of the destination. buildModel makes it from one list of the inbox; it
// is immutable afterwards (a new list makes a new model).
type model struct {
	dest    status.Destination
	destRev int64 // inbox revision of the SyncTarget (0: none)

	placements map[reports.PlacementRef]*edgePlacement
	refs       []reports.PlacementRef // sorted
	collectors map[reports.PlacementRef]*collector
	objects    map[store.Key]*placedObject
	// held lists, per placement, the keys of the objects it holds, sorted.
	held map[reports.PlacementRef][]store.Key
	// upsync is every upsync clause of every placement, in placement
	// order.
	upsync []upsyncRule
	// viewed holds the inbox keys of the objects for this destination
	// whose live copies Views gather (v1alpha1.ViewedAnnotation).
	viewed map[store.Key]bool
	// metas are the inbox objects' metadata by inbox key, decoded once
	// per revision: the next model lends those that did not change.
	metas map[store.Key]metaAt
}

// metaAt is an inbox object's metadata at an inbox revision. Models share
// it; nothing changes it.
type metaAt struct {
	rev int64
	om  objectMeta
}

// edgePlacement is one EdgePlacement of the inbox, compiled.
type edgePlacement struct {
	ref        reports.PlacementRef
	rev        int64 // inbox revision
	selector   *selection.Selector
	collectors []string // spec.statusCollectors
	upsync     []v1alpha1.UpsyncClause
	err        error // the downsync clauses do not compile
}

// collector is one StatusCollector of the inbox, compiled (c nil and err
// set when it does not compile).
type collector struct {
	rev int64
	c   *status.Collector
	err error
}

// placedObject is one workload object of the inbox for this destination
// that some placement holds.
type placedObject struct {
	key        store.Key // Space empty
	rev        int64     // inbox revision
	srcRev     int64     // v1alpha1.SourceRevisionAnnotation (0 when absent)
	placements []reports.PlacementRef
}

// objectMeta is what the model reads of an inbox object.
type objectMeta struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// buildModel reads the model from a list of the inbox. prev, when not
// nil, lends the metadata, compiled placements and collectors whose inbox
// revision did not change. Objects of a space are matched only against
// placements of that space (v1alpha1.SourceAnnotation); Namespace labels are those
// of the Namespace objects of the inbox. A placement or an object whose
// v1alpha1.DestinationsAnnotation does not name self is not for this
// destination and is left out.
func buildModel(prev *model, inbox []*store.Object, self string) *model {
	m := &model{
		placements: map[reports.PlacementRef]*edgePlacement{},
		collectors: map[reports.PlacementRef]*collector{},
		objects:    map[store.Key]*placedObject{},
		held:       map[reports.PlacementRef][]store.Key{},
		dest:       status.Destination{Name: self},
		metas:      make(map[store.Key]metaAt, len(inbox)),
	}
	type candidate struct {
		key    store.Key
		rev    int64
		space  string
		labels map[string]string
		srcRev int64
	}
	var objs []candidate
	nsOf := map[string]map[string]map[string]string{} // Namespace labels by space, then name
	for _, o := range inbox {
		ma, ok := metaAt{}, false
		if prev != nil {
			ma, ok = prev.metas[o.Key]
		}
		if !ok || ma.rev != o.Revision {
			ma = metaAt{rev: o.Revision}
			if json.Unmarshal(o.Data, &ma.om) != nil {
				continue
			}
		}
		m.metas[o.Key] = ma
		om := ma.om
		ann := om.Metadata.Annotations
		if d, ok := ann[v1alpha1.DestinationsAnnotation]; ok && !listed(d, self) {
			continue
		}
		k := o.Key
		k.Space = ""
		space := ann[v1alpha1.SourceAnnotation]
		if k.Resource.Group == v1alpha1.GroupName {
			switch k.Resource {
			case targetsResource:
				if k.Name == self {
					m.dest.Labels, m.destRev = om.Metadata.Labels, o.Revision
				}
			case placementsResource:
				ref := placedRef(space, k.Name)
				var p *edgePlacement
				if prev != nil {
					if pp := prev.placements[ref]; pp != nil && pp.rev == o.Revision {
						p = pp
					}
				}
				if p == nil {
					p = compilePlacement(ref, o)
				}
				m.placements[ref] = p
			case collectorsResource:
				ref := placedRef(space, k.Name)
				var c *collector
				if prev != nil {
					if pc := prev.collectors[ref]; pc != nil && pc.rev == o.Revision {
						c = pc
					}
				}
				if c == nil {
					c = compileCollector(ref, o)
				}
				m.collectors[ref] = c
			}
			continue
		}
		if k.Resource == namespacesResource {
			if nsOf[space] == nil {
				nsOf[space] = map[string]map[string]string{}
			}
			nsOf[space][k.Name] = om.Metadata.Labels
		}
		if ann[v1alpha1.ViewedAnnotation] == "true" {
			if m.viewed == nil {
				m.viewed = map[store.Key]bool{}
			}
			m.viewed[k] = true
		}
		srcRev, _ := strconv.ParseInt(ann[v1alpha1.SourceRevisionAnnotation], 10, 64)
		objs = append(objs, candidate{key: k, rev: o.Revision, space: space, labels: om.Metadata.Labels, srcRev: srcRev})
	}
	for ref := range m.placements {
		m.refs = append(m.refs, ref)
	}
	slices.SortFunc(m.refs, comparePlacementRefs)
	for _, ref := range m.refs {
		for _, u := range m.placements[ref].upsync {
			m.upsync = append(m.upsync, newUpsyncRule(u))
		}
	}
	for _, c := range objs {
		spaceNS := nsOf[c.space]
		lookup := func(ns string) map[string]string { return spaceNS[ns] }
		for _, ref := range m.refs {
			p := m.placements[ref]
			if ref.Space != c.space || p.err != nil {
				continue
			}
			if _, ok := p.selector.Matches(selection.Object{Group: c.key.Resource.Group, Resource: c.key.Resource.Resource,
				Namespace: c.key.Namespace, Name: c.key.Name, Labels: c.labels}, lookup); !ok {
				continue
			}
			po := m.objects[c.key]
			if po == nil {
				po = &placedObject{key: c.key, rev: c.rev, srcRev: c.srcRev}
				m.objects[c.key] = po
			}
			po.placements = append(po.placements, ref)
			m.held[ref] = append(m.held[ref], c.key)
		}
	}
	for ref := range m.held {
		slices.SortFunc(m.held[ref], compareKeys)
	}
	return m
}

// placedRef names the placement (or collector) that travels as name from
// space (reports.PlacedName).
func placedRef(space, name string) reports.PlacementRef {
	if space != "" {
		if orig, ok := strings.CutPrefix(name, space+"."); ok {
			return reports.PlacementRef{Space: space, Name: orig}
		}
	}
	if sp, orig, ok := reports.SplitPlacedName(name); ok {
		return reports.PlacementRef{Space: sp, Name: orig}
	}
	return reports.PlacementRef{Space: space, Name: name}
}

func compilePlacement(ref reports.PlacementRef, o *store.Object) *edgePlacement {
	p := &edgePlacement{ref: ref, rev: o.Revision}
	var ep v1alpha1.EdgePlacement
	if err := json.Unmarshal(o.Data, &ep); err != nil {
		p.err = fmt.Errorf("%w: edgeplacement %s: %v", ErrInvalidObject, ref, err)
		return p
	}
	p.collectors, p.upsync = ep.Spec.StatusCollectors, ep.Spec.Upsync
	p.selector, p.err = selection.Compile(ep.Spec.Downsync)
	return p
}

func compileCollector(ref reports.PlacementRef, o *store.Object) *collector {
	c := &collector{rev: o.Revision}
	var sc v1alpha1.StatusCollector
	if err := json.Unmarshal(o.Data, &sc); err != nil {
		c.err = fmt.Errorf("%w: statuscollector %s: %v", ErrInvalidObject, ref, err)
		return c
	}
	sc.Name = ref.Name
	compiled, errs := compileShared(&sc)
	if len(errs) > 0 {
		c.err = fmt.Errorf("statuscollector %s: %v", ref, errs.ToAggregate())
		return c
	}
	c.c = compiled
	return c
}

// collectorsOf returns the compiled collectors placement ref names, in
// the order it names them; those missing from the inbox or that do not
// compile are left out.
func (m *model) collectorsOf(ref reports.PlacementRef) []*status.Collector {
	p := m.placements[ref]
	if p == nil {
		return nil
	}
	var out []*status.Collector
	for _, name := range p.collectors {
		if c := m.collectors[reports.PlacementRef{Space: ref.Space, Name: name}]; c != nil && c.c != nil {
			out = append(out, c.c)
		}
	}
	return out
}

// evaluated reports whether some placement holding k names a collector:
// only then are k's associated objects watched and its partials computed.
func (m *model) evaluated(k store.Key) bool {
	po := m.objects[k]
	if po == nil {
		return false
	}
	for _, ref := range po.placements {
		if len(m.collectorsOf(ref)) > 0 {
			return true
		}
	}
	return false
}

// signature sums up what an object's partials depend on besides its live
// state and associated objects: its inbox version, its placements and
// their collectors, the destination, and whether its apply failed.
func (m *model) signature(k store.Key, failure string) string {
	po := m.objects[k]
	if po == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%d|%s", po.rev, m.destRev, failure)
	for _, ref := range po.placements {
		p := m.placements[ref]
		fmt.Fprintf(&b, "|%s@%d", ref, p.rev)
		for _, name := range p.collectors {
			if c := m.collectors[reports.PlacementRef{Space: ref.Space, Name: name}]; c != nil {
				fmt.Fprintf(&b, ",%s@%d", name, c.rev)
			}
		}
	}
	return b.String()
}

func comparePlacementRefs(a, b reports.PlacementRef) int {
	if c := strings.Compare(a.Space, b.Space); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func compareKeys(a, b store.Key) int {
	return strings.Compare(KeyString(a), KeyString(b))
}
