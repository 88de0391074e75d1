package backing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// mirror keeps one backed space: its copy in the store, what goes back to
// the backend, and its record's conditions.
type mirror struct {
	cfg   Config
	space string
	// inventory is set for the inventory space: its SyncTargets are
	// written through the root's API (the inventory controller's client),
	// which passes them to the backend, so the copy takes the backend's
	// status too, and nothing is written back.
	inventory bool
	log       *slog.Logger

	dyn   dynamic.Interface
	disco discovery.DiscoveryInterface

	// The informers, by resource (only the loop adds to them).
	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[store.Resource]*followed
	catalog   catalog

	mu sync.Mutex
	// dirty holds the objects the informers reported since the last copy.
	dirty map[store.Key]bool
	// listErrs holds, per resource, the last list or watch failure.
	listErrs map[store.Resource]error
	// reach is the last probe's outcome (nil: answering).
	reach error
	// crdsChanged is set when a CRD of the backend changed: discovery is
	// read again before the resources to follow are.
	crdsChanged bool
	wake        chan struct{}
	// back is signalled when the probe finds the backend answering after
	// it did not.
	back chan struct{}
	// versions holds, per copied object, the revision of its copy and the
	// backend's resourceVersion it was copied from or found equal to: what
	// Canopy writes back names the backend's (CombinedStatus
	// observedRevision).
	versions map[store.Key]copyVersion

	// writes is the session's queue of what to write back (the session's
	// goroutine adds to it, its write-back loops take from it).
	writes workqueue.TypedRateLimitingInterface[writeBack]
}

// followed is one resource of the backend copied into the space.
type followed struct {
	inf    cache.SharedIndexInformer
	synced bool // listed once, and copied whole since
}

func newMirror(cfg Config, space string) *mirror {
	return &mirror{
		cfg: cfg, space: space, log: cfg.Logger.With("space", space),
		informers: map[store.Resource]*followed{},
		dirty:     map[store.Key]bool{},
		listErrs:  map[store.Resource]error{},
		wake:      make(chan struct{}, 1),
		back:      make(chan struct{}, 1),
		versions:  map[store.Key]copyVersion{},
	}
}

// copyVersion is a copy's revision and the backend's resourceVersion of
// the same content.
type copyVersion struct {
	rev int64
	rv  string
}

