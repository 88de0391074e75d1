package scheduler

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Changes is what to write to bring one placement's SinglePlacementSlices
// in line with its destinations.
type Changes struct {
	// Write holds the slices to create or replace, by name. Each list is
	// sorted by SyncTargetName, then LocationName, and holds at most the
	// Pager's size.
	Write map[string][]v1alpha1.Destination
	// Delete lists, sorted, the slices to delete. It never names a slice
	// of Write.
	Delete []string
}

// Empty reports whether there is nothing to write or delete.
func (c Changes) Empty() bool { return len(c.Write) == 0 && len(c.Delete) == 0 }

// Pager pages one placement's destinations into SinglePlacementSlices of
// at most size destinations each, so that a small change rewrites few
// slices. Its state is the slices as the store holds them once the
// Changes it returned are written; NewPager rebuilds it from the store
// after a restart, and the result is the same as if the Pager had lived
// on. Its output is a function of that state and its input only.
//
// The rules, applied in this order by Update and Apply:
//
//  1. A destination that stays keeps its slice; a changed one (UID,
//     Location or labels) is rewritten in place.
//  2. A destination that goes leaves its slice.
//  3. New destinations, in SyncTargetName order, fill the slice with the
//     most room until it is full, then the slice with the most room
//     after it, and so on (ties: the lower slice number first); when no
//     slice has room, a new slice is made, named "<placement>-<n>" with
//     the smallest n not in use.
//  4. A slice left empty is deleted.
//  5. Compaction: while there are more than ceil(n/size)+1 slices for n
//     destinations, the slice with the fewest destinations (ties: the
//     highest number) is deleted and its destinations are placed as in
//     rule 3. So slices never outnumber the minimum by more than one, and
//     a single removal compacts only when the slices already have a whole
//     slice's worth of free room between them.
//
// So one changed, removed or added destination rewrites one slice (or
// deletes it, when it was the slice's last), unless it triggers a
// compaction. Slices whose names are not of the form <placement>-<n> are
// kept under their names and are filled like the others (after numbered
// slices of the same room).
//
// A Pager is not safe for concurrent use.
type Pager struct {
	placement string
	size      int
	pages     map[string]*page
	where     map[string]*slot // by SyncTargetName
	gen       uint64
	// pendingDelete holds stored slices found empty by NewPager, to be
	// deleted by the next call.
	pendingDelete map[string]struct{}
}

type page struct {
	name    string
	n       int     // the number in the name; -1 when the name is not <placement>-<n>
	members []*slot // sorted by SyncTargetName
	dirty   bool    // differs from what the store holds
	stored  bool    // the store holds a version of it
	// Update's per-call count of wanted destinations found here.
	gen  uint64
	hits int
}

type slot struct {
	d    v1alpha1.Destination
	page *page
	seen uint64 // the Update call that wanted it last
}

// NewPager returns the Pager of placement's slices, of at most size
// destinations each (size <= 0 means v1alpha1.MaxDestinationsPerSlice),
// given the slices the store holds now (by name; nil for none).
//
// The existing slices are taken as they are, except that a destination
// listed twice stays only in the first slice by name, a slice holding
// more than size destinations keeps its first size by SyncTargetName,
// and destinations without a SyncTargetName are dropped. The slices so
// changed are written, and empty slices deleted, by the next Update or
// Apply; the destinations dropped are placed anew if still wanted.
func NewPager(placement string, size int, existing map[string][]v1alpha1.Destination) *Pager {
	if size <= 0 {
		size = v1alpha1.MaxDestinationsPerSlice
	}
	p := &Pager{
		placement:     placement,
		size:          size,
		pages:         map[string]*page{},
		where:         map[string]*slot{},
		pendingDelete: map[string]struct{}{},
	}
	for _, name := range slices.Sorted(maps.Keys(existing)) {
		ds := existing[name]
		pg := &page{name: name, n: p.number(name), stored: true}
		if !slices.IsSortedFunc(ds, compareDest) {
			ds = slices.SortedFunc(slices.Values(ds), compareDest)
			pg.dirty = true
		}
		for _, d := range ds {
			if d.SyncTargetName == "" || p.where[d.SyncTargetName] != nil || len(pg.members) >= size {
				pg.dirty = true
				continue
			}
			s := &slot{d: d, page: pg}
			pg.members = append(pg.members, s) // ds is sorted
			p.where[d.SyncTargetName] = s
		}
		if len(pg.members) == 0 {
			p.pendingDelete[name] = struct{}{}
			continue
		}
		p.pages[name] = pg // dirty when normalized: written by the next call
	}
	return p
}

