package store

import (
	"cmp"

	"github.com/google/btree"
)

// treeDegree is the B-tree degree of both index levels.
const treeDegree = 32

// entry is one object in a table, ordered by (namespace, name). It is a
// value type so that lookups build their probe on the stack.
type entry struct {
	ns, name string
	obj      *Object
}

func entryLess(a, b entry) bool {
	if a.ns != b.ns {
		return a.ns < b.ns
	}
	return a.name < b.name
}

// table holds the objects of one (space, resource).
//
// A table is shared with every Snapshot, and every state retained for paged
// lists, taken while gen was the store's generation; the store then never
// modifies it again and writes to a clone instead (see Store.writable), so a
// snapshot keeps seeing its own version.
type table struct {
	gen  uint64
	objs *btree.BTreeG[entry]
}

// tableRef is one table in the store's top-level index, ordered by space,
// then group, then resource.
type tableRef struct {
	space string
	res   Resource
	t     *table
}

func tableLess(a, b tableRef) bool {
	if c := cmp.Compare(a.space, b.space); c != 0 {
		return c < 0
	}
	return compareResource(a.res, b.res) < 0
}

func compareResource(a, b Resource) int {
	if c := cmp.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	return cmp.Compare(a.Resource, b.Resource)
}

func newTables() *btree.BTreeG[tableRef] { return btree.NewG(treeDegree, tableLess) }

// lookup returns the current version of k, or nil.
func lookup(tables *btree.BTreeG[tableRef], k Key) *Object {
	ref, ok := tables.Get(tableRef{space: k.Space, res: k.Resource})
	if !ok {
		return nil
	}
	e, _ := ref.t.objs.Get(entry{ns: k.Namespace, name: k.Name})
	return e.obj
}

// spaceTables calls fn for each table of space in order, from the first
// whose resource is not before res, until fn returns false.
func spaceTables(tables *btree.BTreeG[tableRef], space string, res Resource, fn func(tableRef) bool) {
	tables.AscendGreaterOrEqual(tableRef{space: space, res: res}, func(ref tableRef) bool {
		return ref.space == space && fn(ref)
	})
}
