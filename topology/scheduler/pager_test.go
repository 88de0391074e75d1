package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

func dst(name string) v1alpha1.Destination {
	return v1alpha1.Destination{
		SyncTargetName: name, SyncTargetUID: types.UID("uid-" + name), LocationName: "loc",
		Labels: map[string]string{"name": name},
	}
}

// many returns n destinations named st000000, st000001, ...
func many(n int) []v1alpha1.Destination {
	out := make([]v1alpha1.Destination, n)
	for i := range out {
		out[i] = dst(fmt.Sprintf("st%06d", i))
	}
	return out
}

// store is what the Pager's output is written to.
type store map[string][]v1alpha1.Destination

func (s store) apply(t *testing.T, c Changes) {
	t.Helper()
	for _, name := range c.Delete {
		if _, ok := s[name]; !ok {
			t.Errorf("Delete names %s, which the store does not hold", name)
		}
		delete(s, name)
		if _, ok := c.Write[name]; ok {
			t.Errorf("%s both written and deleted", name)
		}
	}
	if !slices.IsSorted(c.Delete) {
		t.Errorf("Delete not sorted: %v", c.Delete)
	}
	for name, ds := range c.Write {
		s[name] = ds
	}
}

// checkPager checks the invariants: the store equals the Pager's state,
// which holds exactly want, in non-empty sorted slices of at most size,
// no more than ceil(n/size)+1 of them.
func checkPager(t *testing.T, p *Pager, s store, size int, want []v1alpha1.Destination) {
	t.Helper()
	if !reflect.DeepEqual(p.Slices(), map[string][]v1alpha1.Destination(s)) {
		t.Fatalf("the Pager's state differs from the store")
	}
	wantByName := map[string]v1alpha1.Destination{}
	for _, d := range want {
		wantByName[d.SyncTargetName] = d
	}
	seen := map[string]string{}
	for name, ds := range s {
		if len(ds) == 0 || len(ds) > size {
			t.Fatalf("slice %s holds %d destinations (size %d)", name, len(ds), size)
		}
		if !slices.IsSortedFunc(ds, compareDest) {
			t.Fatalf("slice %s is not sorted", name)
		}
		for _, d := range ds {
			if other, dup := seen[d.SyncTargetName]; dup {
				t.Fatalf("%s is in %s and %s", d.SyncTargetName, other, name)
			}
			seen[d.SyncTargetName] = name
			if w, ok := wantByName[d.SyncTargetName]; !ok || !equalDest(w, d) {
				t.Fatalf("slice %s holds %+v, want %+v (wanted: %v)", name, d, w, ok)
			}
			if p.SliceOf(d.SyncTargetName) != name {
				t.Fatalf("SliceOf(%s) = %q, want %s", d.SyncTargetName, p.SliceOf(d.SyncTargetName), name)
			}
		}
	}
	if len(seen) != len(wantByName) || p.Len() != len(wantByName) {
		t.Fatalf("%d destinations paged (Len %d), want %d", len(seen), p.Len(), len(wantByName))
	}
	if limit := (len(want)+size-1)/size + 1; len(s) > limit {
		t.Fatalf("%d slices for %d destinations of size %d: more than %d", len(s), len(want), size, limit)
	}
}

func writes(c Changes) []string { return slices.Sorted(maps.Keys(c.Write)) }

func TestPagerFirstFill(t *testing.T) {
	p := NewPager("web", 1000, nil)
	want := many(2500)
	c := p.Update(want)
	if got := writes(c); !slices.Equal(got, []string{"web-0", "web-1", "web-2"}) || c.Delete != nil {
		t.Fatalf("writes %v, deletes %v", got, c.Delete)
	}
	// Filled in name order: the first 1000 names in web-0, and so on.
	if c.Write["web-0"][0].SyncTargetName != "st000000" || c.Write["web-1"][0].SyncTargetName != "st001000" || len(c.Write["web-2"]) != 500 {
		t.Errorf("unexpected fill: %s %s %d", c.Write["web-0"][0].SyncTargetName, c.Write["web-1"][0].SyncTargetName, len(c.Write["web-2"]))
	}
	s := store{}
	s.apply(t, c)
	checkPager(t, p, s, 1000, want)
	if c := p.Update(want); !c.Empty() {
		t.Errorf("same list again: %v writes, %v deletes", writes(c), c.Delete)
	}
	if c := NewPager("empty", 0, nil).Update(nil); !c.Empty() {
		t.Errorf("nothing to page: %+v", c)
	}
}