// run keeps the space until ctx ends.
func (m *mirror) run(ctx context.Context) {
	info := m.info()
	m.inventory = info.Kind == layout.SpaceKindInventory
	rc, err := RESTConfig(m.cfg.Store, info.Secret)
	if err == nil {
		if m.dyn, err = dynamic.NewForConfig(rc); err == nil {
			m.disco, err = discovery.NewDiscoveryClientForConfig(rc)
		}
		if err != nil {
			err = &configError{ReasonBadKubeconfig, err}
		}
	}
	if err != nil {
		// Nothing to reach the backend with: neither condition can be
		// True until the Space or its Secret changes.
		m.notReady(ctx, err)
		m.setCondition(ctx, metav1.Condition{Type: ConditionReachable, Status: metav1.ConditionFalse, Reason: err.(*configError).reason,
			Message: "the kubeconfig cannot be used: " + err.Error()})
		<-ctx.Done()
		return
	}
	go m.probe(ctx, rc)
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	for ctx.Err() == nil {
		err := m.session(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errBackendBack):
			backoff = minBackoff
			continue
		}
		m.log.Info("backed space: retrying", "error", err)
		m.notReady(ctx, err)
		select {
		case <-ctx.Done():
		case <-m.back:
			backoff = minBackoff
			continue
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// errBackendBack ends a session when the backend answers again after it
// did not: client-go's informers would wait out their backoff before
// listing again, a new session lists at once.
var errBackendBack = errors.New("the backend answers again")

// info reads the space's record (zero when it is gone).
func (m *mirror) info() layout.SpaceInfo {
	o, err := m.cfg.Store.Get(store.Key{Resource: layout.SpaceResource, Name: m.space})
	if err != nil {
		return layout.SpaceInfo{}
	}
	return layout.ReadSpace(o)
}

// session installs the CRDs, follows the backend until every informer has
// listed, and then copies and writes back until ctx ends. It returns the
// failure that stopped it.
func (m *mirror) session(ctx context.Context) error {
	if err := m.installCRDs(ctx); err != nil {
		return err
	}
	if err := m.discover(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(m.dyn, 0)
	writes := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[writeBack]())
	defer func() {
		// The informers stop with ctx, and Shutdown waits for them.
		cancel()
		factory.Shutdown()
		writes.ShutDown()
	}()
	m.factory, m.writes = factory, writes
	m.informers = map[store.Resource]*followed{}
	m.follow(ctx)
	// Nothing is copied until everything placement reads has been listed:
	// a space is not placed from half of it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !m.allSynced() {
		if err := m.listFailure(); err != nil {
			m.notReady(ctx, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.back:
			return errBackendBack
		case <-tick.C:
		}
		m.follow(ctx) // the EdgePlacements listed may name more resources
	}
	rev := m.cfg.Store.Revision()
	if err := m.copyDirty(ctx); err != nil {
		return err
	}
	m.setCondition(ctx, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady,
		Message: fmt.Sprintf("following %d resources of the backend", len(m.informers))})
	m.log.Info("backed space ready", "resources", len(m.informers))
	for range 2 {
		go m.writeBackLoop(ctx, m.writes)
	}
	return m.loop(ctx, rev)
}

// discover reads the backend's discovery until it serves every base
// resource (the CRDs just installed take a moment to be served).
func (m *mirror) discover(ctx context.Context) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := m.catalog.refresh(m.disco); err != nil {
			return err
		}
		missing := ""
		for _, gr := range m.base() {
			if _, ok := m.catalog.get(gr); !ok {
				missing = gr.String()
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the backend does not serve %s", missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// base is what the space follows whatever its placements say.
func (m *mirror) base() []schema.GroupResource {
	if m.inventory {
		return inventoryResources
	}
	return baseResources
}

// loop copies what the informers report, follows what placement writes
// into the space to write it back, and follows new resources, until ctx
// ends.
func (m *mirror) loop(ctx context.Context, since int64) error {
	w, err := m.cfg.Store.Watch(ctx, store.WatchOptions{Space: m.space, Since: since})
	if err != nil {
		return err
	}
	m.writeBackAll(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.back:
			return errBackendBack
		case ev, ok := <-w.Events():
			if !ok {
				return fmt.Errorf("watching the space: %w", w.Err())
			}
			m.classify(ev)
		case <-m.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(m.cfg.Settle):
			}
			m.follow(ctx)
			if err := m.copyDirty(ctx); err != nil {
				m.log.Warn("backed space: copying", "error", err)
				m.poke()
			}
		}
	}
}

func (m *mirror) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// inventoryResources are what an inventory space follows.
var inventoryResources = []schema.GroupResource{
	{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets},
	{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceLocations},
}

// baseResources are followed in a workload description space whatever
// the placements say: what placement reads besides the objects it places.
var baseResources = []schema.GroupResource{
	{Resource: "namespaces"},
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceEdgePlacements},
	{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceStatusCollectors},
	{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceCustomizers},
}

// skippedByWildcard are not followed for a downsync clause's "*": they
// are the cluster's own bookkeeping, never workload.
var skippedByWildcard = map[schema.GroupResource]bool{
	{Resource: "events"}:                                    true,
	{Group: "events.k8s.io", Resource: "events"}:            true,
	{Group: "coordination.k8s.io", Resource: "leases"}:      true,
	{Resource: "componentstatuses"}:                         true,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}: true,
	{Resource: "endpoints"}:                                 true,
}

// wanted lists the resources to follow: the base ones and those the
// downsync clauses of the EdgePlacements listed so far name.
func (m *mirror) wanted() []apiResource {
	var out []apiResource
	seen := map[schema.GroupResource]bool{}
	add := func(r apiResource) {
		if !seen[r.gr()] && r.listable() && !owned(r.res(), nil) {
			seen[r.gr()] = true
			out = append(out, r)
		}
	}
	for _, gr := range m.base() {
		if r, ok := m.catalog.get(gr); ok {
			add(r)
		}
	}
	f := m.informers[store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceEdgePlacements}]
	if f == nil {
		return out
	}
	for _, o := range f.inf.GetStore().List() {
		var ep v1alpha1.EdgePlacement
		if err := fromUnstructured(o, &ep); err != nil {
			continue
		}
		for _, cl := range ep.Spec.Downsync {
			for _, r := range m.catalog.all() {
				if cl.APIGroup != nil && *cl.APIGroup != r.gvr.Group {
					continue
				}
				switch {
				case slices.Contains(cl.Resources, r.gvr.Resource):
					add(r)
				case slices.Contains(cl.Resources, "*") && !skippedByWildcard[r.gr()]:
					add(r)
				}
			}
		}
	}
	return out
}

