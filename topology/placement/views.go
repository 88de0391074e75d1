package placement

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
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

// What Views gather, written once into the space's views space
// (layout.ViewsSpace) under the name <destination>.<name>, labelled
// v1alpha1.DestinationLabel:
//
//   - for a View of source Upsynced, every destination's version of each
//     object that a placement of a workload description space upsyncs (the
//     candidates of writeUpsynced, all of them, not only the first by
//     destination), of a resource the View names;
//   - for a View of source Placed, the live copy at each destination of
//     each object of the resource the View names that the space places
//     there: the entries of such resources carry v1alpha1.ViewedAnnotation
//     down the tree (render), each edge reports its copy of them under
//     reports.ForwardedName with the annotation, and those copies are
//     labelled v1alpha1.PlacedCopyLabel in the views space.
//
// The kube API serves each View over the views space, selecting by
// resource, source, selector and partition as it reads: the objects are
// held once whatever the Views, their partitions and their watchers.
// Each View's status counts what it serves.

var viewsRes = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceViews}

// viewState is one View of a space.
type viewState struct {
	obj *v1alpha1.View
	src *store.Object
	// sel is the View's selector (nil: everything; never nil for a
	// selector that does not parse: it selects nothing).
	sel labels.Selector
}

// serves reports whether the View gathers res from source.
func (v *viewState) serves(res store.Resource, source v1alpha1.ViewSource) bool {
	return v.obj.Spec.APIGroup == res.Group && v.obj.Spec.Resource == res.Resource && viewSource(v.obj) == source
}

// viewSource is a View's source, Upsynced when left out.
func viewSource(v *v1alpha1.View) v1alpha1.ViewSource {
	if v.Spec.Source == "" {
		return v1alpha1.ViewSourceUpsynced
	}
	return v.Spec.Source
}

// viewMemo is what an object of a views space was last written from (or
// found equal to): the forwarded object and the revision stored.
type viewMemo struct {
	from   *store.Object
	stored int64
}

// viewed reports whether a View of s gathers res from source.
func (s *wds) viewed(res store.Resource, source v1alpha1.ViewSource) bool {
	for _, v := range s.views {
		if v.serves(res, source) {
			return true
		}
	}
	return false
}

// placedViews lists the resources whose placed objects s's Views gather.
func (s *wds) placedViews() map[store.Resource]bool {
	out := map[store.Resource]bool{}
	for _, v := range s.views {
		if viewSource(v.obj) == v1alpha1.ViewSourcePlaced {
			out[store.Resource{Group: v.obj.Spec.APIGroup, Resource: v.obj.Spec.Resource}] = true
		}
	}
	return out
}

// placedViewed reports whether a View of e's space gathers the live copy
// of e's object (of resource res) at dest, where e places it.
func (c *Controller) placedViewed(e *entry, dest string, res store.Resource) bool {
	_, there := e.dests[dest]
	s := c.spaces[e.space]
	return there && s != nil && s.viewed(res, v1alpha1.ViewSourcePlaced)
}

// gathered is one destination's object that a View of its space
// gathers: an upsynced one, or the live copy of a placed one (placed;
// writeUpsynced finds those among the forwarded reports).
type gathered struct {
	key    store.Key // in the views space
	space  string    // the workload description space
	dest   string
	obj    *store.Object
	placed bool
}

// observeView takes a View's change into the space's views; the views
// space is written again at the next report flush. A change of the
// resources whose placed objects the space's Views gather changes what
// is placed (v1alpha1.ViewedAnnotation): the downsync content is
// computed again.
func (c *Controller) observeView(s *wds, ev store.Event) bool {
	name := ev.Object.Key.Name
	before := s.placedViews()
	defer func() {
		if !maps.Equal(before, s.placedViews()) {
			c.structural = true
		}
	}()
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
// last writeUpsynced and the placed copies it found, and each View's
// status with what it serves. It costs a map lookup per object that did
// not change since it was written (the same forwarded version), and
// store reads and writes only for those that did or are gone.
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
	want := map[store.Key]gathered{}        // by key in a views space
	counts := map[string]map[string]int64{} // space, view
	count := func(sname string, res store.Resource, source v1alpha1.ViewSource, o *store.Object) {
		for name, v := range c.spaces[sname].views {
			if v.serves(res, source) && v.sel.Matches(labels.Set(o.Labels)) {
				if counts[sname] == nil {
					counts[sname] = map[string]int64{}
				}
				counts[sname][name]++
			}
		}
	}
	for tk, cs := range r.candidates {
		s := c.spaces[tk.Space]
		if s == nil || !s.viewed(tk.Resource, v1alpha1.ViewSourceUpsynced) {
			continue
		}
		for _, cd := range cs {
			vk := store.Key{Space: layout.ViewsSpace(tk.Space), Resource: tk.Resource, Namespace: tk.Namespace, Name: reports.ForwardedName(cd.dest, tk.Name)}
			want[vk] = gathered{key: vk, space: tk.Space, dest: cd.dest, obj: cd.obj}
			count(tk.Space, tk.Resource, v1alpha1.ViewSourceUpsynced, cd.obj)
		}
	}
	for _, pc := range r.placedCopies {
		want[pc.key] = pc
		count(pc.space, pc.key.Resource, v1alpha1.ViewSourcePlaced, pc.obj)
	}
	var gone, changed []store.Key
	for k := range r.views {
		if want[k].obj == nil {
			gone = append(gone, k)
		}
	}
	for k, pc := range want {
		if memo, ok := r.views[k]; !ok || memo.from != pc.obj {
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
		pc := want[vk]
		cur, err := c.st.Get(vk)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		next := viewCopy(pc.obj, vk.Name, pc.dest, pc.placed)
		md := next["metadata"].(map[string]any)
		op := store.Op{Type: store.OpCreate, Key: vk}
		if cur != nil {
			have := jsonMap(cur)
			hmd, _ := have["metadata"].(map[string]any)
			md["uid"], md["creationTimestamp"] = hmd["uid"], hmd["creationTimestamp"]
			delete(hmd, "resourceVersion")
			if equality.Semantic.DeepEqual(have, next) {
				r.views[vk] = viewMemo{from: pc.obj, stored: cur.Revision}
				continue
			}
			op = store.Op{Type: store.OpUpdate, Key: vk, ExpectRevision: cur.Revision}
		} else {
			md["uid"], md["creationTimestamp"] = uuid.NewString(), now()
		}
		op.Data = mustJSON(next)
		if err := b.addThen(ctx, op, func(rev int64) { r.views[vk] = viewMemo{from: pc.obj, stored: rev} }); err != nil {
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

// viewCopy is a destination's object as a views space holds it: named
// <destination>.<name>, without the metadata its cluster assigned,
// labelled and annotated with its destination, and labelled
// v1alpha1.PlacedCopyLabel when it is a placed object's live copy (never
// when it is not, whatever the destination labelled it).
func viewCopy(o *store.Object, name, dest string, placed bool) map[string]any {
	m, lbls := destinationCopy(o, name, dest)
	lbls[v1alpha1.DestinationLabel] = dest
	delete(lbls, v1alpha1.PlacedCopyLabel)
	if placed {
		lbls[v1alpha1.PlacedCopyLabel] = "true"
		delete(m["metadata"].(map[string]any)["annotations"].(map[string]any), v1alpha1.ViewedAnnotation)
	}
	return m
}