// TestPagerSmallChanges: each change of one destination writes one slice.
func TestPagerSmallChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func([]v1alpha1.Destination) []v1alpha1.Destination
		writes  []string
		deletes []string
	}{
		{"no change", func(d []v1alpha1.Destination) []v1alpha1.Destination { return d }, nil, nil},
		{"labels of one", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			d[1234].Labels = map[string]string{"name": "new"}
			return d
		}, []string{"p-1"}, nil},
		{"UID of one", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			d[5].SyncTargetUID = "recreated"
			return d
		}, []string{"p-0"}, nil},
		{"Location of one", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			d[2400].LocationName = "other"
			return d
		}, []string{"p-2"}, nil},
		{"one removed", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			return slices.Delete(d, 10, 11)
		}, []string{"p-0"}, nil},
		{"one added, last by name: to the slice with most room", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			return append(d, dst("zzz"))
		}, []string{"p-2"}, nil},
		{"one added, first by name: to the slice with most room too", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			return append(d, dst("aaa"))
		}, []string{"p-2"}, nil},
		{"a slice emptied", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			return d[:2000]
		}, nil, []string{"p-2"}},
		{"the order of the list does not matter", func(d []v1alpha1.Destination) []v1alpha1.Destination {
			slices.Reverse(d)
			return d
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPager("p", 1000, nil)
			s := store{}
			s.apply(t, p.Update(many(2500)))
			want := tc.edit(many(2500))
			c := p.Update(want)
			if got := writes(c); !slices.Equal(got, tc.writes) || !slices.Equal(c.Delete, tc.deletes) {
				t.Errorf("writes %v, deletes %v; want %v, %v", got, c.Delete, tc.writes, tc.deletes)
			}
			s.apply(t, c)
			checkPager(t, p, s, 1000, want)
		})
	}
}

// TestPagerMostRoom: new destinations fill the slice with the most room,
// then the next.
func TestPagerMostRoom(t *testing.T) {
	names := func(prefix string, n int) []v1alpha1.Destination {
		var out []v1alpha1.Destination
		for i := range n {
			out = append(out, dst(fmt.Sprintf("%s%02d", prefix, i)))
		}
		return out
	}
	existing := map[string][]v1alpha1.Destination{
		"p-0": names("a", 10), // full
		"p-1": names("b", 4),  // room 6
		"p-2": names("c", 7),  // room 3
		"p-5": names("d", 4),  // room 6, a higher number than p-1
	}
	p := NewPager("p", 10, existing)
	s := store(maps.Clone(existing))
	var want []v1alpha1.Destination
	for _, ds := range existing {
		want = append(want, ds...)
	}
	added := names("n", 15)
	want = append(want, added...)
	c := p.Update(want)
	// n00–n05 to p-1 (most room, lowest number), n06–n11 to p-5, n12–n14
	// to p-2; p-0 is untouched.
	if got := writes(c); !slices.Equal(got, []string{"p-1", "p-2", "p-5"}) {
		t.Fatalf("writes %v", got)
	}
	for name, first := range map[string]string{"n00": "p-1", "n05": "p-1", "n06": "p-5", "n11": "p-5", "n12": "p-2", "n14": "p-2"} {
		if got := p.SliceOf(name); got != first {
			t.Errorf("SliceOf(%s) = %s, want %s", name, got, first)
		}
	}
	s.apply(t, c)
	checkPager(t, p, s, 10, want)

	// All full: the next one makes a new slice, with the smallest free
	// number.
	want = append(want, dst("z"))
	c = p.Update(want)
	if got := writes(c); !slices.Equal(got, []string{"p-3"}) {
		t.Fatalf("writes %v", got)
	}
	s.apply(t, c)
	checkPager(t, p, s, 10, want)
}

