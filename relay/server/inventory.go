package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	syncTargetGVR = edgev1alpha1.SyncTargetsGVR
	// syncTargetResource is where SyncTargets are kept in the store.
	syncTargetResource = store.Resource{Group: edgev1alpha1.GroupName, Resource: edgev1alpha1.ResourceSyncTargets}
)

// inventoryRetry is how soon SyncTarget writes that failed are tried
// again. A variable for tests.
var inventoryRetry = time.Second

// NoPath is the status.path of a SyncTarget that no edge relay serves
// (one an admin made before its edge joined, or whose edge its relays no
// longer announce): what kubectl prints for an absent value.
const NoPath = "<none>"

// maintainInventory installs the inventory CRDs (SyncTarget, Location:
// edgev1alpha1.InventoryCRDs) in the inventory space, again at once if one
// is deleted or changed, and keeps the SyncTargets in line with the
// destinations the relay tree announces, until ctx is done. It writes
// through the root's own kube API as the admin, like any client, and only
// what changed: a change in the subtree costs writes for the destinations
// it touched, not for the whole fleet.
//
//   - A connected destination has a SyncTarget: created if missing (the
//     edge owns it), labelled as announced, its status the path from the
//     root, CONNECTED True and LAST-SEEN when it (re)connected.
//   - A disconnected one keeps its SyncTarget, if it has one, with
//     CONNECTED False and LAST-SEEN when it was last heard from: when the
//     root saw it go, or, if that was not seen by this process (a root
//     restart), the time already shown or announced. Its SyncTarget is not
//     created again once deleted, so an edge is retired by stopping it and
//     then deleting its SyncTarget.
//   - A SyncTarget that no edge relay announces shows PATH NoPath and
//     CONNECTED False.
func (r *Root) maintainInventory(ctx context.Context) error {
	dc, err := r.spaceClient(layout.InventorySpace)
	if err != nil {
		return err
	}
	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		return err
	}
	// The watches start first: whatever changes after them is seen.
	changes, names, err := r.watchInventory(ctx)
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, dc, manifests); err != nil {
		return fmt.Errorf("server: installing the inventory CRDs: %w", err)
	}
	r.crds.inventory.Store(true)
	inv := &inventory{targets: dc.Resource(syncTargetGVR), rootName: r.cfg.treeName(), log: r.log,
		names: names, written: map[string]string{}, live: map[string]bool{}, created: map[string]bool{}}
	for {
		crds, targets, ok := changes.take()
		if !ok {
			return errors.New("server: a watch of the inventory or of route and link records ended")
		}
		var retry <-chan time.Time // set when a write failed: no change may come to retry it
		if crds {
			if err := installCRDs(ctx, dc, manifests); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("installing the inventory CRDs again", "error", err)
				}
				changes.crdsAgain()
				retry = time.After(inventoryRetry)
			}
		}
		for name, present := range targets {
			// A SyncTarget made or deleted by anyone else is looked at
			// again: one of a connected destination comes back at once.
			if present && inv.created[name] {
				delete(inv.created, name)
				inv.names[name] = true
				continue
			}
			delete(inv.written, name)
			delete(inv.created, name)
			if present {
				inv.names[name] = true
			} else {
				delete(inv.names, name)
			}
		}
		// Every replica's children, from the replicated route and link
		// records: the leader may not be the replica a child dialed.
		dests, err := session.Fleet(r.store, layout.DownsyncSpace)
		if err != nil {
			return err
		}
		if !inv.sync(ctx, dests) {
			retry = time.After(inventoryRetry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
		case <-changes.wake:
		}
	}
}

// inventoryChanges gathers what maintainInventory's watches saw between
// two of its passes. Safe for concurrent use.
type inventoryChanges struct {
	wake chan struct{} // signalled (coalesced) at every change

	mu      sync.Mutex
	crds    bool            // an inventory CRD was deleted or changed
	targets map[string]bool // SyncTargets made (true) or deleted (false): the last event of each
	ended   bool            // a watch ended
}