// follow starts an informer for every wanted resource not followed yet,
// after reading discovery again if a CRD changed. Informers are never
// stopped while the session lasts: a resource no placement names any
// more is still copied.
func (m *mirror) follow(ctx context.Context) {
	m.mu.Lock()
	refresh := m.crdsChanged
	m.crdsChanged = false
	m.mu.Unlock()
	if refresh {
		if err := m.catalog.refresh(m.disco); err != nil {
			m.log.Info("backed space: discovery", "error", err)
			m.mu.Lock()
			m.crdsChanged = true
			m.mu.Unlock()
		}
	}
	added := false
	for _, r := range m.wanted() {
		res := r.res()
		if m.informers[res] != nil {
			continue
		}
		inf := m.factory.ForResource(r.gvr).Informer()
		_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			m.mu.Lock()
			m.listErrs[res] = err
			m.mu.Unlock()
		})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { m.touch(res, o) },
			UpdateFunc: func(_, o any) { m.touch(res, o) },
			DeleteFunc: func(o any) { m.touch(res, o) },
		})
		m.informers[res] = &followed{inf: inf}
		added = true
	}
	if added {
		m.factory.Start(ctx.Done())
		m.poke()
	}
}

// touch marks the object o of res to be copied.
func (m *mirror) touch(res store.Resource, o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	m.mu.Lock()
	m.dirty[store.Key{Space: m.space, Resource: res, Namespace: u.GetNamespace(), Name: u.GetName()}] = true
	m.crdsChanged = m.crdsChanged || res == crdResource
	m.mu.Unlock()
	m.poke()
}

var crdResource = store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// allSynced reports whether every informer has listed once.
func (m *mirror) allSynced() bool {
	for _, f := range m.informers {
		if !f.inf.HasSynced() {
			return false
		}
	}
	return len(m.informers) > 0
}

// listFailure is why an informer that has not listed yet has not: a
// Forbidden names the verb and the resource.
func (m *mirror) listFailure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, res := range slices.SortedFunc(maps.Keys(m.informers), func(a, b store.Resource) int { return compareStrings(a.String(), b.String()) }) {
		f := m.informers[res]
		err := m.listErrs[res]
		if f.inf.HasSynced() || err == nil {
			continue
		}
		if apierrors.IsForbidden(err) {
			return &configError{ReasonForbidden, fmt.Errorf("cannot list and watch %s in the backend: %w", res, err)}
		}
		return err
	}
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxOps bounds the writes of one Txn.
const maxOps = 500

// markListed marks to be copied, for each followed resource listed since
// the last copy, every object the backend has and every copy in the
// space: the copy becomes the list, deletions included.
func (m *mirror) markListed() error {
	for res, f := range m.informers {
		if f.synced || !f.inf.HasSynced() {
			continue
		}
		list, err := m.cfg.Store.List(store.ListOptions{Space: m.space, Resource: res})
		if err != nil {
			return err
		}
		m.mu.Lock()
		for _, o := range list.Items {
			m.dirty[o.Key] = true
		}
		for _, o := range f.inf.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			m.dirty[store.Key{Space: m.space, Resource: res, Namespace: u.GetNamespace(), Name: u.GetName()}] = true
		}
		m.mu.Unlock()
		f.synced = true
	}
	return nil
}

