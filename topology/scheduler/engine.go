package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// ErrInvalidSelector wraps the error of a label selector that does not
// convert (an unknown operator, an invalid key or value, In without
// values). Such a selector selects nothing.
var ErrInvalidSelector = errors.New("scheduler: invalid label selector")

// PlacementRef names one EdgePlacement: the workload description space it
// lives in and its name there.
type PlacementRef struct {
	Space string
	Name  string
}

// String returns "space/name".
func (r PlacementRef) String() string { return r.Space + "/" + r.Name }

// Compare orders refs by space, then name: the order of every list of
// PlacementRefs the Engine returns.
func (r PlacementRef) Compare(o PlacementRef) int {
	return cmp.Or(strings.Compare(r.Space, o.Space), strings.Compare(r.Name, o.Name))
}

// Stats counts what an Engine holds.
type Stats struct {
	SyncTargets int
	Locations   int
	Placements  int
	// Memberships counts (Location, SyncTarget) pairs: a SyncTarget in
	// three Locations counts three times.
	Memberships int
	// Selections counts (placement, Location) pairs.
	Selections int
	// Destinations counts (placement, SyncTarget) pairs: the sum of every
	// placement's destinations.
	Destinations int
	// InvalidSelectors counts the selectors that did not convert:
	// Locations' instanceSelectors and placements' locationSelectors.
	InvalidSelectors int
}

// Engine matches EdgePlacements against Locations and SyncTargets and
// keeps every placement's destinations current as any of them changes
// (see the package doc for the rules and the cost of each operation).
//
// Every mutating method returns the placements whose Destinations changed
// (a destination added or removed, or a destination's Location, UID or
// labels changed), sorted by PlacementRef.Compare, and nothing else: a
// placement the Engine does not hold has no destinations, so adding a
// placement that matches nothing, or deleting one that matched nothing,
// returns an empty list.
//
// An Engine is not safe for concurrent use: call its methods from one
// goroutine. It keeps copies of what it needs from the objects it is
// given and never modifies them.
type Engine struct {
	targets    map[string]*target
	locations  map[string]*location
	placements map[PlacementRef]*placement

	// byLabel indexes targets by label: key → value → targets.
	byLabel map[string]map[string]map[*target]struct{}

	// changed collects the placements changed by the operation under way.
	changed map[*placement]struct{}

	memberships, selections, destinations, invalid int
}

// target is one SyncTarget.
type target struct {
	name   string
	uid    types.UID
	labels map[string]string // nil when none; replaced, never modified
	locs   []*location       // the Locations holding it, sorted by name
}

// location is one Location.
type location struct {
	name       string
	labels     map[string]string    // replaced, never modified
	spec       metav1.LabelSelector // as last given, to skip no-op updates
	sel        labels.Selector      // nil: selects nothing
	err        error
	members    map[*target]struct{}
	placements map[*placement]struct{} // the placements selecting it
}

// placement is one EdgePlacement.
type placement struct {
	ref  PlacementRef
	spec []metav1.LabelSelector // as last given, to skip no-op updates
	sels []labels.Selector      // the valid selectors
	errs []error                // one per invalid selector
	locs map[*location]struct{} // the Locations it selects
	// dests maps each destination to the first by name of the placement's
	// Locations holding it.
	dests map[*target]*location
}

// New returns an empty Engine.
func New() *Engine {
	return &Engine{
		targets:    map[string]*target{},
		locations:  map[string]*location{},
		placements: map[PlacementRef]*placement{},
		byLabel:    map[string]map[string]map[*target]struct{}{},
		changed:    map[*placement]struct{}{},
	}
}

// SetSyncTarget adds or updates a SyncTarget (by name). Only its name,
// UID and labels matter; a change of anything else changes nothing.
func (e *Engine) SetSyncTarget(st *v1alpha1.SyncTarget) []PlacementRef {
	t := e.targets[st.Name]
	sameLabels := t != nil && maps.Equal(t.labels, st.Labels)
	if sameLabels && t.uid == st.UID {
		return nil
	}
	if t == nil {
		t = &target{name: st.Name}
		e.targets[st.Name] = t
	} else {
		// Every placement reaching it sees a new UID or new labels, or
		// loses it.
		e.markTarget(t)
	}
	t.uid = st.UID
	if !sameLabels {
		e.unindex(t)
		t.labels = copyLabels(st.Labels)
		e.index(t)
		e.rematchTarget(t)
	}
	e.markTarget(t)
	return e.flush()
}