func (c *inventoryChanges) note(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets what changed; ok is false once a watch ended.
func (c *inventoryChanges) take() (crds bool, targets map[string]bool, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	crds, targets = c.crds, c.targets
	c.crds, c.targets = false, nil
	return crds, targets, !c.ended
}

// crdsAgain asks the next pass to install the CRDs again.
func (c *inventoryChanges) crdsAgain() {
	c.mu.Lock()
	c.crds = true
	c.mu.Unlock()
}

// watchInventory lists the SyncTargets, then watches from that revision
// the route and link records (the fleet), the SyncTargets and the
// inventory CRDs, until ctx is done.
func (r *Root) watchInventory(ctx context.Context) (*inventoryChanges, map[string]bool, error) {
	list, err := r.store.List(store.ListOptions{Space: layout.InventorySpace, Resource: syncTargetResource})
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list.Items))
	for _, o := range list.Items {
		names[o.Key.Name] = true
	}
	canopy := map[string]bool{}
	for _, k := range crdKeys(layout.InventorySpace, edgev1alpha1.InventoryResources) {
		canopy[k.Name] = true
	}
	c := &inventoryChanges{wake: make(chan struct{}, 1)}
	since := list.Revision
	watches := []struct {
		opts  store.WatchOptions
		event func(store.Event)
	}{
		{store.WatchOptions{Resource: layout.RouteResource}, func(store.Event) {}},
		{store.WatchOptions{Resource: session.LinkResource}, func(store.Event) {}},
		{store.WatchOptions{Space: layout.InventorySpace, Resource: syncTargetResource}, func(ev store.Event) {
			if ev.Type == store.Added || ev.Type == store.Deleted {
				if c.targets == nil {
					c.targets = map[string]bool{}
				}
				c.targets[ev.Object.Key.Name] = ev.Type == store.Added
			}
		}},
		{store.WatchOptions{Space: layout.InventorySpace, Resource: crdStoreResource}, func(ev store.Event) {
			if canopy[ev.Object.Key.Name] && crdTouched(ev) {
				c.crds = true
			}
		}},
	}
	var ws []store.Watcher
	for _, w := range watches {
		w.opts.Since = since
		sw, err := r.store.Watch(ctx, w.opts)
		if err != nil {
			for _, sw := range ws {
				sw.Stop()
			}
			return nil, nil, err
		}
		ws = append(ws, sw)
	}
	for i, sw := range ws {
		go func() {
			defer sw.Stop()
			for ev := range sw.Events() {
				if ev.Object != nil {
					c.note(func() { watches[i].event(ev) })
				}
			}
			c.note(func() { c.ended = ctx.Err() == nil })
		}()
	}
	return c, names, nil
}

// inventory is the state of maintainInventory's passes. Not safe for
// concurrent use.
type inventory struct {
	targets  dynamic.NamespaceableResourceInterface
	rootName string
	log      *slog.Logger
	// names are the SyncTargets that exist, as the watch last showed.
	names map[string]bool
	// written remembers, by name, the fingerprint of what was last
	// written (or found right) for each SyncTarget.
	written map[string]string
	// live are the SyncTargets this process last showed connected.
	live map[string]bool
	// created are the SyncTargets this process made whose creation the
	// watch has not shown yet.
	created map[string]bool
}

// unserved is the fingerprint of a SyncTarget that no relay announces.
const unserved = "\x00unserved"

// sync brings the SyncTargets in line with dests; it reports whether
// every write succeeded.
func (inv *inventory) sync(ctx context.Context, dests []session.Destination) bool {
	ok := true
	announced := make(map[string]bool, len(dests))
	for _, d := range dests {
		announced[d.Name] = true
		fp := fingerprint(d)
		if inv.written[d.Name] == fp {
			continue
		}
		if err := inv.upsert(ctx, d); err != nil {
			if ctx.Err() == nil {
				inv.log.Warn("updating a SyncTarget", "destination", d.Name, "error", err)
			}
			ok = false
			continue
		}
		inv.written[d.Name] = fp
	}
	for name := range inv.names {
		if announced[name] || inv.written[name] == unserved {
			continue
		}
		if err := inv.unserved(ctx, name); err != nil {
			if ctx.Err() == nil {
				inv.log.Warn("updating a SyncTarget that no relay announces", "syncTarget", name, "error", err)
			}
			ok = false
			continue
		}
		inv.written[name] = unserved
	}
	for name := range inv.written {
		if !announced[name] && !inv.names[name] {
			delete(inv.written, name)
			delete(inv.live, name)
		}
	}
	return ok
}

