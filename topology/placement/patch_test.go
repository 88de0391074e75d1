package placement

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/scheduler"
)

// Random changes of workload objects (their content, the labels that
// select them, their Customizer, their expansion; deletes and creates),
// in two spaces that place the same keys, under placements that overlap
// and conflict: after every flush, whether it patched or recomputed, the
// outcome is the one a whole recomputation gives, and the downsync space
// holds it.
func TestPatchMatchesDesired(t *testing.T) {
	f := newStoreFixture(t)
	f.target("s1", map[string]string{"env": "prod", "zone": "a"})
	f.target("s2", map[string]string{"env": "prod", "zone": "a"})
	f.target("s3", map[string]string{"env": "prod", "zone": "b"})
	f.target("s4", map[string]string{"env": "prod"}) // no zone: "%(zone)" fails there
	f.location("a", map[string]string{"tier": "a"}, map[string]string{"zone": "a"})
	f.location("all", map[string]string{"tier": "all"}, map[string]string{"env": "prod"})
	for _, sp := range []string{ws, "other"} {
		f.namespace(sp, "app")
		for _, c := range []string{"base", "special"} {
			f.put(store.Key{Space: sp, Resource: customizersRes, Namespace: "app", Name: c}, map[string]any{
				"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer"})
		}
	}
	web := cmClause("app")
	web["labelSelectors"] = []any{map[string]any{"matchLabels": map[string]any{"tier": "web"}}}
	placed := cmClause("app")
	placed["labelSelectors"] = []any{map[string]any{"matchLabels": map[string]any{"placed": "yes"}}}
	special := cmClause("app")
	special["labelSelectors"] = []any{map[string]any{"matchLabels": map[string]any{"special": "yes"}}}
	special["customizer"] = "special"
	f.placement(ws, "p-a", map[string]string{"tier": "a"}, web)
	f.placement(ws, "p-b", map[string]string{"tier": "all"}, placed, special)
	f.placement("other", "p-o", map[string]string{"tier": "a"}, placed)

	type cm struct {
		space, name string
		labels      map[string]string
		ann         map[string]string
		gone        bool
		v           int
	}
	var cms []*cm
	for i := range 10 {
		cms = append(cms, &cm{space: ws, name: fmt.Sprintf("cm-%d", i), labels: map[string]string{}, ann: map[string]string{}})
	}
	for i := range 3 {
		cms = append(cms, &cm{space: "other", name: fmt.Sprintf("cm-%d", i), labels: map[string]string{}, ann: map[string]string{}})
	}
	key := func(o *cm) store.Key {
		return store.Key{Space: o.space, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: o.name}
	}
	write := func(o *cm) {
		data := map[string]any{"v": strconv.Itoa(o.v)}
		if o.ann[v1alpha1.ExpandParametersAnnotation] == "true" {
			data["zone"] = "%(zone)"
		}
		f.put(key(o), map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"labels": maps.Clone(o.labels), "annotations": maps.Clone(o.ann)}, "data": data})
	}
	toggle := func(m map[string]string, k, v string) {
		if m[k] == v {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, o := range cms {
		if rng.IntN(2) == 0 {
			o.labels["placed"] = "yes"
		}
		write(o)
	}
	d := newDriver(f, true)
	d.settle()
	check(t, d.c, "start")
	for i := range 400 {
		o := cms[rng.IntN(len(cms))]
		what := rng.IntN(20)
		switch {
		case o.gone:
			o.gone = false
		case what < 10: // content only
		case what < 12:
			toggle(o.labels, "tier", "web")
		case what < 14:
			toggle(o.labels, "placed", "yes")
		case what < 15:
			toggle(o.labels, "special", "yes")
		case what < 17:
			if c := []string{"", "base", "special", "missing"}[rng.IntN(4)]; c == "" {
				delete(o.ann, v1alpha1.CustomizerAnnotation)
			} else {
				o.ann[v1alpha1.CustomizerAnnotation] = c
			}
		case what < 19:
			toggle(o.ann, v1alpha1.ExpandParametersAnnotation, "true")
		default:
			o.gone = true
			f.del(key(o))
		}
		o.v++
		if !o.gone {
			write(o)
		}
		d.catchUp(true)
		d.settle()
		check(t, d.c, fmt.Sprintf("change %d (%s %s, %d)", i, o.space, o.name, what))
	}
	// Most changes are patches; the others, whole recomputations.
	if d.c.patched < 150 || d.c.recomputed < 50 {
		t.Fatalf("%d flushes patched, %d recomputed: want at least 150 and 50", d.c.patched, d.c.recomputed)
	}
	t.Logf("%d flushes patched, %d recomputed", d.c.patched, d.c.recomputed)
}

// check compares c's outcome with a whole recomputation, and the
// downsync space with the outcome.
func check(t *testing.T, c *Controller, when string) {
	t.Helper()
	got, want := c.last, c.desired()
	if !slices.Equal(slicesSorted(got.entries), slicesSorted(want.entries)) {
		t.Fatalf("%s: entries %v, want %v", when, slicesSorted(got.entries), slicesSorted(want.entries))
	}
	for k, w := range want.entries {
		g := got.entries[k]
		if g.space != w.space || g.location != w.location || g.rename != w.rename ||
			!maps.Equal(g.dests, w.dests) || !slices.EqualFunc(g.placedBy, w.placedBy, samePlacing) || !slices.Equal(g.failures, w.failures) {
			t.Fatalf("%s: entry %v is %+v, want %+v", when, k, *g, *w)
		}
		// The same content (a placement's status write changes its
		// version, not what travels).
		gd, _ := render(k, g)
		wd, _ := render(k, w)
		if string(gd) != string(wd) || g.source.Revision > w.source.Revision {
			t.Fatalf("%s: entry %v renders\n%s\nwant\n%s", when, k, gd, wd)
		}
	}
	eq := func(a, b map[scheduler.PlacementRef][]string) bool { return maps.EqualFunc(a, b, slices.Equal) }
	if !maps.Equal(got.failures, want.failures) || !eq(got.failed, want.failed) {
		t.Fatalf("%s: failures %v %v, want %v %v", when, got.failures, got.failed, want.failures, want.failed)
	}
	if !maps.EqualFunc(got.placed, want.placed, slices.Equal) {
		t.Fatalf("%s: placed %v, want %v", when, got.placed, want.placed)
	}
	for _, m := range []map[scheduler.PlacementRef][]v1alpha1.Conflict{got.conflicts, want.conflicts} {
		for _, cs := range m {
			slices.SortFunc(cs, compareConflicts)
		}
	}
	if !reflect.DeepEqual(got.conflicts, want.conflicts) {
		t.Fatalf("%s: conflicts %v, want %v", when, got.conflicts, want.conflicts)
	}
	lr, err := c.st.List(store.ListOptions{Space: down})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range lr.Items {
		k := o.Key
		k.Space = ""
		e := got.entries[k]
		if e == nil {
			if placedByUs(o) {
				t.Fatalf("%s: %v is still in the downsync space", when, k)
			}
			continue
		}
		n++
		data, err := render(k, e)
		if err != nil {
			t.Fatal(err)
		}
		have, rev, created := canonical(o)
		if string(have) != string(data) {
			t.Fatalf("%s: %v holds\n%s\nwant\n%s", when, k, have, data)
		}
		// What the controller remembers of it: the version stored, and
		// the digest of its content, so that the next flush need not
		// decode it again.
		if w, ok := c.wrote[k]; !ok || w.stored != o.Revision || w.digest != sha256.Sum256(have) || w.created != created {
			t.Fatalf("%s: %v: the controller remembers %+v, not revision %d created %s", when, k, w, o.Revision, created)
		}
		if _, err := time.Parse(time.RFC3339, created); err != nil {
			t.Fatalf("%s: %v: creation time %q: %v", when, k, created, err)
		}
		if r, _ := strconv.ParseInt(rev, 10, 64); r != got.sourceRev[k] || r > e.source.Revision {
			t.Fatalf("%s: %v carries %s %q; the outcome says %d, its source is at %d", when, k, v1alpha1.SourceRevisionAnnotation, rev, got.sourceRev[k], e.source.Revision)
		}
	}
	if n != len(got.entries) {
		t.Fatalf("%s: the downsync space holds %d of %d entries", when, n, len(got.entries))
	}
}
