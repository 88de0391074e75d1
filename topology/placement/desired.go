package placement

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/customize"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
	"github.com/canopy-dev/canopy/topology/selection"
)

// entry is one object of the downsync space as the placements want it.
type entry struct {
	space  string        // the WDS it comes from; "" for inventory objects
	source *store.Object // its current version there
	// dests maps each destination to the Customizer chosen for it there
	// ("namespace/name", or "" for none) and the placement that chose it.
	dests map[string]choice
	// location, for a SyncTarget sent to its own destination, is the
	// Location whose labels and annotations customize the objects there
	// that name no other (v1alpha1.LocationOverridesAnnotation).
	location string
	// locOver, for a workload object, lists "destination=location" for
	// the destinations where the placement that wins there reached them
	// through another Location than their SyncTarget's location (set by
	// addInventory; only for destinations that customize it).
	locOver string
	// rename, when set, is the name the object travels under (placements
	// and collectors of every space share the downsync space:
	// reports.PlacedName).
	rename string
	// viewed: a View of its space gathers its live copies
	// (v1alpha1.ViewedAnnotation).
	viewed bool
	// placedBy lists, for a workload object, the placements that place
	// it (of every space, in the order desired visits them) and the
	// Customizer each chooses: with the placements' destinations, they
	// decide dests and the object's conflicts (patch).
	placedBy []placing
	// failures lists what customization fails for, by destination
	// (checkEntry).
	failures []failure
	// sorted and sig cache destinationList and signature once dests is
	// complete (dests only grows while desired builds it).
	sorted []string
	sig    string
}

// placing is one placement's choice for an object.
type placing struct {
	ref        scheduler.PlacementRef
	customizer string
	// expand is whether the object asks for parameter expansion
	// (v1alpha1.ExpandParametersAnnotation): with a Customizer, it makes
	// the Location a destination is reached through matter.
	expand bool
	dests  []v1alpha1.Destination
}

func samePlacing(a, b placing) bool {
	return a.ref == b.ref && a.customizer == b.customizer && a.expand == b.expand
}

// failure is an object that cannot be customized for one destination,
// charged to the placement that chose its Customizer there.
type failure struct {
	placement scheduler.PlacementRef
	message   string
}

// choice is what the placement that wins an object at a destination
// chose: the Customizer, and the Location it reached the destination
// through (empty for what travels with objects: namespaces, Customizers,
// placements).
type choice struct {
	customizer string
	placement  scheduler.PlacementRef
	location   string
	// customized: the object is customized there (a Customizer or
	// parameter expansion), so the Location matters.
	customized bool
}

// outcome is the whole computation: the downsync content, and what each
// placement matched and ran into.
type outcome struct {
	entries   map[store.Key]*entry // Space empty
	matched   map[scheduler.PlacementRef][]v1alpha1.Destination
	conflicts map[scheduler.PlacementRef][]v1alpha1.Conflict
	// failures counts, per placement, the (object, destination) pairs
	// whose customization fails; failed keeps the first few messages.
	failures map[scheduler.PlacementRef]int
	failed   map[scheduler.PlacementRef][]string
	// placed lists, per placement, the keys of the workload objects it
	// places (for its sync status: the newest source revision among them).
	placed map[scheduler.PlacementRef][]store.Key
	// sourceRev is, per entry, the source revision the downsync space
	// holds for it (v1alpha1.SourceRevisionAnnotation); set by
	// writeDownsync.
	sourceRev map[store.Key]int64
}

// latest is the newest source revision among what ref places: a
// destination that applied everything up to it is in sync.
func (o *outcome) latest(ref scheduler.PlacementRef) int64 {
	var rev int64
	for _, k := range o.placed[ref] {
		rev = max(rev, o.sourceRev[k])
	}
	return rev
}

// maxFailureMessages bounds the messages kept per placement.
const maxFailureMessages = 3

func (o *outcome) conflict(k store.Key, dest string, a, b scheduler.PlacementRef, msg string) {
	ref := v1alpha1.ObjectReference{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name}
	names := []string{placementName(a, b.Space), placementName(b, a.Space)}
	for _, p := range []scheduler.PlacementRef{a, b} {
		o.conflicts[p] = append(o.conflicts[p], v1alpha1.Conflict{
			Object: ref, Destination: dest, Placements: names, Winner: names[0], Message: msg,
		})
	}
}

// placementName names p as seen from a placement of space other: its name,
// qualified with its space when they differ.
func placementName(p scheduler.PlacementRef, other string) string {
	if p.Space == other {
		return p.Name
	}
	return p.Space + "/" + p.Name
}