// TestPagerCompaction: rule 5.
func TestPagerCompaction(t *testing.T) {
	p := NewPager("p", 10, nil)
	s := store{}
	all := many(50)
	s.apply(t, p.Update(all))
	if len(s) != 5 {
		t.Fatalf("%d slices", len(s))
	}
	// Remove 2 from each of the 5 slices and 1 more from p-3: 39 left, in
	// 5 slices; ceil(39/10)+1 = 5, so no compaction.
	var keep []v1alpha1.Destination
	for i, d := range all {
		if i%10 < 2 || i == 32 {
			continue
		}
		keep = append(keep, d)
	}
	c := p.Update(keep)
	if len(c.Write) != 5 || c.Delete != nil {
		t.Fatalf("writes %v, deletes %v", writes(c), c.Delete)
	}
	s.apply(t, c)
	checkPager(t, p, s, 10, keep)

	// One more from p-1: 38 left, ceil(38/10)+1 = 5: still none.
	keep = slices.DeleteFunc(keep, func(d v1alpha1.Destination) bool { return d.SyncTargetName == "st000015" })
	c = p.Update(keep)
	if got := writes(c); !slices.Equal(got, []string{"p-1"}) || c.Delete != nil {
		t.Fatalf("writes %v, deletes %v", got, c.Delete)
	}
	s.apply(t, c)

	// The 8 left in p-4 and 2 from p-0: 28 left, ceil(28/10)+1 = 4
	// slices allowed, 4 held (p-4 emptied and deleted): no compaction.
	keep = slices.DeleteFunc(keep, func(d v1alpha1.Destination) bool {
		return d.SyncTargetName >= "st000040" || d.SyncTargetName == "st000002" || d.SyncTargetName == "st000003"
	})
	c = p.Update(keep)
	if got := writes(c); !slices.Equal(got, []string{"p-0"}) || !slices.Equal(c.Delete, []string{"p-4"}) {
		t.Fatalf("writes %v, deletes %v", got, c.Delete)
	}
	s.apply(t, c)
	checkPager(t, p, s, 10, keep)

	// p-0: 6, p-1: 7, p-2: 8, p-3: 7. Remove 6 from p-2 and 4 from p-3:
	// 18 left, ceil(18/10)+1 = 3 < 4 slices, so p-2, now the smallest (2),
	// is deleted and its two go to the slice with the most room, p-3 (3).
	keep = slices.DeleteFunc(keep, func(d v1alpha1.Destination) bool {
		n := d.SyncTargetName
		return n >= "st000022" && n <= "st000027" || n >= "st000033" && n <= "st000036"
	})
	c = p.Update(keep)
	if got := writes(c); !slices.Equal(got, []string{"p-3"}) || !slices.Equal(c.Delete, []string{"p-2"}) {
		t.Fatalf("writes %v, deletes %v", got, c.Delete)
	}
	s.apply(t, c)
	checkPager(t, p, s, 10, keep)
	if p.SliceOf("st000028") != "p-3" || len(s["p-3"]) != 5 {
		t.Errorf("st000028 in %s; p-3 holds %d", p.SliceOf("st000028"), len(s["p-3"]))
	}
}

