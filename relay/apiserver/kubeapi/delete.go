package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/store"
)

// Finalizers the server itself understands.
const (
	finalizerForeground = metav1.FinalizerDeleteDependents
	finalizerOrphan     = metav1.FinalizerOrphanDependents
)

// deleteOptions reads DeleteOptions from the body (if any) and the query.
func (rq *request) deleteOptions() (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if rq.r.Body != nil && rq.r.ContentLength != 0 {
		body, err := rq.readBody()
		if err != nil {
			return opts, err
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &opts); err != nil {
				return opts, apierrors.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
			}
		}
	}
	q := rq.r.URL.Query()
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, apierrors.NewBadRequest("invalid gracePeriodSeconds: " + v)
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := v == "true"
		opts.OrphanDependents = &b
	}
	opts.DryRun = append(opts.DryRun, q["dryRun"]...)
	if errs := metav1validation.ValidateDeleteOptions(&opts); len(errs) > 0 {
		return opts, rq.invalidOptions(errs)
	}
	return opts, nil
}

func (s *Server) serveDelete(rq *request, sv *served) {
	opts, err := rq.deleteOptions()
	if err != nil {
		rq.writeError(err)
		return
	}
	if err := s.beforeDeleteKey(rq, sv, rq.key(sv, rq.info.Name)); err != nil {
		rq.writeError(err)
		return
	}
	data, deleted, err := s.deleteObject(rq.r.Context(), rq.sp, sv, rq.key(sv, rq.info.Name), opts)
	if err != nil {
		rq.writeError(err)
		return
	}
	if !deleted {
		// Deletion is pending on finalizers: the object is returned with
		// its deletionTimestamp. kube answers 202 only when the client set
		// orphanDependents=false, 200 otherwise.
		code := http.StatusOK
		if o := opts.OrphanDependents; o != nil && !*o {
			code = http.StatusAccepted
		}
		rq.writeObject(sv, code, data)
		return
	}
	// Like kube's registries: pods and namespaces answer with the deleted
	// object, every other kind (custom resources included) with a Status.
	if sv.resource == "pods" || sv.resource == "namespaces" {
		rq.writeObject(sv, http.StatusOK, data)
		return
	}
	u, _ := parseObject(data)
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: rq.info.Name, Group: sv.group, Kind: sv.resource},
	}
	if u != nil {
		st.Details.UID = types.UID(u.GetUID())
	}
	rq.writeTyped(http.StatusOK, &st)
}

// deleteObject deletes one object with kube's semantics: preconditions,
// finalizers (an object with finalizers gets a deletionTimestamp and stays
// until they are removed), and the propagation policy (Foreground and Orphan
// add their finalizers, which the garbage collector then honours).
// It returns the object's last JSON and whether it is gone.
func (s *Server) deleteObject(ctx context.Context, sp store.Space, sv *served, key store.Key, opts metav1.DeleteOptions) ([]byte, bool, error) {
	dry := len(opts.DryRun) > 0
	synced := false // confirmed
	for attempt := 0; ; attempt++ {
		curObj, cur, err := getObject(sp, key)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) && s.confirmed(ctx, sp, &synced) {
				continue
			}
			return nil, false, storeError(err, sv.gr(), key.Name)
		}
		if err := preconditionsFailed(opts.Preconditions, sv, key.Name, cur); err != nil {
			if s.confirmed(ctx, sp, &synced) {
				continue
			}
			return nil, false, err
		}
		finalizers := cur.GetFinalizers()
		policy := propagation(opts)
		switch policy {
		case metav1.DeletePropagationForeground:
			finalizers = addFinalizer(removeFinalizer(finalizers, finalizerOrphan), finalizerForeground)
		case metav1.DeletePropagationOrphan:
			finalizers = addFinalizer(removeFinalizer(finalizers, finalizerForeground), finalizerOrphan)
		}
		pending := len(finalizers) > 0 || hasSpecFinalizers(cur)
		if !pending {
			if dry {
				return curObj.Data, true, nil
			}
			_, err := sp.Txn(ctx, store.Op{Type: store.OpDelete, Key: key, ExpectRevision: curObj.Revision})
			if errors.Is(err, store.ErrConflict) && attempt < maxConflictRetries {
				continue
			}
			if err != nil {
				return nil, false, storeError(err, sv.gr(), key.Name)
			}
			return curObj.Data, true, nil
		}
		next := cur.DeepCopy()
		next.SetFinalizers(finalizers)
		if next.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(time.Now())
			next.SetDeletionTimestamp(&now)
			if sv.gr() == (schema.GroupResource{Resource: "namespaces"}) {
				// kube's namespace registry sets no grace period.
				_ = unstructured.SetNestedField(next.Object, "Terminating", "status", "phase")
			} else {
				zero := int64(0)
				next.SetDeletionGracePeriodSeconds(&zero)
			}
		}
		if sameObject(next, cur) {
			return curObj.Data, false, nil
		}
		data, err := json.Marshal(next.Object)
		if err != nil {
			return nil, false, err
		}
		if dry {
			return data, false, nil
		}
		res, err := sp.Txn(ctx, store.Op{Type: store.OpUpdate, Key: key, Data: data, ExpectRevision: curObj.Revision})
		if errors.Is(err, store.ErrConflict) && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			return nil, false, storeError(err, sv.gr(), key.Name)
		}
		return res.Objects[0].Data, false, nil
	}
}