// desired computes what the downsync space must hold. Spaces, then
// placements, are visited in name order, so that the first one to place
// an object on a destination wins a conflict, deterministically.
func (c *Controller) desired() *outcome {
	out := &outcome{
		entries:   map[store.Key]*entry{},
		matched:   map[scheduler.PlacementRef][]v1alpha1.Destination{},
		conflicts: map[scheduler.PlacementRef][]v1alpha1.Conflict{},
		failures:  map[scheduler.PlacementRef]int{},
		failed:    map[scheduler.PlacementRef][]string{},
		placed:    map[scheduler.PlacementRef][]store.Key{},
	}
	var ps []placing
	for _, sname := range sortedKeys(c.spaces) {
		s := c.spaces[sname]
		if len(s.placements) == 0 {
			continue // nothing of it is placed
		}
		active := c.active(s, func(ref scheduler.PlacementRef) []v1alpha1.Destination {
			dests := c.eng.Destinations(ref)
			out.matched[ref] = dests
			return dests
		})
		// Only the objects some placement selects, in key order.
		for _, k := range s.selectedKeys() {
			o := s.objects[k]
			ps = placings(s, active, k, o, ps[:0])
			for _, p := range ps {
				c.place(out, k, sname, o, p)
				out.placed[p.ref] = append(out.placed[p.ref], k)
				e := out.entries[k]
				e.placedBy = append(e.placedBy, p)
			}
		}
		for _, a := range active {
			c.addPlacement(out, s, s.placements[a.ref.Name], a.dests)
		}
		c.addNamespaces(out, s)
		c.addCustomizers(out, s)
	}
	c.addInventory(out)
	c.checkCustomization(out)
	return out
}

// active lists, in name order, the placements of s that place objects:
// valid, not being deleted, with destinations (dests gives them).
func (c *Controller) active(s *wds, dests func(scheduler.PlacementRef) []v1alpha1.Destination) []placing {
	var out []placing
	for _, pname := range sortedKeys(s.placements) {
		ps := s.placements[pname]
		if ps.err != nil || ps.obj.DeletionTimestamp != nil {
			continue
		}
		ref := scheduler.PlacementRef{Space: s.name, Name: pname}
		if d := dests(ref); len(d) > 0 {
			out = append(out, placing{ref: ref, dests: d})
		}
	}
	return out
}

// placings appends to into, in order, the placements of active that place
// object o at k, each with the Customizer it chooses.
func placings(s *wds, active []placing, k store.Key, o *store.Object, into []placing) []placing {
	if o == nil || !placeable(k, o) {
		return into
	}
	obj := selection.Object{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name, Labels: o.Labels}
	var ann map[string]string
	for _, a := range active {
		clause, ok := s.placements[a.ref.Name].selector.Matches(obj, s.nsLabels)
		if !ok {
			continue
		}
		if ann == nil {
			ann = annotationsOf(o)
		}
		a.customizer = customizerOf(ann, k, s.placements[a.ref.Name].obj.Spec.Downsync[clause].Customizer)
		a.expand = ann[v1alpha1.ExpandParametersAnnotation] == "true"
		into = append(into, a)
	}
	return into
}

// patch brings out, computed by desired, up to date with changes of
// workload objects alone (touched, with their spaces; nothing else
// changed since): it returns the keys whose entries changed, or false
// when some change needs desired again. An object whose placements and
// Customizers are the same as before keeps its destinations, conflicts,
// namespace, Customizers and inventory: only its source version, and
// what its customization finds, change. So an update costs the same with
// ten destinations as with ten thousand.
func (c *Controller) patch(out *outcome, touched map[store.Key]bool) ([]store.Key, bool) {
	type change struct {
		k store.Key
		e *entry
		o *store.Object
	}
	var changes []change
	actives := map[string][]placing{}
	var ps []placing
	for sk := range touched {
		s := c.spaces[sk.Space]
		if s == nil {
			return nil, false
		}
		k := sk
		k.Space = ""
		active, ok := actives[s.name]
		if !ok {
			active = c.active(s, func(ref scheduler.PlacementRef) []v1alpha1.Destination { return out.matched[ref] })
			actives[s.name] = active
		}
		o := s.objects[k]
		ps = placings(s, active, k, o, ps[:0])
		e := out.entries[k]
		if e == nil {
			if len(ps) > 0 {
				return nil, false // newly placed
			}
			continue
		}
		var before []placing
		for _, p := range e.placedBy {
			if p.ref.Space == s.name {
				before = append(before, p)
			}
		}
		if !slices.EqualFunc(before, ps, samePlacing) {
			return nil, false
		}
		if e.space == s.name && len(ps) > 0 {
			changes = append(changes, change{k, e, o})
		}
	}
	keys := make([]store.Key, 0, len(changes))
	tally := map[scheduler.PlacementRef]bool{}
	for _, ch := range changes {
		ch.e.source = ch.o
		c.checkEntry(out, ch.k, ch.e)
		for _, p := range ch.e.placedBy {
			tally[p.ref] = true
		}
		keys = append(keys, ch.k)
	}
	for ref := range tally {
		out.tally(ref)
	}
	slices.SortFunc(keys, compareKeys)
	return keys, true
}

