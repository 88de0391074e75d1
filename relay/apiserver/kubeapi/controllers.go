package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/apiserver/resources"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// Work the lifecycle controller does, keyed for de-duplication.
type workKind int

const (
	workDependent workKind = iota // delete a dependent whose owners are all gone
	workOwner                     // foreground / orphan processing of an owner being deleted
	workNamespace                 // empty a terminating namespace, then release it
	workCRD                       // delete a terminating CRD's custom resources, then release it
)

type workItem struct {
	kind workKind
	key  store.Key
}

// lifecycle runs namespace deletion, garbage collection through
// ownerReferences, and custom resource cleanup for every space. It reacts
// to a store watch and acts through the same write paths as the API, so
// its writes are ordinary, logged writes.
type lifecycle struct {
	s *Server

	mu         sync.Mutex
	dependents map[types.UID]map[store.Key]struct{} // owner uid → dependents
	owners     map[store.Key][]types.UID            // dependent → owner uids (to unindex)
	pending    map[workItem]struct{}
	queue      []workItem
	wake       chan struct{}
	// backed holds the spaces a backend keeps (layout.SpaceInfo.Backed),
	// from their records: the backend runs their lifecycle. Only the
	// watch uses it (follow, then its events one at a time).
	backed map[string]bool
}

// StartControllers runs the lifecycle controllers until ctx is done.
func (s *Server) StartControllers(ctx context.Context) error {
	lc := &lifecycle{
		s:          s,
		dependents: map[types.UID]map[store.Key]struct{}{},
		owners:     map[store.Key][]types.UID{},
		pending:    map[workItem]struct{}{},
		wake:       make(chan struct{}, 1),
	}
	lc.follow(ctx)
	lc.work(ctx)
	return nil
}

// follow lists every object of every space, then follows the store with
// a watch that runs no goroutine of its own: the store's watcher hands it
// the events (store.WatchOptions.Func). When the list fails or the watch
// ends, it starts again a little later, until ctx is done.
func (lc *lifecycle) follow(ctx context.Context) {
	if err := lc.watch(ctx); err != nil {
		lc.restart(ctx, err)
	}
}

// restart follows the store again after err, unless ctx is done or the
// store closed.
func (lc *lifecycle) restart(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
		return
	}
	lc.s.log.Warn("lifecycle watch restarting", "error", err)
	time.AfterFunc(100*time.Millisecond, func() { lc.follow(ctx) })
}

// watch lists every object of every space, then starts the watch that
// follows the store.
func (lc *lifecycle) watch(ctx context.Context) error {
	st := lc.s.store
	spaces, err := st.List(store.ListOptions{Space: "", Resource: layout.SpaceResource})
	if err != nil {
		return err
	}
	rev := spaces.Revision
	lc.backed = map[string]bool{}
	for _, sp := range spaces.Items {
		lc.noteSpace(store.Event{Type: store.Added, Object: sp})
		list, err := st.List(store.ListOptions{Space: sp.Key.Name})
		if err != nil {
			return err
		}
		if list.Revision > rev {
			rev = list.Revision
		}
		for _, obj := range list.Items {
			lc.observe(store.Event{Type: store.Added, Object: obj})
		}
	}
	_, err = st.Watch(ctx, store.WatchOptions{Space: "", Since: rev,
		Func: func(ev store.Event) {
			switch {
			case ev.Object == nil:
			case ev.Object.Key.Space != "":
				lc.observe(ev)
			case ev.Object.Key.Resource == layout.SpaceResource:
				lc.noteSpace(ev)
			}
		},
		Ended: func(err error) {
			if err == nil {
				err = errors.New("the watch ended")
			}
			lc.restart(ctx, err)
		}})
	return err
}

// noteSpace follows a space record's event into lc.backed.
func (lc *lifecycle) noteSpace(ev store.Event) {
	name := ev.Object.Key.Name
	if ev.Type == store.Deleted || !layout.ReadSpace(ev.Object).Backed() {
		delete(lc.backed, name)
		return
	}
	lc.backed[name] = true
}