// Update brings the slices in line with want, the placement's
// destinations now (in any order; for a SyncTargetName listed twice, the
// last wins), and returns what to write. It costs O(len(want)) map
// look-ups plus the work of the slices that change.
func (p *Pager) Update(want []v1alpha1.Destination) Changes {
	p.gen++
	gen := p.gen
	var upserts []v1alpha1.Destination
	for _, d := range want {
		s := p.where[d.SyncTargetName]
		if s == nil {
			upserts = append(upserts, d)
			continue
		}
		if s.seen != gen {
			s.seen = gen
			pg := s.page
			if pg.gen != gen {
				pg.gen, pg.hits = gen, 0
			}
			pg.hits++
		}
		if equalDest(s.d, d) {
			s.d.Labels = d.Labels // equal: share the caller's map, for a faster next compare
			continue
		}
		upserts = append(upserts, d)
	}
	var removes []string
	for _, pg := range p.pages {
		if pg.gen == gen && pg.hits == len(pg.members) {
			continue
		}
		for _, s := range pg.members {
			if s.seen != gen {
				removes = append(removes, s.d.SyncTargetName)
			}
		}
	}
	return p.Apply(upserts, removes)
}

// Apply removes the destinations named in removes, then adds or updates
// those of upserts (for a SyncTargetName listed twice, the last wins),
// and returns what to write. It costs O(len(upserts)+len(removes)) plus
// the work of the slices that change: use it when the caller knows the
// difference, Update when it has the whole list.
func (p *Pager) Apply(upserts []v1alpha1.Destination, removes []string) Changes {
	for _, name := range removes {
		if s := p.where[name]; s != nil {
			s.page.remove(name)
			s.page.dirty = true
			delete(p.where, name)
		}
	}
	var homeless []*slot
	var fresh map[string]*slot
	for _, d := range upserts {
		if s := p.where[d.SyncTargetName]; s != nil {
			if !equalDest(s.d, d) {
				s.d = d
				s.page.dirty = true
			}
			continue
		}
		if d.SyncTargetName == "" {
			continue
		}
		if fresh == nil {
			fresh = map[string]*slot{}
		}
		if s := fresh[d.SyncTargetName]; s != nil {
			s.d = d // listed twice: the last wins
			continue
		}
		s := &slot{d: d}
		fresh[d.SyncTargetName] = s
		homeless = append(homeless, s)
	}
	slices.SortFunc(homeless, func(a, b *slot) int { return strings.Compare(a.d.SyncTargetName, b.d.SyncTargetName) })
	p.place(homeless, nil)

	var deleted []string
	for name, pg := range p.pages {
		if len(pg.members) == 0 {
			delete(p.pages, name)
			if pg.stored {
				deleted = append(deleted, name)
			}
		}
	}
	deleted = p.compact(deleted)
	return p.changes(deleted)
}

// place puts the slots, in the order given, into the slices with the
// most room (rule 3), never into skip.
func (p *Pager) place(slots []*slot, skip *page) {
	if len(slots) == 0 {
		return
	}
	order := make([]*page, 0, len(p.pages))
	for _, pg := range p.pages {
		if pg != skip && len(pg.members) < p.size {
			order = append(order, pg)
		}
	}
	slices.SortFunc(order, func(a, b *page) int {
		if ra, rb := len(a.members), len(b.members); ra != rb {
			return ra - rb // fewer members: more room
		}
		return comparePages(a, b)
	})
	i := 0
	for _, s := range slots {
		for i < len(order) && len(order[i].members) >= p.size {
			i++
		}
		if i == len(order) {
			order = append(order, p.newPage())
		}
		pg := order[i]
		s.page = pg
		pg.insert(s)
		pg.dirty = true
		p.where[s.d.SyncTargetName] = s
	}
}