func propagation(opts metav1.DeleteOptions) metav1.DeletionPropagation {
	if opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy
	}
	if opts.OrphanDependents != nil {
		if *opts.OrphanDependents {
			return metav1.DeletePropagationOrphan
		}
		return metav1.DeletePropagationBackground
	}
	return metav1.DeletePropagationBackground
}

func addFinalizer(fs []string, f string) []string {
	for _, x := range fs {
		if x == f {
			return fs
		}
	}
	return append(append([]string(nil), fs...), f)
}

func removeFinalizer(fs []string, f string) []string {
	var out []string
	for _, x := range fs {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}

func (s *Server) serveDeleteCollection(rq *request, sv *served) {
	opts, err := rq.deleteOptions()
	if err != nil {
		rq.writeError(err)
		return
	}
	lo, err := rq.listOptions(sv)
	if err != nil {
		rq.writeError(err)
		return
	}
	lo.Limit, lo.After = 0, ""
	list, err := rq.sp.List(lo)
	if err != nil {
		rq.writeError(storeError(err, sv.gr(), ""))
		return
	}
	if err := s.beforeDelete(rq, sv, list.Items); err != nil {
		rq.writeError(err)
		return
	}
	items := make([][]byte, 0, len(list.Items))
	for _, obj := range list.Items {
		data, _, err := s.deleteObject(rq.r.Context(), rq.sp, sv, obj.Key, opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			rq.writeError(err)
			return
		}
		items = append(items, data)
	}
	if form, proto := rq.negotiate(sv); proto && form == formObject {
		b, err := protoListOf(sv, list.Revision, items)
		if err != nil {
			rq.writeError(err)
			return
		}
		writeRaw(rq.w, http.StatusOK, contentTypeProtobuf, b)
		return
	}
	serveJSONList(rq.w, sv, list.Revision, "", nil, items)
}

// beforeDeleteKey asks Config.BeforeDelete about the object at key, if
// there is one (read after the leader's commit index on a replica, as
// deleteObject reads it): a missing one is deleteObject's 404.
func (s *Server) beforeDeleteKey(rq *request, sv *served, key store.Key) error {
	if s.cfg.BeforeDelete == nil {
		return nil
	}
	obj, err := rq.sp.Get(key)
	if errors.Is(err, store.ErrNotFound) && s.onLog(rq.sp) {
		if err := s.readIndex(rq.r.Context(), rq.sp); err != nil {
			return err
		}
		obj, err = rq.sp.Get(key)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return storeError(err, sv.gr(), key.Name)
	}
	return s.beforeDelete(rq, sv, []*store.Object{obj})
}

// beforeDelete asks Config.BeforeDelete whether objs, which the request
// would delete, may go.
func (s *Server) beforeDelete(rq *request, sv *served, objs []*store.Object) error {
	if s.cfg.BeforeDelete == nil || len(objs) == 0 {
		return nil
	}
	us := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		u, err := parseObject(o.Data)
		if err != nil {
			return err
		}
		us[i] = u
	}
	return s.cfg.BeforeDelete(rq.r.Context(), rq.space, sv.gr(), us)
}

// preconditionsFailed is kube's rest.BeforeDelete check of a delete's
// preconditions against the current object: a 409 naming the kind, or nil.
func preconditionsFailed(p *metav1.Preconditions, sv *served, name string, cur *unstructured.Unstructured) error {
	if p == nil {
		return nil
	}
	kind := schema.GroupResource{Group: sv.group, Resource: sv.kind}
	if p.UID != nil && *p.UID != cur.GetUID() {
		return apierrors.NewConflict(kind, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, cur.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(kind, name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, cur.GetResourceVersion()))
	}
	return nil
}