// copyDirty writes into the space the latest version of each object
// touched since the last copy (and of every object of a resource listed
// since, markListed), in Txns of at most maxOps. A Txn that loses a race
// with another writer is done again from the new state.
func (m *mirror) copyDirty(ctx context.Context) error {
	if err := m.markListed(); err != nil {
		return err
	}
	m.mu.Lock()
	keys := slices.Collect(maps.Keys(m.dirty))
	clear(m.dirty)
	m.mu.Unlock()
	var ops []store.Op
	var rvs []string // the backend's resourceVersion of each op
	done := 0        // keys[:done] are written
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		res, err := m.cfg.Store.Txn(ctx, ops...)
		if err != nil {
			m.requeue(keys[done:]) // copied again, from the new state
		} else {
			for i, op := range ops {
				m.noteVersion(op.Key, res.Objects[i].Revision, rvs[i], op.Type == store.OpDelete)
			}
		}
		ops, rvs = ops[:0], rvs[:0]
		return err
	}
	for i, k := range keys {
		f := m.informers[k.Resource]
		if f == nil || !f.synced {
			// Not listed yet: copied whole once it is (markListed).
			continue
		}
		op, rv, err := m.copyOp(k, f)
		if err != nil {
			ferr := flush()
			m.requeue(keys[i:])
			return errors.Join(err, ferr)
		}
		if op != nil {
			ops, rvs = append(ops, *op), append(rvs, rv)
		}
		if len(ops) >= maxOps {
			if err := flush(); err != nil {
				return err
			}
			done = i + 1
		}
	}
	return flush()
}

// requeue marks keys to be copied again.
func (m *mirror) requeue(keys []store.Key) {
	m.mu.Lock()
	for _, k := range keys {
		m.dirty[k] = true
	}
	m.mu.Unlock()
}

// copyOp is the write that makes the copy of k what the backend has (nil:
// nothing to do), and the backend's resourceVersion it copies. The copy
// keeps its own status (but in the inventory); objects Canopy owns in the
// space are never copied from the backend.
func (m *mirror) copyOp(k store.Key, f *followed) (*store.Op, string, error) {
	cur, err := m.cfg.Store.Get(k)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, "", err
	}
	if cur != nil && owned(k.Resource, cur.Labels) {
		return nil, "", nil
	}
	o, exists, err := f.inf.GetStore().GetByKey(cacheKey(k))
	if err != nil {
		return nil, "", err
	}
	if !exists {
		if cur == nil {
			return nil, "", nil
		}
		return &store.Op{Type: store.OpDelete, Key: k, ExpectRevision: cur.Revision}, "", nil
	}
	u := o.(*unstructured.Unstructured)
	if owned(k.Resource, u.GetLabels()) || skippedCRD(k, u) {
		return nil, "", nil
	}
	copied := u.DeepCopy().Object
	md, _ := copied["metadata"].(map[string]any)
	delete(md, "resourceVersion")
	delete(md, "managedFields")
	delete(md, "selfLink")
	if cur != nil {
		curMap := map[string]any{}
		if err := json.Unmarshal(cur.Data, &curMap); err != nil {
			return nil, "", err
		}
		if !m.inventory {
			delete(copied, "status")
			if st, ok := curMap["status"]; ok {
				copied["status"] = st
			}
		}
		if sameCopy(copied, curMap) {
			m.noteVersion(k, cur.Revision, u.GetResourceVersion(), false)
			return nil, "", nil
		}
	}
	data, err := json.Marshal(copied)
	if err != nil {
		return nil, "", err
	}
	if cur == nil {
		return &store.Op{Type: store.OpCreate, Key: k, Data: data}, u.GetResourceVersion(), nil
	}
	return &store.Op{Type: store.OpUpdate, Key: k, Data: data, ExpectRevision: cur.Revision}, u.GetResourceVersion(), nil
}

// noteVersion records that the copy of k at rev is the backend's rv
// (gone: forgets k).
func (m *mirror) noteVersion(k store.Key, rev int64, rv string, gone bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gone {
		delete(m.versions, k)
		return
	}
	m.versions[k] = copyVersion{rev: rev, rv: rv}
}

// backendVersion is the backend's resourceVersion of the copy of k at
// rev, if known.
func (m *mirror) backendVersion(k store.Key, rev string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.versions[k]
	if !ok || strconv.FormatInt(v.rev, 10) != rev {
		return "", false
	}
	return v.rv, true
}

// sameCopy compares a copy about to be written with the stored one, but
// for the fields the store writes.
func sameCopy(copied, cur map[string]any) bool {
	b, err := json.Marshal(copied)
	if err != nil {
		return false
	}
	var a map[string]any
	if err := json.Unmarshal(b, &a); err != nil {
		return false
	}
	for _, m := range []map[string]any{a, cur} {
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
			delete(md, "managedFields")
		}
	}
	return reflect.DeepEqual(a, cur)
}

