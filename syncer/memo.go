package syncer

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// desiredMemo keeps, from one pass to the next, what Desired made of each
// inbox object and the form the worker applies it in, so that a change of
// one object costs one expansion, not one per object of the inbox.
//
// An entry is good while its object keeps its inbox revision and the
// objects every expansion reads (self's SyncTarget, the Locations, the
// Customizers: env) keep theirs; when any of those changes, every entry
// goes. The worker alone uses it. What it holds is never changed once
// made: passes share the objects.
type desiredMemo struct {
	self string
	env  []envVersion
	exp  *expansion                  // read from env, at the first expansion
	objs map[store.Key]*desiredEntry // by inbox key, Space empty
	// spare is the map of the pass before last, cleared and filled anew
	// by the next pass.
	spare map[store.Key]*desiredEntry
}

// envVersion is an inbox object every expansion reads, at a revision.
type envVersion struct {
	key store.Key
	rev int64
}

// desiredEntry is Desired's outcome for one inbox object at rev: obj (nil
// when the object is not for self), or err; and, once the worker made it,
// its applied form.
type desiredEntry struct {
	rev  int64
	obj  *unstructured.Unstructured
	err  error
	form *applyForm
}

// applyForm is a desired object as the worker applies it: a copy with the
// managed label and its namespace (none when cluster-scoped), encoded,
// and the hash its record keeps.
type applyForm struct {
	gvr  schema.GroupVersionResource
	ns   string
	obj  *unstructured.Unstructured
	data []byte
	hash string
}

// desired is Desired(inbox, self), expanding only the objects whose
// entries are gone or stale.
func (m *desiredMemo) desired(inbox []*store.Object, self string) ([]DesiredObject, []ObjectError) {
	env := expansionInputs(inbox, self)
	if self != m.self || !slices.Equal(env, m.env) {
		m.self, m.env, m.exp, m.objs = self, env, nil, nil
	}
	next := m.spare
	if next == nil {
		next = make(map[store.Key]*desiredEntry, len(m.objs))
	}
	clear(next)
	var (
		out  []DesiredObject
		errs []ObjectError
	)
	for _, o := range inbox {
		if o.Key.Resource.Group == v1alpha1.GroupName {
			continue
		}
		k := o.Key
		k.Space = ""
		e := m.objs[k]
		if e == nil || e.rev != o.Revision {
			if m.exp == nil {
				m.exp = newExpansion(inbox, self)
			}
			obj, err := desiredOne(o, self, m.exp)
			e = &desiredEntry{rev: o.Revision, obj: obj, err: err}
		}
		next[k] = e
		switch {
		case e.err != nil:
			errs = append(errs, ObjectError{Key: k, Err: e.err})
		case e.obj != nil:
			out = append(out, DesiredObject{Key: k, Revision: o.Revision, Object: e.obj})
		}
	}
	m.objs, m.spare = next, m.objs
	return out, errs
}

// expansionInputs lists the versions of the inbox objects that every
// expansion for self reads, in inbox order.
func expansionInputs(inbox []*store.Object, self string) []envVersion {
	var env []envVersion
	for _, o := range inbox {
		if o.Key.Resource.Group != v1alpha1.GroupName {
			continue
		}
		switch o.Key.Resource.Resource {
		case v1alpha1.ResourceSyncTargets:
			if o.Key.Name != self {
				continue
			}
		case v1alpha1.ResourceLocations, v1alpha1.ResourceCustomizers:
		default:
			continue
		}
		env = append(env, envVersion{o.Key, o.Revision})
	}
	return env
}

// form returns d's applied form as gvr in namespace ns: the one kept with
// d's entry, else a new one, which the entry keeps while it lasts.
func (m *desiredMemo) form(d DesiredObject, gvr schema.GroupVersionResource, ns string) (*applyForm, error) {
	e := m.objs[d.Key]
	if e != nil && e.obj == d.Object && e.form != nil && e.form.gvr == gvr && e.form.ns == ns {
		return e.form, nil
	}
	f, err := newApplyForm(d.Object, gvr, ns)
	if err == nil && e != nil && e.obj == d.Object {
		e.form = f
	}
	return f, err
}
