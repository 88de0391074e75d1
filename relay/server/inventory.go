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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/internal/wire"
	"github.com/canopy-dev/canopy/relay/kubeapi"
	"github.com/canopy-dev/canopy/relay/session"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/tree"
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
//     root and CONNECTED True.
//   - A disconnected one keeps its SyncTarget, if it has one, with
//     CONNECTED False. Its SyncTarget is not created again once deleted,
//     so an edge is retired by stopping it and then deleting its
//     SyncTarget.
func (r *Root) maintainInventory(ctx context.Context) error {
	dc, err := r.spaceClient(kubeapi.InventorySpace)
	if err != nil {
		return err
	}
	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		return err
	}
	// The watches start first: whatever changes after them is seen.
	changes, err := r.watchInventory(ctx)
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, dc, manifests); err != nil {
		return fmt.Errorf("server: installing the inventory CRDs: %w", err)
	}
	r.crds.inventory.Store(true)
	inv := &inventory{targets: dc.Resource(syncTargetGVR), rootName: r.cfg.treeName(), log: r.log, written: map[string]string{}}
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
		for name := range targets {
			// A deleted SyncTarget is looked at again: one of a connected
			// destination comes back at once.
			delete(inv.written, name)
		}
		// Every replica's children, from the replicated route and link
		// records: the leader may not be the replica a child dialed.
		dests, err := session.Fleet(r.store, DownsyncSpace)
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
	targets map[string]bool // SyncTargets deleted
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

// watchInventory watches the route and link records (the fleet), the
// SyncTargets and the inventory CRDs, until ctx is done.
func (r *Root) watchInventory(ctx context.Context) (*inventoryChanges, error) {
	canopy := map[string]bool{}
	for _, k := range crdKeys(kubeapi.InventorySpace, edgev1alpha1.InventoryResources) {
		canopy[k.Name] = true
	}
	c := &inventoryChanges{wake: make(chan struct{}, 1)}
	since := r.store.Revision()
	watches := []struct {
		opts  store.WatchOptions
		event func(store.Event)
	}{
		{store.WatchOptions{Resource: tree.RouteResource}, func(store.Event) {}},
		{store.WatchOptions{Resource: session.LinkResource}, func(store.Event) {}},
		{store.WatchOptions{Space: kubeapi.InventorySpace, Resource: syncTargetResource}, func(ev store.Event) {
			if ev.Type == store.Deleted {
				if c.targets == nil {
					c.targets = map[string]bool{}
				}
				c.targets[ev.Object.Key.Name] = true
			}
		}},
		{store.WatchOptions{Space: kubeapi.InventorySpace, Resource: crdStoreResource}, func(ev store.Event) {
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
			return nil, err
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
	return c, nil
}

// inventory is the state of maintainInventory's passes. Not safe for
// concurrent use.
type inventory struct {
	targets  dynamic.NamespaceableResourceInterface
	rootName string
	log      *slog.Logger
	// written remembers, by name, the fingerprint of what was last
	// written for each SyncTarget.
	written map[string]string
}

// sync brings the SyncTargets in line with dests; it reports whether
// every write succeeded.
func (inv *inventory) sync(ctx context.Context, dests []wire.Destination) bool {
	ok := true
	for _, d := range dests {
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
	return ok
}

// fingerprint is what a SyncTarget shows of a destination: its path,
// connectivity and labels.
func fingerprint(d wire.Destination) string {
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

// upsert writes one destination's SyncTarget: labels from the
// announcement, status from its path and link state. lastSeen is when the
// root learned the state it shows: for a connected destination, when it
// (re)connected or changed. A missing one is created only for a connected
// destination.
func (inv *inventory) upsert(ctx context.Context, d wire.Destination) error {
	status := map[string]any{
		"path":      strings.Join(append([]string{inv.rootName}, d.Path...), "/"),
		"connected": d.Connected,
	}
	if d.Connected {
		status["lastSeen"] = time.Now().UTC().Format(time.RFC3339)
	} else if d.LastSeen > 0 {
		status["lastSeen"] = time.Unix(0, d.LastSeen).UTC().Format(time.RFC3339)
	}
	labels := map[string]any{}
	for k, v := range d.Labels {
		labels[k] = v
	}
	cur, err := inv.targets.Get(ctx, d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if !d.Connected {
			return nil // retired, or never made: only its edge brings it back
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindSyncTarget,
			"metadata": map[string]any{"name": d.Name, "labels": labels},
			"spec":     map[string]any{},
		}}
		if cur, err = inv.targets.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		cur.Object["metadata"].(map[string]any)["labels"] = labels
		if cur, err = inv.targets.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cur.Object["status"] = status
	_, err = inv.targets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