// compact applies rule 5 and returns deleted with the names of the
// stored slices it deleted.
func (p *Pager) compact(deleted []string) []string {
	limit := (len(p.where)+p.size-1)/p.size + 1
	for len(p.pages) > limit {
		var victim *page
		for _, pg := range p.pages {
			if victim == nil || len(pg.members) < len(victim.members) ||
				len(pg.members) == len(victim.members) && comparePages(pg, victim) > 0 {
				victim = pg
			}
		}
		delete(p.pages, victim.name)
		if victim.stored {
			deleted = append(deleted, victim.name)
		}
		p.place(victim.members, victim)
	}
	return deleted
}

// changes collects the dirty slices and the deletions, and marks the
// state as stored.
func (p *Pager) changes(deleted []string) Changes {
	var c Changes
	for name, pg := range p.pages {
		if !pg.dirty {
			continue
		}
		if c.Write == nil {
			c.Write = map[string][]v1alpha1.Destination{}
		}
		c.Write[name] = pg.list()
		pg.dirty, pg.stored = false, true
	}
	for name := range p.pendingDelete {
		deleted = append(deleted, name)
	}
	clear(p.pendingDelete)
	for _, name := range deleted {
		if _, ok := c.Write[name]; !ok {
			c.Delete = append(c.Delete, name)
		}
	}
	slices.Sort(c.Delete)
	c.Delete = slices.Compact(c.Delete)
	return c
}

// newPage adds an empty slice named with the smallest free number.
func (p *Pager) newPage() *page {
	for n := 0; ; n++ {
		name := p.placement + "-" + strconv.Itoa(n)
		if p.pages[name] != nil {
			continue
		}
		_, stored := p.pendingDelete[name]
		delete(p.pendingDelete, name)
		pg := &page{name: name, n: n, stored: stored}
		p.pages[name] = pg
		return pg
	}
}

// number returns n for a name "<placement>-<n>" (n in canonical decimal
// form), else -1.
func (p *Pager) number(name string) int {
	rest, ok := strings.CutPrefix(name, p.placement+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// Slices returns the slices as the store holds them once the last
// Changes are written (by name, each sorted).
func (p *Pager) Slices() map[string][]v1alpha1.Destination {
	out := make(map[string][]v1alpha1.Destination, len(p.pages))
	for name, pg := range p.pages {
		out[name] = pg.list()
	}
	return out
}

// SliceOf returns the name of the slice holding syncTarget, or "".
func (p *Pager) SliceOf(syncTarget string) string {
	if s := p.where[syncTarget]; s != nil {
		return s.page.name
	}
	return ""
}

// Len returns the number of destinations paged.
func (p *Pager) Len() int { return len(p.where) }

// list returns the page's destinations, sorted.
func (pg *page) list() []v1alpha1.Destination {
	out := make([]v1alpha1.Destination, len(pg.members))
	for i, s := range pg.members {
		out[i] = s.d
	}
	return out
}

func (pg *page) search(name string) (int, bool) {
	return slices.BinarySearchFunc(pg.members, name, func(s *slot, name string) int {
		return strings.Compare(s.d.SyncTargetName, name)
	})
}

func (pg *page) insert(s *slot) {
	i, _ := pg.search(s.d.SyncTargetName)
	pg.members = slices.Insert(pg.members, i, s)
}

func (pg *page) remove(name string) {
	if i, ok := pg.search(name); ok {
		pg.members = slices.Delete(pg.members, i, i+1)
	}
}

// comparePages orders slices by number, those without one last, by name.
func comparePages(a, b *page) int {
	switch {
	case a.n == b.n:
		return strings.Compare(a.name, b.name)
	case a.n < 0:
		return 1
	case b.n < 0:
		return -1
	case a.n < b.n:
		return -1
	default:
		return 1
	}
}

func compareDest(a, b v1alpha1.Destination) int {
	if c := strings.Compare(a.SyncTargetName, b.SyncTargetName); c != 0 {
		return c
	}
	return strings.Compare(a.LocationName, b.LocationName)
}

func equalDest(a, b v1alpha1.Destination) bool {
	return a.SyncTargetName == b.SyncTargetName && a.SyncTargetUID == b.SyncTargetUID &&
		a.LocationName == b.LocationName && sameLabels(a.Labels, b.Labels)
}

// sameLabels is maps.Equal, with a shortcut for two references to one map.
func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	return maps.Equal(a, b)
}