// checkCustomization expands, for every destination, each object that asks
// for customization, as its edge will: a missing parameter or Customizer
// is reported in the status of the placement that put the object there
// (the edge, for its part, will not apply it half-expanded).
func (c *Controller) checkCustomization(out *outcome) {
	for k, e := range out.entries {
		c.checkEntry(out, k, e)
	}
	for ref := range out.placed {
		out.tally(ref)
	}
}

// checkEntry sets e.failures: the destinations e cannot be customized for.
func (c *Controller) checkEntry(out *outcome, k store.Key, e *entry) {
	e.failures = nil
	if e.space == "" || e.source == nil {
		return
	}
	obj := jsonMap(e.source)
	expand := annotationOf(obj, v1alpha1.ExpandParametersAnnotation) == "true"
	if !expand && !slices.ContainsFunc(e.placedBy, func(p placing) bool { return p.customizer != "" }) {
		return // no destination has a Customizer (only placings choose one)
	}
	for _, d := range e.destinationList() {
		ch := e.dests[d]
		if !expand && ch.customizer == "" {
			continue
		}
		if err := c.expandFor(out, obj, e.space, d, ch); err != nil {
			e.failures = append(e.failures, failure{ch.placement, fmt.Sprintf("%s %s/%s at %s: %v", k.Resource, k.Namespace, k.Name, d, err)})
		}
	}
}

// tally counts the failures charged to ref and keeps the first few
// messages, in key then destination order.
func (o *outcome) tally(ref scheduler.PlacementRef) {
	n := 0
	var msgs []string
	for _, k := range o.placed[ref] {
		e := o.entries[k]
		if e == nil {
			continue
		}
		for _, f := range e.failures {
			if f.placement != ref {
				continue
			}
			n++
			if len(msgs) < maxFailureMessages {
				msgs = append(msgs, f.message)
			}
		}
	}
	delete(o.failures, ref)
	delete(o.failed, ref)
	if n > 0 {
		o.failures[ref], o.failed[ref] = n, msgs
	}
}

// expandFor expands obj for destination d, where ch won it, with the
// parameters that travel to d: its SyncTarget, and the Location ch
// reached it through.
func (c *Controller) expandFor(out *outcome, obj map[string]any, space, d string, ch choice) error {
	st := c.targets[d]
	if st == nil {
		return fmt.Errorf("no SyncTarget %q", d)
	}
	loc := c.locations[ch.location]
	if ch.location == "" {
		if te := out.entries[store.Key{Resource: syncTargetsRes, Name: d}]; te != nil && te.location != "" {
			loc = c.locations[te.location]
		}
	}
	customizer := ch.customizer
	var cust *v1alpha1.Customizer
	if customizer != "" {
		ns, name, _ := strings.Cut(customizer, "/")
		o := c.spaces[space].objects[store.Key{Resource: customizersRes, Namespace: ns, Name: name}]
		if o == nil {
			return fmt.Errorf("no Customizer %s", customizer)
		}
		cust = &v1alpha1.Customizer{}
		if err := json.Unmarshal(o.Data, cust); err != nil {
			return fmt.Errorf("Customizer %s: %v", customizer, err)
		}
	}
	_, err := customize.Expand(obj, customize.ParamsFor(st, loc), cust)
	return err
}

func annotationOf(obj map[string]any, key string) string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[key].(string)
	return s
}

// addPlacement sends a placement, and the StatusCollectors it names, to
// its destinations: the edge evaluates the collectors, and reads the
// placement's clauses to know which of its objects the placement holds
// and what to upsync.
func (c *Controller) addPlacement(out *outcome, s *wds, ps *placementState, dests []v1alpha1.Destination) {
	add := func(r store.Resource, name string, src *store.Object) {
		k := store.Key{Resource: r, Name: reports.PlacedName(s.name, name)}
		e := out.entries[k]
		if e == nil {
			e = &entry{space: s.name, source: src, dests: map[string]choice{}, rename: k.Name}
			out.entries[k] = e
		}
		for _, d := range dests {
			e.dests[d.SyncTargetName] = choice{}
		}
	}
	add(placementsRes, ps.obj.Name, ps.src)
	for _, name := range ps.obj.Spec.StatusCollectors {
		if o := s.objects[store.Key{Resource: collectorsRes, Name: name}]; o != nil {
			add(collectorsRes, name, o)
		}
	}
}

