package backing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// writeBack is one object of the space to write into the backend as it
// is in the space now: whole (an object Canopy owns), or only its status
// (a user's object whose status Canopy writes).
type writeBack struct {
	key    store.Key
	status bool
}

// classify queues what a write into the space, by anyone but the copy,
// changed: an owned object (written or deleted), or the status of a
// user's object. The copy never changes a status or writes an owned
// object, so whatever else changes those is Canopy's to write back.
func (m *mirror) classify(ev store.Event) {
	if ev.Type == store.Bookmark || m.inventory {
		return
	}
	k := ev.Object.Key
	if owned(k.Resource, ev.Object.Labels) || ev.Prev != nil && owned(k.Resource, ev.Prev.Labels) {
		m.writes.Add(writeBack{key: k})
		return
	}
	if ev.Type != store.Modified || ev.Prev == nil || m.informers[k.Resource] == nil || ownStatus(k.Resource) {
		return
	}
	if !bytes.Equal(statusOf(ev.Prev), statusOf(ev.Object)) {
		m.writes.Add(writeBack{key: k, status: true})
	}
}

// ownStatus reports whether a resource's status is the backend's own even
// in the space's copy: Namespaces and CRDs.
func ownStatus(res store.Resource) bool {
	return res == store.Resource{Resource: "namespaces"} || res == crdResource
}

type statusMemo struct{}

// statusOf is the JSON of o's status (nil when it has none).
func statusOf(o *store.Object) []byte {
	return o.Memo(statusMemo{}, func(o *store.Object) any {
		var v struct {
			Status json.RawMessage `json:"status"`
		}
		_ = json.Unmarshal(o.Data, &v)
		return []byte(v.Status)
	}).([]byte)
}

// writeBackAll queues, at the start of a session, every owned object of
// the space and the status of every EdgePlacement, and deletes from the
// backend the CombinedStatuses and SinglePlacementSlices the space does
// not hold (written by an earlier session, then deleted in the space
// while none ran).
func (m *mirror) writeBackAll(ctx context.Context) {
	if m.inventory {
		return
	}
	list, err := m.cfg.Store.List(store.ListOptions{Space: m.space})
	if err != nil {
		return
	}
	for _, o := range list.Items {
		switch {
		case owned(o.Key.Resource, o.Labels):
			m.writes.Add(writeBack{key: o.Key})
		case o.Key.Resource == store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceEdgePlacements}:
			m.writes.Add(writeBack{key: o.Key, status: true})
		}
	}
	for _, res := range []string{v1alpha1.ResourceCombinedStatuses, v1alpha1.ResourceSinglePlacementSlices} {
		r, ok := m.catalog.get(schema.GroupResource{Group: v1alpha1.GroupName, Resource: res})
		if !ok {
			continue
		}
		l, err := m.dyn.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			m.log.Info("backed space: listing what Canopy wrote", "resource", res, "error", err)
			continue
		}
		for _, it := range l.Items {
			k := store.Key{Space: m.space, Resource: r.res(), Namespace: it.GetNamespace(), Name: it.GetName()}
			if _, err := m.cfg.Store.Get(k); errors.Is(err, store.ErrNotFound) {
				m.writes.Add(writeBack{key: k})
			}
		}
	}
}

// writeBackLoop writes the objects of a session's queue into the backend
// until the queue shuts down, retrying a failed write with backoff.
func (m *mirror) writeBackLoop(ctx context.Context, q workqueue.TypedRateLimitingInterface[writeBack]) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := m.write(ctx, item); err != nil && ctx.Err() == nil {
			m.log.Info("backed space: writing back", "object", item.key, "error", err)
			q.AddRateLimited(item)
		} else {
			q.Forget(item)
		}
		q.Done(item)
	}
}

// write makes the backend's object what the space holds now.
func (m *mirror) write(ctx context.Context, item writeBack) error {
	k := item.key
	gr := schema.GroupResource{Group: k.Resource.Group, Resource: k.Resource.Resource}
	r, ok := m.catalog.get(gr)
	if !ok {
		if err := m.catalog.refresh(m.disco); err != nil {
			return err
		}
		if r, ok = m.catalog.get(gr); !ok {
			return fmt.Errorf("the backend serves no %s", gr)
		}
	}
	cur, err := m.cfg.Store.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		if item.status {
			return nil
		}
		err := m.client(r, k.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(cur.Data); err != nil {
		return err
	}
	if gv, err := schema.ParseGroupVersion(u.GetAPIVersion()); err == nil && gv.Group == r.gvr.Group {
		r.gvr.Version = gv.Version
	}
	client := m.client(r, k.Namespace)
	status, hasStatus := u.Object["status"]
	if !item.status {
		obj := u.DeepCopy()
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink"} {
			unstructured.RemoveNestedField(obj.Object, "metadata", f)
		}
		if r.status {
			delete(obj.Object, "status")
		}
		if k.Resource == combinedStatuses {
			m.translateObserved(obj.Object)
		}
		if err := apply(ctx, client, obj.Object); err != nil || !r.status || !hasStatus {
			return err
		}
	}
	patch := map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": k.Name, "namespace": k.Namespace},
	}
	if hasStatus {
		patch["status"] = status
	}
	if r.status {
		return apply(ctx, client, patch, "status")
	}
	return apply(ctx, client, patch)
}

var combinedStatuses = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceCombinedStatuses}

// translateObserved rewrites a CombinedStatus's observedRevision, the
// revision of the copy its results describe, as the backend's
// resourceVersion of the same content; it leaves the field out when that
// version is not known (the copy changed since).
func (m *mirror) translateObserved(cs map[string]any) {
	rev, _ := cs["observedRevision"].(string)
	ref, _ := cs["object"].(map[string]any)
	if rev == "" || ref == nil {
		return
	}
	str := func(f string) string { v, _ := ref[f].(string); return v }
	k := store.Key{Space: m.space, Resource: store.Resource{Group: str("group"), Resource: str("resource")}, Namespace: str("namespace"), Name: str("name")}
	if rv, ok := m.backendVersion(k, rev); ok {
		cs["observedRevision"] = rv
	} else {
		delete(cs, "observedRevision")
	}
}

func (m *mirror) client(r apiResource, ns string) dynamic.ResourceInterface {
	if r.namespaced {
		return m.dyn.Resource(r.gvr).Namespace(ns)
	}
	return m.dyn.Resource(r.gvr)
}

// apply applies obj with server-side apply as FieldManager, forcing.
func apply(ctx context.Context, c dynamic.ResourceInterface, obj map[string]any, subresource ...string) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	_, err = c.Patch(ctx, name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}, subresource...)
	return err
}
