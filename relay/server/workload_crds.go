package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/customize"
	"github.com/canopy-dev/canopy/topology/status"
)

// The root serves the edge.canopy.dev API as ordinary CRDs, installed
// through its own kube API as the admin, like any client would:
//
//   - the inventory space gets edgev1alpha1.InventoryCRDs (SyncTarget,
//     Location), from the inventory controller (inventoryController);
//   - every workload description space (kind wds) gets
//     edgev1alpha1.WorkloadCRDs (EdgePlacement, SinglePlacementSlice,
//     Customizer, StatusCollector, CombinedStatus), from maintainWorkloadCRDs: the default space at start
//     and any WDS created later. Mailbox spaces and the inventory never
//     get them.
//
// An install creates each CRD, or updates it when the stored definition
// differs from the one compiled in (an upgrade), so a restart with a newer
// binary serves the newer schema. Each is labelled ManagedByLabel=ManagedBy;
// they cannot be deleted through the API, and one deleted or changed all
// the same is installed again at once (protect.go).

// startupCRDs records which installs /readyz waits for: the inventory's
// CRDs and the default space's workload CRDs. Safe for concurrent use.
type startupCRDs struct {
	inventory, workload atomic.Bool
}

// ready is nil once both installs are done.
func (s *startupCRDs) ready() error {
	switch {
	case !s.inventory.Load():
		return errors.New("inventory CRDs not installed")
	case !s.workload.Load():
		return errors.New("workload CRDs not installed in the default space")
	}
	return nil
}

// spaceClient is a dynamic client for one space of the root's own API,
// as the admin.
func (r *Root) spaceClient(space string) (dynamic.Interface, error) {
	return dynamic.NewForConfig(&rest.Config{
		Host:            r.server + "/spaces/" + space,
		BearerToken:     r.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: r.ca.CertPEM},
		QPS:             -1,
	})
}

// InstallWorkloadCRDs installs the edge.canopy.dev workload CRDs
// (EdgePlacement, SinglePlacementSlice, Customizer, StatusCollector,
// CombinedStatus) in space, which must be
// a workload description space. It is idempotent. The root calls it for
// every WDS on its own; it is exported for tools and tests that want a new
// space served at once.
func (r *Root) InstallWorkloadCRDs(ctx context.Context, space string) error {
	kind, ok := r.api.SpaceKind(space)
	switch {
	case !ok:
		return fmt.Errorf("server: no space %q", space)
	case kind != layout.SpaceKindWDS:
		return fmt.Errorf("server: space %q is a %s space, not a workload description space", space, kind)
	}
	manifests, err := edgev1alpha1.WorkloadCRDs()
	if err != nil {
		return err
	}
	dc, err := r.spaceClient(space)
	if err != nil {
		return err
	}
	return installCRDs(ctx, dc, manifests)
}

// installCRDs creates each CRD of manifests, labelled ManagedByLabel, or
// updates it when its stored spec, labels or annotations differ from the
// manifest's or it has ownerReferences (which garbage collection would
// follow to delete it).
func installCRDs(ctx context.Context, dc dynamic.Interface, manifests [][]byte) error {
	crds := dc.Resource(crdGVR)
	for _, m := range manifests {
		var want unstructured.Unstructured
		if err := yaml.Unmarshal(m, &want.Object); err != nil {
			return err
		}
		labels := want.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ManagedByLabel] = ManagedBy
		want.SetLabels(labels)
		_, err := crds.Create(ctx, &want, metav1.CreateOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("server: installing CRD %s: %w", want.GetName(), err)
		}
		// Someone may be writing it too (a user whose change is undone
		// here): read it again on a conflict.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := crds.Get(ctx, want.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("server: reading CRD %s: %w", want.GetName(), err)
			}
			same, err := sameCRD(&want, cur)
			if err != nil || same {
				return err
			}
			cur.Object["spec"] = want.Object["spec"]
			cur.SetLabels(want.GetLabels())
			cur.SetAnnotations(want.GetAnnotations())
			cur.SetOwnerReferences(nil)
			_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("server: updating CRD %s: %w", want.GetName(), err)
		}
	}
	return nil
}

// sameCRD compares a manifest with a stored CRD after the defaulting the
// server applied to the stored one; a stored CRD with ownerReferences
// differs.
func sameCRD(want, cur *unstructured.Unstructured) (bool, error) {
	var w, c apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(want.Object, &w); err != nil {
		return false, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &c); err != nil {
		return false, err
	}
	crd.Default(&w)
	crd.Default(&c)
	return len(c.OwnerReferences) == 0 &&
		equality.Semantic.DeepEqual(w.Spec, c.Spec) &&
		equality.Semantic.DeepEqual(w.Labels, c.Labels) &&
		equality.Semantic.DeepEqual(w.Annotations, c.Annotations), nil
}