// TestPagerNormalizes: what NewPager finds in the store is taken as it is,
// repaired where it breaks the rules.
func TestPagerNormalizes(t *testing.T) {
	existing := map[string][]v1alpha1.Destination{
		"p-0":    {dst("c"), dst("a"), dst("b")},           // unsorted
		"p-1":    {dst("c"), dst("d")},                     // c twice: kept in p-0
		"p-2":    nil,                                      // empty
		"p-3":    {dst("e"), dst("f"), dst("g"), dst("h")}, // over size 3: h dropped
		"legacy": {dst("i")},                               // another name: kept
		"p-4":    {{LocationName: "no-name"}},              // invalid only: empty
	}
	p := NewPager("p", 3, existing)
	s := store(maps.Clone(existing))
	want := []v1alpha1.Destination{dst("a"), dst("b"), dst("c"), dst("d"), dst("e"), dst("f"), dst("g"), dst("h"), dst("i")}
	c := p.Update(want)
	// p-0 sorted, p-1 without c and with h (most room, lowest number),
	// p-3 without h; p-2 and p-4 deleted; legacy untouched.
	if got := writes(c); !slices.Equal(got, []string{"p-0", "p-1", "p-3"}) || !slices.Equal(c.Delete, []string{"p-2", "p-4"}) {
		t.Fatalf("writes %v, deletes %v", got, c.Delete)
	}
	if p.SliceOf("h") != "p-1" || p.SliceOf("i") != "legacy" {
		t.Errorf("h in %s, i in %s", p.SliceOf("h"), p.SliceOf("i"))
	}
	s.apply(t, c)
	checkPager(t, p, s, 3, want)
}

// TestPagerNames: numbered names for a placement whose own name ends in
// a number; non-canonical numbers are other names.
func TestPagerNames(t *testing.T) {
	p := NewPager("web-1", 2, map[string][]v1alpha1.Destination{"web-1-01": {dst("a"), dst("b")}})
	c := p.Update([]v1alpha1.Destination{dst("a"), dst("b"), dst("c"), dst("d"), dst("e")})
	if got := writes(c); !slices.Equal(got, []string{"web-1-0", "web-1-1"}) {
		t.Errorf("writes %v", got)
	}
	if got := p.number("web-1-12"); got != 12 {
		t.Errorf("number(web-1-12) = %d", got)
	}
	for _, name := range []string{"web-1-01", "web-1--1", "web-1-", "web-10", "web-1-x"} {
		if got := p.number(name); got != -1 {
			t.Errorf("number(%s) = %d, want -1", name, got)
		}
	}
}

// TestPagerApply: Apply with the difference gives what Update gives with
// the whole list.
func TestPagerApply(t *testing.T) {
	a, b := NewPager("p", 100, nil), NewPager("p", 100, nil)
	all := many(1000)
	if ca, cb := a.Update(all), b.Apply(all, nil); !reflect.DeepEqual(ca, cb) {
		t.Fatal("first fill differs")
	}
	changed := dst("st000500")
	changed.LocationName = "elsewhere"
	next := slices.Clone(all[:900])
	next[500] = changed
	next = append(next, dst("new-1"), dst("new-2"))
	var removes []string
	for _, d := range all[900:] {
		removes = append(removes, d.SyncTargetName)
	}
	ca := a.Update(next)
	cb := b.Apply([]v1alpha1.Destination{changed, dst("new-1"), dst("new-2"), all[3]}, removes)
	if !reflect.DeepEqual(ca, cb) {
		t.Fatalf("Update: writes %v deletes %v; Apply: writes %v deletes %v", writes(ca), ca.Delete, writes(cb), cb.Delete)
	}
	// Duplicates: the last wins.
	c := a.Apply([]v1alpha1.Destination{dst("dup"), changed, {SyncTargetName: "dup", LocationName: "last"}}, nil)
	if a.where["dup"].d.LocationName != "last" || len(c.Write) != 1 {
		t.Errorf("dup in %+v, writes %v", a.where["dup"].d, writes(c))
	}
}