// fingerprint is what a SyncTarget shows of a destination: its path,
// connectivity and labels.
func fingerprint(d session.Destination) string {
	keys := make([]string, 0, len(d.Labels))
	for k := range d.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%t", strings.Join(d.Path, "/"), d.Connected)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, d.Labels[k])
	}
	return b.String()
}

// shown is what a SyncTarget's status shows.
type shown struct {
	path      string
	connected bool
	lastSeen  time.Time // zero: never
}

func shownBy(st *unstructured.Unstructured) shown {
	var s shown
	s.path, _, _ = unstructured.NestedString(st.Object, "status", "path")
	s.connected, _, _ = unstructured.NestedBool(st.Object, "status", "connected")
	if v, _, _ := unstructured.NestedString(st.Object, "status", "lastSeen"); v != "" {
		s.lastSeen, _ = time.Parse(time.RFC3339, v)
	}
	return s
}

// status is the status field of s.
func (s shown) status() map[string]any {
	st := map[string]any{"path": s.path, "connected": s.connected}
	if !s.lastSeen.IsZero() {
		st["lastSeen"] = s.lastSeen.UTC().Format(time.RFC3339)
	}
	return st
}

func (s shown) equal(o shown) bool {
	return s.path == o.path && s.connected == o.connected && s.lastSeen.Equal(o.lastSeen)
}

// lastSeen is LAST-SEEN for a SyncTarget that is to show disconnected,
// and showed cur: now if this process showed it connected (it was heard
// from until now), otherwise what it showed or what was announced,
// whichever is later.
func (inv *inventory) lastSeen(name string, cur shown, announced int64) time.Time {
	if cur.connected && inv.live[name] {
		return time.Now().Truncate(time.Second)
	}
	t := cur.lastSeen
	if announced > 0 {
		if a := time.Unix(0, announced).Truncate(time.Second); a.After(t) {
			t = a
		}
	}
	return t
}

// upsert writes one destination's SyncTarget, if it differs: labels from
// the announcement, status from its path and link state. A missing one is
// created only for a connected destination.
func (inv *inventory) upsert(ctx context.Context, d session.Destination) error {
	labels := map[string]string{}
	for k, v := range d.Labels {
		labels[k] = v
	}
	cur, err := inv.targets.Get(ctx, d.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if !d.Connected {
			return nil // retired, or never made: only its edge brings it back
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindSyncTarget,
			"metadata": map[string]any{"name": d.Name},
			"spec":     map[string]any{},
		}}
		obj.SetLabels(labels)
		if cur, err = inv.targets.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
		inv.created[d.Name] = true
	case err != nil:
		return err
	case !equality.Semantic.DeepEqual(cur.GetLabels(), labels) && (len(labels) > 0 || len(cur.GetLabels()) > 0):
		cur.SetLabels(labels)
		if cur, err = inv.targets.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	was := shownBy(cur)
	want := shown{path: strings.Join(append([]string{inv.rootName}, d.Path...), "/"), connected: d.Connected}
	switch {
	case d.Connected && was.connected && was.path == want.path && !was.lastSeen.IsZero():
		want.lastSeen = was.lastSeen // still connected: nothing new
	case d.Connected:
		want.lastSeen = time.Now().Truncate(time.Second) // (re)connected
	default:
		want.lastSeen = inv.lastSeen(d.Name, was, d.LastSeen)
	}
	if err := inv.writeStatus(ctx, cur, was, want); err != nil {
		return err
	}
	if d.Connected {
		inv.live[d.Name] = true
	} else {
		delete(inv.live, d.Name)
	}
	return nil
}

// unserved writes the status of a SyncTarget that no relay announces.
func (inv *inventory) unserved(ctx context.Context, name string) error {
	cur, err := inv.targets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // its deletion is on its way
	}
	if err != nil {
		return err
	}
	was := shownBy(cur)
	want := shown{path: NoPath, lastSeen: inv.lastSeen(name, was, 0)}
	if err := inv.writeStatus(ctx, cur, was, want); err != nil {
		return err
	}
	delete(inv.live, name)
	return nil
}

// writeStatus writes want as cur's status unless it shows that already.
func (inv *inventory) writeStatus(ctx context.Context, cur *unstructured.Unstructured, was, want shown) error {
	if _, has := cur.Object["status"]; has && was.equal(want) {
		return nil
	}
	cur.Object["status"] = want.status()
	_, err := inv.targets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