// governsSpace reports whether an object of a workload description space
// with these labels governs access to that space, if it is an RBAC
// object: labelled v1alpha1.SpaceRBACLabel, or one of the default
// ClusterRoles every space is created with. Such an object is never
// placed; every other RBAC object of the space is inert there, a workload
// for its destinations (denaturing, DESIGN.md section 5).
func governsSpace(labels map[string]string) bool {
	return labels[v1alpha1.SpaceRBACLabel] == "true" || labels["kubernetes.io/bootstrapping"] == "rbac-defaults"
}

// InertInWDS is the kube API's auth.Authorizer.Inert for a root whose
// isWDS reports the workload description spaces: an RBAC object of such
// a space that does not govern it (governsSpace) takes no effect there.
func InertInWDS(isWDS func(space string) bool) func(*store.Object) bool {
	return func(obj *store.Object) bool {
		return isWDS(obj.Key.Space) && !governsSpace(obj.Labels)
	}
}

// placeable reports whether a selected object may be placed at all:
// Customizers travel with the objects that use them, the system
// namespaces exist at every destination, the RBAC objects that govern
// the space itself (and its default roles) stay in it, and objects
// upsynced from destinations are not sent back down.
func placeable(k store.Key, o *store.Object) bool {
	switch {
	case k.Resource == customizersRes, k.Resource == collectorsRes:
		return false
	case k.Resource == namespacesRes && slices.Contains(layout.SystemNamespaces, k.Name):
		return false
	case governsSpace(o.Labels):
		return false
	case o.Labels[v1alpha1.UpsyncedLabel] == "true":
		return false // it came from a destination
	}
	return true
}

// place records that placement p.ref puts object k of space on p.dests
// with Customizer p.customizer, each destination reached through its
// Location. Where another placement of the space put it first, they are
// in conflict when they customize it differently: with another
// Customizer, or through another Location when the object is customized.
func (c *Controller) place(out *outcome, k store.Key, space string, o *store.Object, p placing) {
	ref, dests, cust := p.ref, p.dests, p.customizer
	customized := p.expand || cust != ""
	e := out.entries[k]
	if e == nil {
		e = &entry{space: space, source: o, dests: map[string]choice{}, viewed: c.spaces[space].viewed(k.Resource, v1alpha1.ViewSourcePlaced)}
		out.entries[k] = e
	}
	if e.space != space {
		// The same object placed from two spaces: the first space wins on
		// every destination it places it on.
		for _, d := range dests {
			if prev, ok := e.dests[d.SyncTargetName]; ok {
				out.conflict(k, d.SyncTargetName, prev.placement, ref, fmt.Sprintf("placed from spaces %q and %q; %q wins", e.space, space, e.space))
			}
		}
		return
	}
	for _, d := range dests {
		prev, ok := e.dests[d.SyncTargetName]
		switch {
		case !ok:
			e.dests[d.SyncTargetName] = choice{customizer: cust, placement: ref, location: d.LocationName, customized: customized}
		case prev.customizer != cust:
			out.conflict(k, d.SyncTargetName, prev.placement, ref,
				fmt.Sprintf("customizers differ: %s chooses %s, %s chooses %s", prev.placement.Name, orNone(prev.customizer), ref.Name, orNone(cust)))
		case customized && prev.location != d.LocationName:
			out.conflict(k, d.SyncTargetName, prev.placement, ref,
				fmt.Sprintf("locations differ: %s reaches %s through Location %s, %s through %s", prev.placement.Name, d.SyncTargetName, prev.location, ref.Name, d.LocationName))
		}
	}
}