// skippedCRD reports whether u is one of Canopy's own CRDs: the root
// installs those in the backend, and the space needs none.
func skippedCRD(k store.Key, u *unstructured.Unstructured) bool {
	if k.Resource.Group != "apiextensions.k8s.io" {
		return false
	}
	g, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	return g == v1alpha1.GroupName
}

// owned reports whether objects of res (with labels) are written into the
// space by Canopy, never by the backend: CombinedStatuses,
// SinglePlacementSlices and upsynced objects.
func owned(res store.Resource, labels map[string]string) bool {
	if res.Group == v1alpha1.GroupName && (res.Resource == v1alpha1.ResourceCombinedStatuses || res.Resource == v1alpha1.ResourceSinglePlacementSlices) {
		return true
	}
	return labels[v1alpha1.UpsyncedLabel] == "true"
}

func cacheKey(k store.Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// installCRDs applies the workload CRDs (the inventory CRDs for the
// inventory) in the backend.
func (m *mirror) installCRDs(ctx context.Context) error {
	crds := v1alpha1.WorkloadCRDs
	if m.inventory {
		crds = v1alpha1.StoredInventoryCRDs
	}
	manifests, err := crds()
	if err != nil {
		return err
	}
	client := m.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, b := range manifests {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return err
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)})
		if apierrors.IsForbidden(err) {
			return &configError{ReasonForbidden, fmt.Errorf("cannot create or update customresourcedefinitions.apiextensions.k8s.io %s in the backend: %w", u.GetName(), err)}
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s in the backend: %w", u.GetName(), err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// probe asks the backend whether it answers every Config.Probe and keeps
// the Reachable condition.
func (m *mirror) probe(ctx context.Context, rc *rest.Config) {
	rc = rest.CopyConfig(rc)
	rc.Timeout = max(m.cfg.Probe, time.Second)
	client, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return
	}
	t := time.NewTicker(m.cfg.Probe)
	defer t.Stop()
	for {
		_, err := client.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		wasDown := m.reach != nil
		m.reach = err
		m.mu.Unlock()
		if wasDown && err == nil {
			select {
			case m.back <- struct{}{}:
			default:
			}
		}
		c := metav1.Condition{Type: ConditionReachable, Status: metav1.ConditionTrue, Reason: "Answering", Message: "the backend's /readyz answers"}
		if err != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonUnreachable, err.Error()
		}
		m.setCondition(ctx, c)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// notReady sets the Ready condition False with err's reason.
func (m *mirror) notReady(ctx context.Context, err error) {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonFailed, Message: err.Error()}
	var ce *configError
	m.mu.Lock()
	reach := m.reach
	m.mu.Unlock()
	switch {
	case errors.As(err, &ce):
		c.Reason = ce.reason
	case reach != nil:
		c.Reason = ReasonUnreachable
	}
	m.setCondition(ctx, c)
}

// setCondition sets c on the space's record when it changes its status,
// reason or message.
func (m *mirror) setCondition(ctx context.Context, c metav1.Condition) {
	st := m.cfg.Store
	for range 5 {
		rec, err := st.Get(store.Key{Resource: layout.SpaceResource, Name: m.space})
		if err != nil {
			return
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(rec.Data); err != nil {
			return
		}
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var conds []metav1.Condition
		if b, err := json.Marshal(raw); err == nil {
			_ = json.Unmarshal(b, &conds)
		}
		i := slices.IndexFunc(conds, func(x metav1.Condition) bool { return x.Type == c.Type })
		if i >= 0 && conds[i].Status == c.Status && conds[i].Reason == c.Reason && conds[i].Message == c.Message {
			return
		}
		c.LastTransitionTime = metav1.Now()
		if i >= 0 && conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		if i >= 0 {
			conds[i] = c
		} else {
			conds = append(conds, c)
		}
		var out []any
		if b, err := json.Marshal(conds); err == nil {
			_ = json.Unmarshal(b, &out)
		}
		_ = unstructured.SetNestedSlice(u.Object, out, "status", "conditions")
		data, err := u.MarshalJSON()
		if err != nil {
			return
		}
		_, err = st.Txn(ctx, store.Op{Type: store.OpUpdate, Key: rec.Key, Data: data, ExpectRevision: rec.Revision})
		if !errors.Is(err, store.ErrConflict) {
			if err != nil && ctx.Err() == nil {
				m.log.Warn("backed space: writing a condition", "condition", c.Type, "error", err)
			}
			return
		}
	}
}