// workloadSpaces lists the workload description spaces of the root's own
// store, but those being deleted, and the revision of the listing. (A
// backed space gets the CRDs in its backend from relay/backing.)
func (r *Root) workloadSpaces() ([]string, int64, error) {
	list, err := r.store.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return nil, 0, err
	}
	var out []string
	for _, it := range list.Items {
		if info := layout.ReadSpace(it); info.Kind == layout.SpaceKindWDS && !info.Deleting && !info.Backed() {
			out = append(out, it.Key.Name)
		}
	}
	return out, list.Revision, nil
}

// maintainWorkloadCRDs installs the workload CRDs in every workload
// description space, the default one first at start and then each one
// as it appears, and again in a space where one of them is deleted or
// changed, until ctx is done. A failed install is logged and retried with
// backoff; /readyz fails until the default space is served.
func (r *Root) maintainWorkloadCRDs(ctx context.Context) error {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 30 * time.Second
	backoff := minBackoff
	installed := map[string]bool{}
	for ctx.Err() == nil {
		spaces, rev, err := r.workloadSpaces()
		failed := err != nil
		present := map[string]bool{}
		for _, sp := range spaces {
			present[sp] = true
			if installed[sp] {
				continue
			}
			if err := r.InstallWorkloadCRDs(ctx, sp); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("installing the workload CRDs", "space", sp, "error", err)
				}
				failed = true
				continue
			}
			installed[sp] = true
			if sp == layout.DefaultSpace {
				r.crds.workload.Store(true)
			}
		}
		for sp := range installed {
			if !present[sp] { // deleted: install again if it comes back
				delete(installed, sp)
			}
		}
		if !failed {
			backoff = minBackoff
			stale, err := r.waitSpaceChange(ctx, rev, spaces)
			for sp := range stale {
				delete(installed, sp)
			}
			failed = err != nil
		}
		if failed {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
	return nil
}

// waitSpaceChange returns when, after revision rev, a space is created or
// deleted, or one of the workload CRDs of spaces is deleted or changed
// (its space is returned, to be installed again), or ctx is done.
func (r *Root) waitSpaceChange(ctx context.Context, rev int64, spaces []string) (map[string]bool, error) {
	var keys []store.Key
	for _, sp := range spaces {
		keys = append(keys, crdKeys(sp, edgev1alpha1.WorkloadResources)...)
	}
	w, err := r.store.Watch(ctx, store.WatchOptions{Resource: layout.SpaceResource, Since: rev, Also: keys})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	for ev := range w.Events() {
		if ev.Object.Key.Resource == crdStoreResource {
			if crdTouched(ev) {
				return map[string]bool{ev.Object.Key.Space: true}, nil
			}
			continue
		}
		if ev.Type == store.Added || ev.Type == store.Deleted {
			return nil, nil
		}
		if _, deleting := layout.SpaceOf(ev.Object); deleting {
			return nil, nil
		}
	}
	return nil, w.Err()
}

// crdTouched reports whether ev deletes a CRD or changes what installCRDs
// keeps of it (anything but its status and revision).
func crdTouched(ev store.Event) bool {
	switch ev.Type {
	case store.Deleted:
		return true
	case store.Modified:
		if ev.Prev == nil {
			return true
		}
		var prev, cur map[string]any
		if json.Unmarshal(ev.Prev.Data, &prev) != nil || json.Unmarshal(ev.Object.Data, &cur) != nil {
			return true
		}
		for _, m := range []map[string]any{prev, cur} {
			delete(m, "status")
			if md, ok := m["metadata"].(map[string]any); ok {
				delete(md, "resourceVersion")
				delete(md, "managedFields")
			}
		}
		return !equality.Semantic.DeepEqual(prev, cur)
	}
	return false
}

// validateEdgeKinds is kubeapi.Config.Validate at the root, for every
// space (the inventory included): what the CRD schemas of edge.canopy.dev
// cannot check, so that a bad object is a 422 naming its field rather than
// a failure at every edge or a placement that silently selects nothing:
//
//   - a StatusCollector's CEL expressions, compiled and type-checked;
//   - the label selectors of an EdgePlacement and a Location's
//     instanceSelector, as kube checks label selectors, and an
//     EdgePlacement's upsync name patterns;
//   - a Customizer's replacements, as far as they do not depend on the
//     destination (customize.Validate);
//   - a View's selector and partition label, and that the space serves
//     its resource (served; nil: not checked).
func validateEdgeKinds(space string, gr schema.GroupResource, obj *unstructured.Unstructured, served func(string, schema.GroupVersionResource) bool) field.ErrorList {
	switch gr {
	case edgev1alpha1.Resource(edgev1alpha1.ResourceViews):
		var in func(schema.GroupVersionResource) bool
		if served != nil {
			in = func(gvr schema.GroupVersionResource) bool { return served(space, gvr) }
		}
		return validateView(obj, in)
	case edgev1alpha1.Resource("statuscollectors"):
		return status.Validate(obj)
	case edgev1alpha1.Resource(edgev1alpha1.ResourceEdgePlacements):
		return validateEdgePlacement(obj)
	case edgev1alpha1.Resource(edgev1alpha1.ResourceLocations):
		return validateLocation(obj)
	case edgev1alpha1.Resource(edgev1alpha1.ResourceCustomizers):
		return customize.Validate(obj)
	}
	return nil
}