// observe indexes an event and queues the work it implies.
func (lc *lifecycle) observe(ev store.Event) {
	obj := ev.Object
	k := obj.Key
	if lc.backed[k.Space] {
		// The backend runs its own lifecycle; the space holds its copy.
		return
	}
	if ev.Type == store.Deleted {
		lc.mu.Lock()
		lc.unindex(k)
		deps := lc.dependents[types.UID(obj.UID)]
		for d := range deps {
			lc.enqueueLocked(workItem{workDependent, d})
		}
		lc.mu.Unlock()
		if k.Namespace != "" {
			lc.enqueue(workItem{workNamespace, nsKey(k.Space, k.Namespace)})
		}
		return
	}
	var u lifecycleMeta
	if err := u.read(obj.Data); err != nil {
		return
	}
	refs := u.Metadata.OwnerReferences
	lc.mu.Lock()
	lc.unindex(k)
	if len(refs) > 0 {
		uids := make([]types.UID, 0, len(refs))
		for _, r := range refs {
			uids = append(uids, r.UID)
			m := lc.dependents[r.UID]
			if m == nil {
				m = map[store.Key]struct{}{}
				lc.dependents[r.UID] = m
			}
			m[k] = struct{}{}
		}
		lc.owners[k] = uids
		lc.enqueueLocked(workItem{workDependent, k})
	}
	lc.mu.Unlock()
	if u.Metadata.DeletionTimestamp == nil {
		return
	}
	switch {
	case k.Resource == (store.Resource{Resource: "namespaces"}):
		lc.enqueue(workItem{workNamespace, k})
	case k.Resource == crdResource:
		lc.enqueue(workItem{workCRD, k})
	}
	for _, f := range u.Metadata.Finalizers {
		if f == finalizerForeground || f == finalizerOrphan {
			lc.enqueue(workItem{workOwner, k})
		}
	}
}

// lifecycleMeta is what the lifecycle acts on of an object.
type lifecycleMeta struct {
	Metadata struct {
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
		Finalizers        []string                `json:"finalizers"`
	} `json:"metadata"`
}

// read decodes m from a stored object's JSON, only when one of its keys
// appears in it: every write of every space passes here, and most have
// none. The store keeps JSON as encoding/json writes it, whose keys are
// never escaped, so a key that is there appears as it is.
func (m *lifecycleMeta) read(data []byte) error {
	for _, key := range []string{`"ownerReferences":`, `"deletionTimestamp":`, `"finalizers":`} {
		if bytes.Contains(data, []byte(key)) {
			return json.Unmarshal(data, m)
		}
	}
	return nil
}

func (lc *lifecycle) unindex(k store.Key) {
	for _, uid := range lc.owners[k] {
		if m := lc.dependents[uid]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(lc.dependents, uid)
			}
		}
	}
	delete(lc.owners, k)
}

func nsKey(space, ns string) store.Key {
	return store.Key{Space: space, Resource: store.Resource{Resource: "namespaces"}, Name: ns}
}

func (lc *lifecycle) enqueue(it workItem) {
	lc.mu.Lock()
	lc.enqueueLocked(it)
	lc.mu.Unlock()
}

func (lc *lifecycle) enqueueLocked(it workItem) {
	if _, ok := lc.pending[it]; ok {
		return
	}
	lc.pending[it] = struct{}{}
	lc.queue = append(lc.queue, it)
	select {
	case lc.wake <- struct{}{}:
	default:
	}
}

// work drains the queue; an item that fails is retried after a pause.
func (lc *lifecycle) work(ctx context.Context) {
	for {
		lc.mu.Lock()
		if len(lc.queue) == 0 {
			lc.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-lc.wake:
				continue
			}
		}
		it := lc.queue[0]
		lc.queue = lc.queue[1:]
		delete(lc.pending, it)
		lc.mu.Unlock()

		retry, err := lc.process(ctx, it)
		if err != nil && ctx.Err() == nil {
			lc.s.log.Warn("lifecycle work failed", "key", it.key.String(), "error", err)
		}
		if (retry || err != nil) && ctx.Err() == nil {
			time.AfterFunc(200*time.Millisecond, func() { lc.enqueue(it) })
		}
	}
}

func (lc *lifecycle) process(ctx context.Context, it workItem) (retry bool, err error) {
	switch it.kind {
	case workDependent:
		return false, lc.collectDependent(ctx, it.key)
	case workOwner:
		return lc.finishOwner(ctx, it.key)
	case workNamespace:
		return lc.finishNamespace(ctx, it.key)
	case workCRD:
		return lc.finishCRD(ctx, it.key)
	}
	return false, nil
}