// rematchTarget brings t's Location memberships in line with its labels.
func (e *Engine) rematchTarget(t *target) {
	set := labels.Set(t.labels)
	var joined, left []*location
	for _, l := range e.locations {
		in := l.sel != nil && l.sel.Matches(set)
		_, was := l.members[t]
		switch {
		case in && !was:
			joined = append(joined, l)
		case was && !in:
			left = append(left, l)
		}
	}
	// Memberships first, so that decr finds t's remaining Locations.
	for _, l := range joined {
		l.members[t] = struct{}{}
		t.addLoc(l)
		e.memberships++
	}
	for _, l := range left {
		delete(l.members, t)
		t.removeLoc(l)
		e.memberships--
	}
	// Additions before removals, so that no destination is dropped and
	// re-added on the way.
	for _, l := range joined {
		for p := range l.placements {
			e.incr(p, t, l)
		}
	}
	for _, l := range left {
		for p := range l.placements {
			e.decr(p, t, l)
		}
	}
}

// DeleteSyncTarget removes a SyncTarget: it stops being a destination of
// every placement.
func (e *Engine) DeleteSyncTarget(name string) []PlacementRef {
	t := e.targets[name]
	if t == nil {
		return nil
	}
	e.markTarget(t)
	for _, l := range t.locs {
		delete(l.members, t)
		e.memberships--
		for p := range l.placements {
			if _, ok := p.dests[t]; ok {
				delete(p.dests, t)
				e.destinations--
			}
		}
	}
	e.unindex(t)
	delete(e.targets, name)
	return e.flush()
}

// SetLocation adds or updates a Location (by name). Only its name,
// labels and spec.instanceSelector matter. An instanceSelector that does
// not convert selects nothing (see LocationError).
func (e *Engine) SetLocation(lo *v1alpha1.Location) []PlacementRef {
	l := e.locations[lo.Name]
	isNew := l == nil
	newSel := isNew || !reflect.DeepEqual(l.spec, lo.Spec.InstanceSelector)
	newLabels := isNew || !maps.Equal(l.labels, lo.Labels)
	if !newSel && !newLabels {
		return nil
	}
	if isNew {
		l = &location{
			name:       lo.Name,
			members:    map[*target]struct{}{},
			placements: map[*placement]struct{}{},
		}
		e.locations[lo.Name] = l
	}

	// Which placements select it, before and after.
	var oldOnly, newOnly []*placement
	if newLabels {
		l.labels = copyLabels(lo.Labels)
		set := labels.Set(l.labels)
		for _, p := range e.placements {
			in := p.selects(set)
			_, was := l.placements[p]
			switch {
			case in && !was:
				newOnly = append(newOnly, p)
			case was && !in:
				oldOnly = append(oldOnly, p)
			}
		}
	}

	// Which SyncTargets it holds, before and after.
	var joined, gone []*target
	if newSel {
		lo.Spec.InstanceSelector.DeepCopyInto(&l.spec)
		if l.err != nil {
			e.invalid--
		}
		l.sel, l.err = convert(&l.spec)
		if l.err != nil {
			l.err = fmt.Errorf("location %s: spec.instanceSelector: %w", l.name, l.err)
			e.invalid++
		}
		for t := range l.members {
			if l.sel == nil || !l.sel.Matches(labels.Set(t.labels)) {
				gone = append(gone, t)
			}
		}
		e.eachCandidate(l.sel, func(t *target) {
			if _, was := l.members[t]; !was && l.sel.Matches(labels.Set(t.labels)) {
				joined = append(joined, t)
			}
		})
	}

	// Each (placement, target) pair is touched by at most one of the steps
	// below, so every change marked is a real one.
	for _, p := range oldOnly { // with the old members
		delete(l.placements, p)
		delete(p.locs, l)
		e.selections--
		for t := range l.members {
			e.decr(p, t, l)
		}
	}
	for _, t := range joined {
		l.members[t] = struct{}{}
		t.addLoc(l)
		e.memberships++
	}
	for _, t := range gone {
		delete(l.members, t)
		t.removeLoc(l)
		e.memberships--
	}
	for p := range l.placements { // selecting it before and after
		for _, t := range joined {
			e.incr(p, t, l)
		}
		for _, t := range gone {
			e.decr(p, t, l)
		}
	}
	for _, p := range newOnly { // with the new members
		l.placements[p] = struct{}{}
		p.locs[l] = struct{}{}
		e.selections++
		for t := range l.members {
			e.incr(p, t, l)
		}
	}
	return e.flush()
}

// DeleteLocation removes a Location: the placements selecting it lose the
// SyncTargets that no other of their Locations holds, and the others are
// reported with their next Location by name.
func (e *Engine) DeleteLocation(name string) []PlacementRef {
	l := e.locations[name]
	if l == nil {
		return nil
	}
	for p := range l.placements {
		delete(p.locs, l)
		e.selections--
		for t := range l.members {
			e.decr(p, t, l)
		}
	}
	for t := range l.members {
		t.removeLoc(l)
		e.memberships--
	}
	if l.err != nil {
		e.invalid--
	}
	delete(e.locations, name)
	return e.flush()
}