func orNone(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

// annotationsOf decodes an object's annotations.
func annotationsOf(o *store.Object) map[string]string {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(o.Data, &m)
	if m.Metadata.Annotations == nil {
		return map[string]string{}
	}
	return m.Metadata.Annotations
}

// customizerOf returns the Customizer ("namespace/name") an object with
// annotations ann uses: the clause's override, else its annotation; ""
// for none.
func customizerOf(ann map[string]string, k store.Key, override string) string {
	ref := override
	if ref == "" {
		ref = ann[v1alpha1.CustomizerAnnotation]
	}
	if ref == "" {
		return ""
	}
	if k.Namespace != "" && !strings.Contains(ref, "/") {
		return k.Namespace + "/" + ref
	}
	return ref
}

// addNamespaces sends the namespace of every placed namespaced object of
// space s wherever the object goes.
func (c *Controller) addNamespaces(out *outcome, s *wds) {
	for k, e := range out.entries {
		if e.space != s.name || k.Namespace == "" {
			continue
		}
		nk := store.Key{Resource: namespacesRes, Name: k.Namespace}
		o := s.objects[nk]
		if o == nil {
			continue // a namespaced object outlives its namespace briefly
		}
		ne := out.entries[nk]
		if ne == nil {
			ne = &entry{space: s.name, source: o, dests: map[string]choice{}}
			out.entries[nk] = ne
		}
		if ne.space != s.name {
			continue
		}
		for d := range e.dests {
			if _, ok := ne.dests[d]; !ok {
				ne.dests[d] = choice{}
			}
		}
	}
}

// addCustomizers sends each Customizer of space s to the destinations
// where an object uses it.
func (c *Controller) addCustomizers(out *outcome, s *wds) {
	for _, e := range slices.Collect(maps.Values(out.entries)) {
		if e.space != s.name {
			continue
		}
		for d, ch := range e.dests {
			if ch.customizer == "" {
				continue
			}
			ns, name, _ := strings.Cut(ch.customizer, "/")
			ck := store.Key{Resource: customizersRes, Namespace: ns, Name: name}
			o := s.objects[ck]
			if o == nil {
				continue // reported at the edge: the object cannot be expanded
			}
			ce := out.entries[ck]
			if ce == nil {
				ce = &entry{space: s.name, source: o, dests: map[string]choice{}}
				out.entries[ck] = ce
			}
			if ce.space == s.name {
				ce.dests[d] = choice{}
			}
		}
	}
}

// addInventory sends every destination that receives something its own
// SyncTarget and the Locations its objects are customized with (the
// parameters of customization). The SyncTarget names, as its location,
// the first Location by name that holds it (what `relay render` finds in
// the inventory too); each customized object that its winning placement
// placed there through another Location lists that one (locOver).
func (c *Controller) addInventory(out *outcome) {
	used := map[string]bool{}
	for _, e := range out.entries {
		for d := range e.dests {
			used[d] = true
		}
	}
	locNames := sortedKeys(c.locations)
	selectors := make([]labels.Selector, len(locNames))
	for i, n := range locNames {
		sel, err := metav1.LabelSelectorAsSelector(&c.locations[n].Spec.InstanceSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		selectors[i] = sel
	}
	send := func(loc, d string) {
		lk := store.Key{Resource: locationsRes, Name: loc}
		le := out.entries[lk]
		if le == nil {
			lo := c.inventoryObject(locationsRes, loc)
			if lo == nil {
				return
			}
			le = &entry{source: lo, dests: map[string]choice{}}
			out.entries[lk] = le
		}
		le.dests[d] = choice{}
	}
	own := map[string]string{} // destination: its SyncTarget's location
	for d := range used {
		st := c.targets[d]
		if st == nil {
			continue
		}
		src := c.inventoryObject(syncTargetsRes, d)
		if src == nil {
			continue
		}
		e := &entry{source: src, dests: map[string]choice{d: {}}}
		for i, sel := range selectors {
			if sel.Matches(labels.Set(st.Labels)) {
				e.location = locNames[i]
				send(e.location, d)
				break
			}
		}
		own[d] = e.location
		out.entries[store.Key{Resource: syncTargetsRes, Name: d}] = e
	}
	for _, e := range out.entries {
		e.locOver = ""
		if e.space == "" {
			continue
		}
		var over []string
		for _, d := range e.destinationList() {
			ch := e.dests[d]
			if loc, ok := own[d]; ok && ch.customized && ch.location != "" && ch.location != loc {
				over = append(over, d+"="+ch.location)
				send(ch.location, d)
			}
		}
		e.locOver = strings.Join(over, ",")
	}
}

func (c *Controller) inventoryObject(r store.Resource, name string) *store.Object {
	o, err := c.st.Get(store.Key{Space: c.cfg.Inventory, Resource: r, Name: name})
	if err != nil {
		return nil
	}
	return o
}

func compareKeys(a, b store.Key) int {
	return cmp.Or(
		cmp.Compare(a.Resource.Group, b.Resource.Group),
		cmp.Compare(a.Resource.Resource, b.Resource.Resource),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}

// destinationList returns e's destinations, sorted (not to be changed).
func (e *entry) destinationList() []string {
	if len(e.sorted) != len(e.dests) {
		e.sorted = slices.Collect(maps.Keys(e.dests))
		sort.Strings(e.sorted)
	}
	return e.sorted
}
