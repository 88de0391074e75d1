package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// TestSelectedIncremental checks, over random changes of objects,
// Namespace labels and placements, that the keys the controller keeps
// selected incrementally are those a rebuild selects, and that a change
// observe reports as no work leaves the computed outcome unchanged.
func TestSelectedIncremental(t *testing.T) {
	ctx := context.Background()
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	put := func(k store.Key, obj map[string]any) {
		t.Helper()
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		md["name"], md["uid"] = k.Name, "uid-"+k.Space+"-"+k.Name
		if k.Namespace != "" {
			md["namespace"] = k.Namespace
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(k); err == nil {
			_, err = st.Update(ctx, k, data, 0)
		} else {
			_, err = st.Create(ctx, k, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	del := func(k store.Key) {
		if _, err := st.Get(k); err == nil {
			if _, err := st.Delete(ctx, k, 0, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, kind := range map[string]string{ws: layout.SpaceKindWDS, "other": layout.SpaceKindWDS, inv: layout.SpaceKindInventory, down: layout.SpaceKindDownsync} {
		put(store.Key{Resource: layout.SpaceResource, Name: name}, map[string]any{"spec": map[string]any{"kind": kind}})
	}
	put(store.Key{Space: inv, Resource: syncTargetsRes, Name: "s1"}, map[string]any{"metadata": map[string]any{"labels": map[string]any{"env": "prod"}}})
	put(store.Key{Space: inv, Resource: locationsRes, Name: "prod"}, map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "prod"}},
		"spec": map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}})

	c := New(Config{Store: st, Inventory: inv, Downsync: down})
	rev := st.Revision()
	if err := c.load(); err != nil {
		t.Fatal(err)
	}
	w, err := st.Watch(ctx, store.WatchOptions{Since: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := rev
	observe := func() bool {
		work := false
		for target := st.Revision(); seen < target; {
			ev := <-w.Events()
			seen = max(seen, ev.Revision)
			work = c.observe(ev) || work
		}
		return work
	}
	observe()
	prev := c.desired()

	spaces, namespaces := []string{ws, "other"}, []string{"a", "b"}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	yesNo := func() string { return pick([]string{"yes", "no"}) }
	cmRes := store.Resource{Resource: "configmaps"}
	for i := range 2000 {
		space := pick(spaces)
		var op string
		switch n := r.IntN(100); {
		case n < 60:
			op = "put configmap"
			ns, name := pick(namespaces), fmt.Sprintf("cm%d", r.IntN(15))
			put(store.Key{Space: space, Resource: cmRes, Namespace: ns, Name: name}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"labels": map[string]any{"ship": yesNo()}}, "data": map[string]any{"v": fmt.Sprint(i)}})
		case n < 70:
			op = "delete configmap"
			del(store.Key{Space: space, Resource: cmRes, Namespace: pick(namespaces), Name: fmt.Sprintf("cm%d", r.IntN(15))})
		case n < 80:
			op = "put namespace"
			put(store.Key{Space: space, Resource: namespacesRes, Name: pick(namespaces)}, map[string]any{"apiVersion": "v1", "kind": "Namespace",
				"metadata": map[string]any{"labels": map[string]any{"team": pick([]string{"x", "y"})}}})
		case n < 85:
			op = "delete namespace"
			del(store.Key{Space: space, Resource: namespacesRes, Name: pick(namespaces)})
		case n < 95:
			op = "put placement"
			clause := map[string]any{"resources": []any{"configmaps"}, "labelSelectors": []any{map[string]any{"matchLabels": map[string]any{"ship": yesNo()}}}}
			if r.IntN(2) == 0 {
				clause = map[string]any{"resources": []any{"configmaps"}, "namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": pick([]string{"x", "y"})}}}
			}
			put(store.Key{Space: space, Resource: placementsRes, Name: pick([]string{"p1", "p2"})}, map[string]any{
				"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement", "metadata": map[string]any{"generation": i},
				"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}}, "downsync": []any{clause}}})
		default:
			op = "delete placement"
			del(store.Key{Space: space, Resource: placementsRes, Name: pick([]string{"p1", "p2"})})
		}
		work := observe()
		for _, s := range c.spaces {
			if s.selectedStale {
				continue
			}
			got := slices.Clone(s.selected)
			s.selectedStale = true
			if want := s.selectedKeys(); !slices.Equal(got, want) {
				t.Fatalf("step %d (%s): space %s: selected %v, a rebuild selects %v", i, op, s.name, got, want)
			}
		}
		d := c.desired()
		if !work && !reflect.DeepEqual(d, prev) {
			t.Fatalf("step %d (%s): observe reported no work, but the outcome changed", i, op)
		}
		prev = d
	}
}
