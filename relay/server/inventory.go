package server

import (
	"context"
	"errors"
	"fmt"
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
)

// maintainInventory installs the inventory CRDs (SyncTarget, Location:
// edgev1alpha1.InventoryCRDs) in the inventory space and keeps one
// SyncTarget per announced destination, rewriting only those whose
// announced state changed, until ctx is done. It writes through the root's
// own kube API as the admin, like any client.
// inventoryRetry is how soon SyncTarget writes that failed are tried
// again. A variable for tests.
var inventoryRetry = time.Second

func (r *Root) maintainInventory(ctx context.Context) error {
	dc, err := r.spaceClient(kubeapi.InventorySpace)
	if err != nil {
		return err
	}
	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, dc, manifests); err != nil {
		return fmt.Errorf("server: installing the inventory CRDs: %w", err)
	}
	r.crds.inventory.Store(true)
	targets := dc.Resource(syncTargetGVR)
	// written remembers what each SyncTarget was last written with, so a
	// change in the subtree costs writes only for the destinations it
	// touched, not for the whole fleet.
	written := map[string]string{}
	changed, err := r.watchFleet(ctx)
	if err != nil {
		return err
	}
	for {
		// Every replica's children, from the replicated route and link
		// records: the leader may not be the replica a child dialed.
		dests, err := session.Fleet(r.store, DownsyncSpace)
		if err != nil {
			return err
		}
		var retry <-chan time.Time // set when a write failed: no change may come to retry it
		for _, d := range dests {
			fp := fingerprint(d)
			if written[d.Name] == fp {
				continue
			}
			if err := upsertSyncTarget(ctx, targets, r.cfg.treeName(), d); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("updating a SyncTarget", "destination", d.Name, "error", err)
				}
				retry = time.After(inventoryRetry)
				continue
			}
			written[d.Name] = fp
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
		case _, ok := <-changed:
			if !ok {
				return errors.New("server: the watch of route and link records ended")
			}
		}
	}
}

// watchFleet signals (coalesced) every change of a route or link record,
// until ctx is done; the channel is closed if a watch ends early.
func (r *Root) watchFleet(ctx context.Context) (<-chan struct{}, error) {
	out := make(chan struct{}, 1)
	var ws []store.Watcher
	for _, res := range []store.Resource{tree.RouteResource, session.LinkResource} {
		w, err := r.store.Watch(ctx, store.WatchOptions{Resource: res, Since: r.store.Revision()})
		if err != nil {
			for _, w := range ws {
				w.Stop()
			}
			return nil, err
		}
		ws = append(ws, w)
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			defer w.Stop()
			for range w.Events() {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		})
	}
	go func() { wg.Wait(); close(out) }()
	return out, nil
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

// upsertSyncTarget writes one destination's SyncTarget: labels from the
// announcement, status from its path and link state. lastSeen is when the
// root learned the state it shows: for a connected destination, when it
// (re)connected or changed.
func upsertSyncTarget(ctx context.Context, c dynamic.NamespaceableResourceInterface, rootName string, d wire.Destination) error {
	status := map[string]any{
		"path":      strings.Join(append([]string{rootName}, d.Path...), "/"),
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
	cur, err := c.Get(ctx, d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindSyncTarget,
			"metadata": map[string]any{"name": d.Name, "labels": labels},
			"spec":     map[string]any{},
		}}
		if cur, err = c.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		cur.Object["metadata"].(map[string]any)["labels"] = labels
		if cur, err = c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cur.Object["status"] = status
	_, err = c.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