// ownerExists looks an owner up by name and checks its uid, as kube's
// garbage collector does before deleting a dependent.
func (lc *lifecycle) ownerExists(dep store.Key, ref metav1.OwnerReference) (bool, error) {
	sv := lc.s.catalog.byKind(dep.Space, ref.APIVersion, ref.Kind)
	if sv == nil {
		// Unknown kind: the owner cannot exist in this space.
		return false, nil
	}
	ns := ""
	if sv.namespaced {
		ns = dep.Namespace
	}
	obj, err := lc.s.store.Get(store.Key{Space: dep.Space, Resource: sv.storeResource(), Namespace: ns, Name: ref.Name})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return obj.UID == string(ref.UID), nil
}

// collectDependent deletes an object whose owners are all gone, or drops
// references to owners that are gone while others remain.
func (lc *lifecycle) collectDependent(ctx context.Context, k store.Key) error {
	_, u, err := lc.get(k)
	if u == nil {
		return err
	}
	refs := u.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	live := 0
	for _, r := range refs {
		ok, err := lc.ownerExists(k, r)
		if err != nil {
			return err
		}
		if ok {
			live++
		}
	}
	if live > 0 {
		return nil
	}
	policy := metav1.DeletePropagationBackground
	return lc.deleteKey(ctx, k, policy)
}

// deleteKey deletes one object with the given propagation policy.
func (lc *lifecycle) deleteKey(ctx context.Context, k store.Key, policy metav1.DeletionPropagation) error {
	sv := lc.s.catalog.byResource(k.Space, k.Resource)
	if sv == nil {
		_, err := lc.s.store.Delete(ctx, k, 0, "")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	_, _, err := lc.s.deleteObject(ctx, lc.s.store.Space(k.Space), sv, k, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// finishOwner handles an owner being deleted with the foreground or orphan
// policy: foreground deletes its dependents and waits for the blocking ones
// to go; orphan removes its references from dependents. Then it removes its
// finalizer.
func (lc *lifecycle) finishOwner(ctx context.Context, k store.Key) (bool, error) {
	obj, u, err := lc.getDeleting(k)
	if u == nil {
		return false, err
	}
	lc.mu.Lock()
	var deps []store.Key
	for d := range lc.dependents[types.UID(obj.UID)] {
		deps = append(deps, d)
	}
	lc.mu.Unlock()
	fins := u.GetFinalizers()
	switch {
	case hasString(fins, finalizerOrphan):
		for _, d := range deps {
			if err := lc.dropOwnerRef(ctx, d, types.UID(obj.UID)); err != nil {
				return false, err
			}
		}
		return false, lc.removeFinalizer(ctx, k, finalizerOrphan)
	case hasString(fins, finalizerForeground):
		blocking := 0
		for _, d := range deps {
			dobj, err := lc.s.store.Get(d)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return false, err
			}
			du, err := parseObject(dobj.Data)
			if err != nil {
				return false, err
			}
			for _, r := range du.GetOwnerReferences() {
				if r.UID == types.UID(obj.UID) && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
					blocking++
				}
			}
			if du.GetDeletionTimestamp() == nil {
				if err := lc.deleteKey(ctx, d, metav1.DeletePropagationForeground); err != nil {
					return false, err
				}
			}
		}
		if blocking > 0 {
			return true, nil
		}
		return false, lc.removeFinalizer(ctx, k, finalizerForeground)
	}
	return false, nil
}

// getDeleting reads an object that is being deleted; u is nil when it is
// gone or not being deleted.
func (lc *lifecycle) getDeleting(k store.Key) (*store.Object, *unstructured.Unstructured, error) {
	obj, u, err := lc.get(k)
	if u == nil || u.GetDeletionTimestamp() == nil {
		return nil, nil, err
	}
	return obj, u, nil
}

// get reads an object; u is nil (and err too) when it is gone.
func (lc *lifecycle) get(k store.Key) (*store.Object, *unstructured.Unstructured, error) {
	obj, u, err := getObject(lc.s.store, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	return obj, u, err
}

// dropOwnerRef removes the reference to owner from a dependent.
func (lc *lifecycle) dropOwnerRef(ctx context.Context, k store.Key, owner types.UID) error {
	return lc.update(ctx, k, func(u *unstructured.Unstructured) bool {
		refs := u.GetOwnerReferences()
		out := refs[:0]
		for _, r := range refs {
			if r.UID != owner {
				out = append(out, r)
			}
		}
		if len(out) == len(refs) {
			return false
		}
		u.SetOwnerReferences(out)
		return true
	})
}

func (lc *lifecycle) removeFinalizer(ctx context.Context, k store.Key, f string) error {
	return lc.update(ctx, k, func(u *unstructured.Unstructured) bool {
		if !hasString(u.GetFinalizers(), f) {
			return false
		}
		u.SetFinalizers(removeFinalizer(u.GetFinalizers(), f))
		return true
	})
}

// update runs a read-modify-write on one stored object with retries; an
// object left with a deletionTimestamp and no finalizers is deleted.
func (lc *lifecycle) update(ctx context.Context, k store.Key, mutate func(*unstructured.Unstructured) bool) error {
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		obj, u, err := lc.get(k)
		if u == nil {
			return err
		}
		if !mutate(u) {
			return nil
		}
		op := store.Op{Type: store.OpUpdate, Key: k, ExpectRevision: obj.Revision}
		if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) == 0 && !hasSpecFinalizers(u) {
			op = store.Op{Type: store.OpDelete, Key: k, ExpectRevision: obj.Revision}
		} else if op.Data, err = u.MarshalJSON(); err != nil {
			return err
		}
		_, err = lc.s.store.Txn(ctx, op)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return err
	}
	return errors.New("kubeapi: too many conflicts")
}