// TestPager100k: 100 000 destinations in slices of
// MaxDestinationsPerSlice; one change writes one slice.
func TestPager100k(t *testing.T) {
	size := v1alpha1.MaxDestinationsPerSlice
	p := NewPager("big", 0, nil)
	s := store{}
	want := many(100_000)
	c := p.Update(want)
	if len(c.Write) != 100 || len(c.Write["big-99"]) != size {
		t.Fatalf("%d slices written", len(c.Write))
	}
	s.apply(t, c)
	checkPager(t, p, s, size, want)

	for _, step := range []struct {
		name   string
		edit   func()
		writes []string
	}{
		{"labels of one", func() { want[54321].Labels = map[string]string{"name": "relabelled"} }, []string{"big-54"}},
		{"one removed", func() { want = slices.Delete(want, 77777, 77778) }, []string{"big-77"}},
		{"one added, to the slice with room", func() { want = append(want, dst("st-new")) }, []string{"big-77"}},
		{"one more added: a new slice", func() { want = append(want, dst("st-new-2")) }, []string{"big-100"}},
		{"nothing", func() {}, nil},
	} {
		step.edit()
		c := p.Update(want)
		if got := writes(c); !slices.Equal(got, step.writes) || c.Delete != nil {
			t.Fatalf("%s: writes %v, deletes %v; want %v", step.name, got, c.Delete, step.writes)
		}
		s.apply(t, c)
	}
	checkPager(t, p, s, size, want)

	// A restart: a Pager rebuilt from the store carries on identically.
	q := NewPager("big", size, s)
	want = slices.Delete(want, 0, 1500)
	cp, cq := p.Update(want), q.Update(want)
	if !reflect.DeepEqual(cp, cq) {
		t.Fatalf("after a restart: writes %v deletes %v, the living Pager: writes %v deletes %v", writes(cq), cq.Delete, writes(cp), cp.Delete)
	}
	if got := writes(cp); !slices.Equal(got, []string{"big-1"}) || !slices.Equal(cp.Delete, []string{"big-0"}) {
		t.Errorf("writes %v, deletes %v", got, cp.Delete)
	}
	s.apply(t, cp)
	checkPager(t, q, s, size, want)
}

// TestPagerRandom: random changes to a random list, with the invariants
// checked after each, against a second Pager fed the same (determinism:
// map order must not leak into the output) and a third rebuilt from the
// store now and then (a restart changes nothing).
func TestPagerRandom(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 300
	}
	for _, size := range []int{1, 3, 10} {
		t.Run(fmt.Sprint("size", size), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(size), 7))
			a, b := NewPager("p", size, nil), NewPager("p", size, nil)
			c := b
			s := store{}
			cur := map[string]v1alpha1.Destination{}
			for step := range steps {
				// Change 1, a few, or many.
				k := 1
				switch r.IntN(10) {
				case 0:
					k = 1 + r.IntN(40)
				case 1, 2:
					k = 1 + r.IntN(5)
				}
				for range k {
					name := fmt.Sprintf("t%02d", r.IntN(60))
					switch r.IntN(4) {
					case 0, 1:
						delete(cur, name)
					case 2:
						cur[name] = dst(name)
					default:
						d := dst(name)
						d.LocationName = fmt.Sprint("l", r.IntN(3))
						cur[name] = d
					}
				}
				want := slices.Collect(maps.Values(cur)) // random order
				ca, cc := a.Update(want), c.Update(want)
				if !reflect.DeepEqual(ca, cc) {
					t.Fatalf("step %d: two Pagers differ: %v %v / %v %v", step, writes(ca), ca.Delete, writes(cc), cc.Delete)
				}
				s.apply(t, ca)
				checkPager(t, a, s, size, want)
				if r.IntN(20) == 0 {
					c = NewPager("p", size, maps.Clone(s))
				}
			}
			t.Logf("%d slices for %d destinations", len(s), len(cur))
		})
	}
}

func TestChangesEmpty(t *testing.T) {
	if !(Changes{}).Empty() || (Changes{Delete: []string{"x"}}).Empty() {
		t.Error("Empty")
	}
}
