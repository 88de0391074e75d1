package placement

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// What Views gather: every destination's version of each object that a
// placement of a workload description space upsyncs (the candidates of
// writeUpsynced, all of them, not only the first by destination), of a
// resource some View of the space names, written once into the space's
// views space (layout.ViewsSpace) under the name
// <destination>.<name>, labelled v1alpha1.DestinationLabel. The kube API
// serves each View over it, selecting by resource, selector and
// partition as it reads: the objects are held once whatever the Views,
// their partitions and their watchers. Each View's status counts what
// it serves.

var viewsRes = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceViews}

// viewState is one View of a space.
type viewState struct {
	obj *v1alpha1.View
	src *store.Object
	// sel is the View's selector (nil: everything; never nil for a
	// selector that does not parse: it selects nothing).
	sel labels.Selector
}

// viewMemo is what an object of a views space was last written from (or
// found equal to): the forwarded object and the revision stored.
type viewMemo struct {
	from   *store.Object
	stored int64
}

// viewed reports whether a View of s serves res.
func (s *wds) viewed(res store.Resource) bool {
	for _, v := range s.views {
		if v.obj.Spec.APIGroup == res.Group && v.obj.Spec.Resource == res.Resource {
			return true
		}
	}
	return false
}

// observeView takes a View's change into the space's views; the views
// space is written again at the next report flush.
func (c *Controller) observeView(s *wds, ev store.Event) bool {
	name := ev.Object.Key.Name
	if ev.Type == store.Deleted {
		delete(s.views, name)
	} else {
		var v v1alpha1.View
		if err := json.Unmarshal(ev.Object.Data, &v); err != nil {
			return false
		}
		if cur := s.views[name]; cur != nil && cur.obj.Generation == v.Generation && cur.obj.UID == v.UID {
			cur.obj, cur.src = &v, ev.Object // a status write
			return false
		}
		sel := labels.Everything()
		if v.Spec.Selector != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(v.Spec.Selector); err != nil {
				sel = labels.Nothing()
			}
		}
		s.views[name] = &viewState{obj: &v, src: ev.Object, sel: sel}
	}
	c.reportsDirty = true
	return true
}

// writeViews brings every views space in line with the candidates of the
// last writeUpsynced, and each View's status with what it serves. It
// costs a map lookup per object that did not change since it was
// written (the same forwarded version), and store reads and writes only
// for those that did or are gone.
func (r *reportedState) writeViews(ctx context.Context, b *batch) error {
	c := r.c
	if r.views == nil {
		// What the views spaces hold, once: the memo starts empty, so
		// every object is compared (and found equal) once.
		r.views = map[store.Key]viewMemo{}
		for _, sname := range sortedKeys(c.spaces) {
			list, err := c.st.List(store.ListOptions{Space: layout.ViewsSpace(sname)})
			if err != nil {
				return err
			}
			for _, o := range list.Items {
				r.views[o.Key] = viewMemo{stored: o.Revision}
			}
		}
	}
	want := map[store.Key]*upsyncCandidate{}
	counts := map[string]map[string]int64{} // space, view
	for tk, cs := range r.candidates {
		s := c.spaces[tk.Space]
		if s == nil || len(s.views) == 0 {
			continue
		}
		for _, cd := range cs {
			vk := store.Key{Space: layout.ViewsSpace(tk.Space), Resource: tk.Resource, Namespace: tk.Namespace, Name: reports.ForwardedName(cd.dest, tk.Name)}
			for name, v := range s.views {
				if v.obj.Spec.APIGroup != tk.Resource.Group || v.obj.Spec.Resource != tk.Resource.Resource {
					continue
				}
				want[vk] = cd
				if v.sel.Matches(labels.Set(cd.obj.Labels)) {
					if counts[tk.Space] == nil {
						counts[tk.Space] = map[string]int64{}
					}
					counts[tk.Space][name]++
				}
			}
		}
	}
	var gone, changed []store.Key
	for k := range r.views {
		if want[k] == nil {
			gone = append(gone, k)
		}
	}
	for k, cd := range want {
		if memo, ok := r.views[k]; !ok || memo.from != cd.obj {
			changed = append(changed, k)
		}
	}
	slices.SortFunc(gone, compareKeys)
	slices.SortFunc(changed, compareKeys)
	for _, k := range gone {
		if err := b.addThen(ctx, store.Op{Type: store.OpDelete, Key: k}, func(int64) { delete(r.views, k) }); err != nil {
			return err
		}
	}
	for _, vk := range changed {
		cd := want[vk]
		cur, err := c.st.Get(vk)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		next := viewCopy(cd.obj, vk.Name, cd.dest)
		md := next["metadata"].(map[string]any)
		op := store.Op{Type: store.OpCreate, Key: vk}
		if cur != nil {
			have := jsonMap(cur)
			hmd, _ := have["metadata"].(map[string]any)
			md["uid"], md["creationTimestamp"] = hmd["uid"], hmd["creationTimestamp"]
			delete(hmd, "resourceVersion")
			if equality.Semantic.DeepEqual(have, next) {
				r.views[vk] = viewMemo{from: cd.obj, stored: cur.Revision}
				continue
			}
			op = store.Op{Type: store.OpUpdate, Key: vk, ExpectRevision: cur.Revision}
		} else {
			md["uid"], md["creationTimestamp"] = uuid.NewString(), now()
		}
		op.Data = mustJSON(next)
		if err := b.addThen(ctx, op, func(rev int64) { r.views[vk] = viewMemo{from: cd.obj, stored: rev} }); err != nil {
			return err
		}
	}
	return r.writeViewStatuses(ctx, counts, b)
}

// writeViewStatuses sets each View's status.objects.
func (r *reportedState) writeViewStatuses(ctx context.Context, counts map[string]map[string]int64, b *batch) error {
	for _, sname := range sortedKeys(r.c.spaces) {
		s := r.c.spaces[sname]
		for _, name := range sortedKeys(s.views) {
			v := s.views[name]
			n := counts[sname][name]
			if v.obj.Status.Objects == n {
				continue
			}
			m := jsonMap(v.src)
			m["status"] = map[string]any{"objects": n}
			k := v.src.Key
			if err := b.add(ctx, store.Op{Type: store.OpUpdate, Key: k, Data: mustJSON(m), ExpectRevision: v.src.Revision}); err != nil {
				return err
			}
		}
	}
	return nil
}

// viewCopy is a destination's upsynced object as a views space holds it:
// named <destination>.<name>, without the metadata its cluster assigned,
// labelled and annotated with its destination.
func viewCopy(o *store.Object, name, dest string) map[string]any {
	m, lbls := destinationCopy(o, name, dest)
	lbls[v1alpha1.DestinationLabel] = dest
	return m
}