// finishNamespace deletes everything in a terminating namespace, then
// removes the namespace's "kubernetes" finalizer, which deletes it.
func (lc *lifecycle) finishNamespace(ctx context.Context, k store.Key) (bool, error) {
	if _, u, err := lc.getDeleting(k); u == nil {
		return false, err
	}
	list, err := lc.s.store.List(store.ListOptions{Space: k.Space, Namespace: k.Name})
	if err != nil {
		return false, err
	}
	remaining := 0
	for _, it := range list.Items {
		if it.Key.Namespace != k.Name {
			continue
		}
		remaining++
		if err := lc.deleteKey(ctx, it.Key, metav1.DeletePropagationBackground); err != nil {
			return false, err
		}
	}
	if remaining > 0 {
		// Objects with finalizers may linger; deletes of the rest will
		// requeue this namespace, and a retry covers the lingering ones.
		return true, nil
	}
	return false, lc.update(ctx, k, func(u *unstructured.Unstructured) bool {
		fins, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers")
		if !hasString(fins, "kubernetes") {
			return false
		}
		_ = unstructured.SetNestedStringSlice(u.Object, removeFinalizer(fins, "kubernetes"), "spec", "finalizers")
		return true
	})
}

// finishCRD deletes the custom resources of a terminating CRD, then
// releases the CRD.
func (lc *lifecycle) finishCRD(ctx context.Context, k store.Key) (bool, error) {
	cc := lc.s.catalog.crd(k.Space, k.Name)
	if cc == nil || cc.obj.DeletionTimestamp == nil {
		return false, nil
	}
	r := store.Resource{Group: cc.def.Group, Resource: cc.def.Resource}
	if resources.BuiltinGroup(r.Group) {
		// Its objects are the built-in API's (a CRD stored before such
		// groups were refused): they outlive the CRD.
		return false, lc.removeFinalizer(ctx, k, crdCleanupFinalizer)
	}
	list, err := lc.s.store.List(store.ListOptions{Space: k.Space, Resource: r})
	if err != nil {
		return false, err
	}
	for _, it := range list.Items {
		if err := lc.deleteKey(ctx, it.Key, metav1.DeletePropagationBackground); err != nil {
			return false, err
		}
	}
	if len(list.Items) > 0 {
		return true, nil
	}
	return false, lc.removeFinalizer(ctx, k, crdCleanupFinalizer)
}

func hasString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// byKind finds the served resource for an owner reference's apiVersion
// and kind in a space.
func (c *catalog) byKind(space, apiVersion, kind string) *served {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil
	}
	if sv, ok := c.byGK[schema.GroupKind{Group: gv.Group, Kind: kind}]; ok {
		return sv
	}
	for _, sv := range c.all(space) {
		if sv.group == gv.Group && sv.kind == kind {
			return sv
		}
	}
	return nil
}

// byResource finds the served resource (any version) for a stored key.
func (c *catalog) byResource(space string, r store.Resource) *served {
	gr := schema.GroupResource{Group: r.Group, Resource: r.Resource}
	if sv, ok := c.builtins[gr]; ok {
		return sv
	}
	cc := c.crd(space, r.Resource+"."+r.Group)
	if cc == nil {
		return nil
	}
	for _, v := range cc.def.Versions {
		if v.Storage {
			return servedFromCRD(cc.def, v)
		}
	}
	return nil
}
