package syncer

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// TestDesiredMemo changes an inbox at random, step after step, and checks
// that the memo's Desired equals a fresh one at every step, expands again
// only what changed (or everything, when what every expansion reads
// changed), and keeps an applied form only as long as its object.
func TestDesiredMemo(t *testing.T) {
	cm := func(name, value, customizer string) map[string]any {
		ann := map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}
		if customizer != "" {
			ann[v1alpha1.CustomizerAnnotation] = customizer
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "shop", "annotations": ann},
			"data":     map[string]any{"k": value}}
	}
	inbox := storesInbox(t,
		inboxObject(t, resNamespaces, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}))
	for i := range 8 {
		inbox = append(inbox, inboxObject(t, resConfigMaps, cm(fmt.Sprintf("cm-%d", i), "%(zone)", "")))
	}
	rev := int64(7)
	put := func(res store.Resource, obj map[string]any) (envChange bool) {
		rev++
		o := inboxObject(t, res, obj)
		o.Revision = rev
		i := slices.IndexFunc(inbox, func(x *store.Object) bool { return x.Key == o.Key })
		if i < 0 {
			inbox = append(inbox, o)
		} else {
			inbox = slices.Clone(inbox)
			inbox[i] = o
		}
		return res.Group == v1alpha1.GroupName
	}
	values := []string{"%(zone)", "%(size)", "plain", "%(floor)"} // %(floor): a parameter no target has
	customizers := []string{"", "canary", "missing"}

	var m desiredMemo
	self := "store-1"
	prev := map[store.Key]*desiredEntry{}
	forms := map[store.Key]*applyForm{} // each object's form at the step before
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 300 {
		envChange, changed := false, store.Key{}
		switch r := rng.IntN(10); {
		case r < 6: // a workload object changes, or appears
			name := fmt.Sprintf("cm-%d", rng.IntN(10))
			put(resConfigMaps, cm(name, values[rng.IntN(len(values))], customizers[rng.IntN(len(customizers))]))
			changed = store.Key{Resource: resConfigMaps, Namespace: "shop", Name: name}
		case r == 6: // one goes
			i := rng.IntN(len(inbox))
			if inbox[i].Key.Resource == resConfigMaps {
				inbox = slices.Delete(slices.Clone(inbox), i, i+1)
			}
		case r == 7: // self's parameters change
			envChange = put(resTargets, syncTargetObj(self, "stores", map[string]any{"zone": fmt.Sprint("z", step), "size": "small"}))
		case r == 8: // a Customizer changes
			envChange = put(resCustomizers, customizerObj("shop", "canary",
				map[string]any{"path": "/data/k", "value": fmt.Sprintf("%q", fmt.Sprint("v", step))}))
		default: // another destination's target changes: nothing to redo for self
			put(resTargets, syncTargetObj("store-2", "stores", map[string]any{"zone": fmt.Sprint("y", step)}))
		}

		got, gotErrs := m.desired(inbox, self)
		want, wantErrs := Desired(inbox, self)
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErrs) != fmt.Sprint(wantErrs) {
			t.Fatalf("step %d: memo gave %d objects, errors %v; Desired %d, %v", step, len(got), gotErrs, len(want), wantErrs)
		}
		for k, e := range m.objs {
			p := prev[k]
			reused := p == e
			switch {
			case envChange && reused:
				t.Fatalf("step %d: %s kept across a change of the parameters or Customizers", step, k.Name)
			case !envChange && p != nil && k != changed && p.rev == e.rev && !reused:
				t.Fatalf("step %d: %s expanded again, unchanged", step, k.Name)
			}
		}

		// Applied forms last as long as their entry, for their GVR and
		// namespace only.
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		for _, d := range got {
			f, err := m.form(d, gvr, "shop")
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, d.Key.Name, err)
			}
			if again, _ := m.form(d, gvr, "shop"); again != f {
				t.Fatalf("step %d: %s: form not kept", step, d.Key.Name)
			}
			if last := forms[d.Key]; last != nil && last != f && prev[d.Key] == m.objs[d.Key] {
				t.Fatalf("step %d: %s: unchanged, but its form was made again", step, d.Key.Name)
			}
			fresh, _ := newApplyForm(d.Object, gvr, "shop")
			if string(fresh.data) != string(f.data) || fresh.hash != f.hash {
				t.Fatalf("step %d: %s: kept form %s differs from a fresh one %s", step, d.Key.Name, f.data, fresh.data)
			}
			forms[d.Key] = f
		}
		prev = maps.Clone(m.objs)
	}
	// A form is for its GVR and namespace only.
	for k, f := range forms {
		d := DesiredObject{Key: k, Object: m.objs[k].obj}
		if d.Object == nil {
			continue
		}
		if other, _ := m.form(d, f.gvr, ""); other == nil || other == f || other.ns != "" {
			t.Fatalf("%s: the form of namespace %q served for none", k.Name, f.ns)
		}
		if other, _ := m.form(d, schema.GroupVersionResource{Version: "v2", Resource: "configmaps"}, f.ns); other == nil || other.gvr.Version != "v2" {
			t.Fatalf("%s: the form of %s served for v2", k.Name, f.gvr.Version)
		}
	}
}
