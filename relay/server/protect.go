package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// What Canopy installs, and what its relay tree owns, cannot be deleted
// from under it through the API (kubeapi.Config.BeforeDelete, here
// beforeDelete):
//
//   - the edge.canopy.dev CRDs the root installs (SyncTarget and Location
//     in the inventory space, the workload CRDs in every workload
//     description space): deleting one would delete every object of its
//     kind in the space, every EdgePlacement and so everything placed.
//     A delete is refused with 403 Forbidden. One that is gone or changed
//     all the same (deleted while the root was down) is installed again
//     at once: the inventory controller (topology/inventory) and
//     maintainWorkloadCRDs watch them;
//   - the SyncTarget of a destination whose edge is connected: the edge
//     announces it and owns it. Deleted, it would come back only when the
//     edge reconnects, and meanwhile the placements would drop the
//     destination and the edge would delete everything it applied. A
//     delete is refused with 403 Forbidden; to retire an edge, stop it,
//     then delete its SyncTarget (the inventory controller creates
//     SyncTargets for connected destinations only, so it stays deleted).
//
// A deletecollection that selects any of them deletes nothing. The server's
// own controllers (a space being deleted, garbage collection) are not
// refused; installCRDs clears ownerReferences from Canopy's CRDs so that
// garbage collection never takes them.

// ManagedByLabel marks the CRDs the root installs and keeps, with the
// value ManagedBy: kubectl get crd -l app.kubernetes.io/managed-by=canopy.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "canopy"
)

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// crdStoreResource is where CRDs are kept in the store.
	crdStoreResource = store.Resource{Group: crdGVR.Group, Resource: crdGVR.Resource}
)

// canopyCRDs returns the resources whose CRDs the root installs in a space
// of kind: the inventory's, or the workload ones in a workload description
// space; none elsewhere.
func canopyCRDs(kind string) []string {
	switch kind {
	case layout.SpaceKindInventory:
		return edgev1alpha1.InventoryResources
	case layout.SpaceKindWDS:
		return edgev1alpha1.WorkloadResources
	}
	return nil
}

// crdKeys returns the store keys of the CRDs of resources in space.
func crdKeys(space string, resources []string) []store.Key {
	keys := make([]store.Key, len(resources))
	for i, res := range resources {
		keys[i] = store.Key{Space: space, Resource: crdStoreResource, Name: edgev1alpha1.CRDName(res)}
	}
	return keys
}

// beforeDelete is kubeapi.Config.BeforeDelete at the root: it refuses to
// delete Canopy's CRDs and the SyncTargets of connected edges.
func (r *Root) beforeDelete(_ context.Context, space string, gr schema.GroupResource, objs []*unstructured.Unstructured) error {
	kind, _ := r.api.SpaceKind(space)
	switch {
	case gr == crdGVR.GroupResource():
		return refuseCanopyCRD(space, kind, objs)
	case gr == edgev1alpha1.Resource(edgev1alpha1.ResourceSyncTargets) && kind == layout.SpaceKindInventory:
		return r.refuseConnectedSyncTarget(objs)
	}
	return nil
}

// refuseCanopyCRD refuses a delete of any CRD that Canopy installs in
// space, of kind.
func refuseCanopyCRD(space, kind string, objs []*unstructured.Unstructured) error {
	protected := map[string]bool{}
	for _, res := range canopyCRDs(kind) {
		protected[edgev1alpha1.CRDName(res)] = true
	}
	for _, o := range objs {
		if !protected[o.GetName()] {
			continue
		}
		crdKind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		if crdKind == "" {
			crdKind = o.GetName()
		}
		where := "every workload description space"
		if kind == layout.SpaceKindInventory {
			where = "the inventory space"
		}
		return apierrors.NewForbidden(crdGVR.GroupResource(), o.GetName(), fmt.Errorf(
			"Canopy installs this CRD in %s and keeps it: deleting it would delete every %s of space %q; delete the objects you no longer want instead",
			where, crdKind, space))
	}
	return nil
}

// refuseConnectedSyncTarget refuses a delete of a SyncTarget whose
// destination's edge is connected, as the route and link records (every
// replica's children) show it.
func (r *Root) refuseConnectedSyncTarget(objs []*unstructured.Unstructured) error {
	fleet, err := session.Fleet(r.store, layout.DownsyncSpace)
	if err != nil {
		return apierrors.NewInternalError(errors.Join(errors.New("server: reading the relay tree's destinations"), err))
	}
	connected := map[string][]string{} // destination → path below the root
	for _, d := range fleet {
		if d.Connected {
			connected[d.Name] = d.Path
		}
	}
	for _, o := range objs {
		path, ok := connected[o.GetName()]
		if !ok {
			continue
		}
		return apierrors.NewForbidden(edgev1alpha1.Resource(edgev1alpha1.ResourceSyncTargets), o.GetName(), fmt.Errorf(
			"its edge relay is connected (path %s) and owns it: while it is, deleting it would make the edge delete everything placed on it; to retire the edge, stop its relay, then delete its SyncTarget",
			strings.Join(append([]string{r.cfg.treeName()}, path...), "/")))
	}
	return nil
}

// beforeDeleteOf is kubeapi.Config.BeforeDelete for the root *r, which
// is built after its kube API.
func beforeDeleteOf(r **Root) func(context.Context, string, schema.GroupResource, []*unstructured.Unstructured) error {
	return func(ctx context.Context, space string, gr schema.GroupResource, objs []*unstructured.Unstructured) error {
		return (*r).beforeDelete(ctx, space, gr, objs)
	}
}