// SetPlacement adds or updates the EdgePlacement ref. Only
// spec.locationSelectors matter (ep's own name and space are not read). A
// selector that does not convert selects nothing; the others still
// select (see Errors). The result holds at most ref.
func (e *Engine) SetPlacement(ref PlacementRef, ep *v1alpha1.EdgePlacement) []PlacementRef {
	p := e.placements[ref]
	if p == nil {
		p = &placement{ref: ref, locs: map[*location]struct{}{}, dests: map[*target]*location{}}
		e.placements[ref] = p
	} else if reflect.DeepEqual(p.spec, ep.Spec.LocationSelectors) {
		return nil
	}
	p.spec = p.spec[:0]
	for i := range ep.Spec.LocationSelectors {
		p.spec = append(p.spec, *ep.Spec.LocationSelectors[i].DeepCopy())
	}
	if len(ep.Spec.LocationSelectors) == 0 {
		p.spec = nil
	}
	e.invalid -= len(p.errs)
	p.sels, p.errs = p.sels[:0], nil
	for i := range p.spec {
		sel, err := convert(&p.spec[i])
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("placement %s: spec.locationSelectors[%d]: %w", ref, i, err))
			continue
		}
		p.sels = append(p.sels, sel)
	}
	e.invalid += len(p.errs)

	var added, removed []*location
	for _, l := range e.locations {
		in := p.selects(labels.Set(l.labels))
		_, was := p.locs[l]
		switch {
		case in && !was:
			added = append(added, l)
		case was && !in:
			removed = append(removed, l)
		}
	}
	if len(p.dests) == 0 && len(added) > 0 { // size the map once
		hint := 0
		for _, l := range added {
			hint += len(l.members)
		}
		p.dests = make(map[*target]*location, hint)
	}
	// Additions before removals, so that no destination is dropped and
	// re-added on the way.
	for _, l := range added {
		p.locs[l] = struct{}{}
		l.placements[p] = struct{}{}
		e.selections++
		for t := range l.members {
			e.incr(p, t, l)
		}
	}
	for _, l := range removed {
		delete(p.locs, l)
		delete(l.placements, p)
		e.selections--
		for t := range l.members {
			e.decr(p, t, l)
		}
	}
	return e.flush()
}

// DeletePlacement forgets the EdgePlacement ref. The result is [ref] when
// it had destinations.
func (e *Engine) DeletePlacement(ref PlacementRef) []PlacementRef {
	p := e.placements[ref]
	if p == nil {
		return nil
	}
	for l := range p.locs {
		delete(l.placements, p)
	}
	e.selections -= len(p.locs)
	e.destinations -= len(p.dests)
	e.invalid -= len(p.errs)
	delete(e.placements, ref)
	if len(p.dests) == 0 {
		return nil
	}
	return []PlacementRef{ref}
}

// Destinations returns the destinations of placement ref, sorted by
// SyncTargetName (nil when it has none or is unknown). Their Labels maps
// are shared with the Engine: do not modify them.
func (e *Engine) Destinations(ref PlacementRef) []v1alpha1.Destination {
	p := e.placements[ref]
	if p == nil || len(p.dests) == 0 {
		return nil
	}
	type pair struct {
		t   *target
		loc *location
	}
	pairs := make([]pair, 0, len(p.dests))
	for t, loc := range p.dests {
		pairs = append(pairs, pair{t, loc})
	}
	slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.t.name, b.t.name) })
	out := make([]v1alpha1.Destination, len(pairs))
	for i, pr := range pairs {
		out[i] = v1alpha1.Destination{
			SyncTargetName: pr.t.name,
			SyncTargetUID:  pr.t.uid,
			LocationName:   pr.loc.name,
			Labels:         pr.t.labels,
		}
	}
	return out
}

// DestinationCount returns how many destinations placement ref has,
// without building them.
func (e *Engine) DestinationCount(ref PlacementRef) int {
	if p := e.placements[ref]; p != nil {
		return len(p.dests)
	}
	return 0
}

// PlacementsOf returns the placements that have the SyncTarget name as a
// destination, sorted.
func (e *Engine) PlacementsOf(syncTarget string) []PlacementRef {
	t := e.targets[syncTarget]
	if t == nil {
		return nil
	}
	e.markTarget(t)
	return e.flush()
}

// Errors returns the errors of placement ref's locationSelectors that did
// not convert (each wraps ErrInvalidSelector and names the selector's
// index); nil when all converted or ref is unknown.
func (e *Engine) Errors(ref PlacementRef) []error {
	if p := e.placements[ref]; p != nil {
		return slices.Clone(p.errs)
	}
	return nil
}

// LocationError returns the error of the Location's instanceSelector when
// it did not convert (it wraps ErrInvalidSelector), else nil.
func (e *Engine) LocationError(name string) error {
	if l := e.locations[name]; l != nil {
		return l.err
	}
	return nil
}

// Stats counts what the Engine holds.
func (e *Engine) Stats() Stats {
	return Stats{
		SyncTargets:      len(e.targets),
		Locations:        len(e.locations),
		Placements:       len(e.placements),
		Memberships:      e.memberships,
		Selections:       e.selections,
		Destinations:     e.destinations,
		InvalidSelectors: e.invalid,
	}
}

// incr records that Location l of placement p now holds target t.
func (e *Engine) incr(p *placement, t *target, l *location) {
	cur, ok := p.dests[t]
	switch {
	case !ok:
		e.destinations++
	case l.name >= cur.name:
		return
	}
	p.dests[t] = l
	e.changed[p] = struct{}{}
}

// decr records that Location l no longer links placement p to target t.
// l must already be gone from t.locs or from p.locs.
//
// Within one operation, a destination's Location may be one that the
// operation is taking away and has not reached yet (incr and decr need
// not run in name order); the decr for that Location then fixes it. So
// every operation calls decr for every (placement, target, Location)
// link it breaks.
func (e *Engine) decr(p *placement, t *target, l *location) {
	if cur, ok := p.dests[t]; !ok || cur != l {
		return // another Location still links them
	}
	e.changed[p] = struct{}{}
	for _, m := range t.locs {
		if _, ok := p.locs[m]; ok {
			p.dests[t] = m
			return
		}
	}
	delete(p.dests, t)
	e.destinations--
}

// markTarget marks every placement that t is a destination of.
func (e *Engine) markTarget(t *target) {
	for _, l := range t.locs {
		for p := range l.placements {
			e.changed[p] = struct{}{}
		}
	}
}

// flush returns the marked placements, sorted, and clears the marks.
func (e *Engine) flush() []PlacementRef {
	if len(e.changed) == 0 {
		return nil
	}
	out := make([]PlacementRef, 0, len(e.changed))
	for p := range e.changed {
		out = append(out, p.ref)
	}
	clear(e.changed)
	slices.SortFunc(out, PlacementRef.Compare)
	return out
}

func (e *Engine) index(t *target) {
	for k, v := range t.labels {
		byV := e.byLabel[k]
		if byV == nil {
			byV = map[string]map[*target]struct{}{}
			e.byLabel[k] = byV
		}
		set := byV[v]
		if set == nil {
			set = map[*target]struct{}{}
			byV[v] = set
		}
		set[t] = struct{}{}
	}
}

func (e *Engine) unindex(t *target) {
	for k, v := range t.labels {
		byV := e.byLabel[k]
		delete(byV[v], t)
		if len(byV[v]) == 0 {
			delete(byV, v)
			if len(byV) == 0 {
				delete(e.byLabel, k)
			}
		}
	}
}

// eachCandidate calls f for every target that sel may match: those
// holding one of the values of sel's most selective equality or In
// requirement, else all of them. f must still test sel.
func (e *Engine) eachCandidate(sel labels.Selector, f func(*target)) {
	if sel == nil {
		return
	}
	reqs, _ := sel.Requirements()
	var best []map[*target]struct{}
	bestN := -1
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		byV := e.byLabel[r.Key()]
		var sets []map[*target]struct{}
		n := 0
		for v := range r.Values() {
			if s := byV[v]; len(s) > 0 {
				sets = append(sets, s)
				n += len(s)
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = sets, n
		}
	}
	if bestN < 0 {
		for _, t := range e.targets {
			f(t)
		}
		return
	}
	// A target has one value per key, so the sets are disjoint.
	for _, s := range best {
		for t := range s {
			f(t)
		}
	}
}

func (p *placement) selects(set labels.Set) bool {
	for _, s := range p.sels {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

func (t *target) addLoc(l *location) {
	i, _ := slices.BinarySearchFunc(t.locs, l.name, func(m *location, name string) int {
		return strings.Compare(m.name, name)
	})
	t.locs = slices.Insert(t.locs, i, l)
}

func (t *target) removeLoc(l *location) {
	if i := slices.Index(t.locs, l); i >= 0 {
		t.locs = slices.Delete(t.locs, i, i+1)
	}
}

// convert turns a LabelSelector into a labels.Selector: {} selects
// everything; an error selects nothing (nil).
func convert(ls *metav1.LabelSelector) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSelector, err)
	}
	return sel, nil
}

func copyLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
