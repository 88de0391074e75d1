package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// maxConflictRetries bounds read-modify-write retries of unpinned writes.
const maxConflictRetries = 20

func (s *Server) serveResource(rq *request) {
	info := rq.info
	sv, ok := s.lookup(rq, info.APIGroup, info.APIVersion, info.Resource)
	if !ok {
		rq.writeError(errNoResource())
		return
	}
	if rq.metricResource == "" {
		rq.metricResource = sv.resource
	}
	// RequestInfo reports /api/v1/namespaces/NAME with Namespace=NAME (as
	// kube's authorization expects); for every other cluster-scoped
	// resource a namespace in the path is an unknown URL.
	if info.Namespace != "" && !sv.namespaced && sv.gr() != namespacesGR {
		rq.writeError(errNoResource())
		return
	}
	if h, ok := virtualResources[sv.gr()]; ok {
		h(s, rq, sv)
		return
	}
	if s.isConnect(sv, info.Subresource) {
		s.serveConnect(rq, sv)
		return
	}
	switch info.Subresource {
	case "", "status":
		if info.Subresource == "status" && !sv.status {
			rq.writeError(errNoResource())
			return
		}
	case "scale":
		if sv.scale == nil {
			rq.writeError(errNoResource())
			return
		}
		s.serveScale(rq, sv)
		return
	case "token":
		if sv.gr() == (schema.GroupResource{Resource: "serviceaccounts"}) && info.Verb == "create" {
			s.serveTokenRequest(rq, sv)
			return
		}
		rq.writeError(errNoResource())
		return
	default:
		rq.writeError(errNoResource())
		return
	}
	if sv.namespaced && info.Namespace == "" && (info.Verb == "create" || info.Name != "") {
		// A namespaced object must be addressed inside its namespace.
		rq.writeError(apierrors.NewMethodNotSupported(sv.gr(), info.Verb))
		return
	}
	if isSpaces(sv) {
		switch info.Verb {
		case "delete":
			s.serveSpaceDelete(rq, sv)
			return
		case "deletecollection":
			rq.writeError(apierrors.NewMethodNotSupported(sv.gr(), info.Verb))
			return
		}
	}
	switch info.Verb {
	case "get":
		s.serveGet(rq, sv)
	case "list":
		s.serveList(rq, sv)
	case "watch":
		s.serveWatch(rq, sv)
	case "create":
		s.serveCreate(rq, sv)
	case "update":
		s.serveUpdate(rq, sv)
	case "patch":
		s.servePatch(rq, sv)
	case "delete":
		s.serveDelete(rq, sv)
	case "deletecollection":
		s.serveDeleteCollection(rq, sv)
	default:
		rq.writeError(apierrors.NewMethodNotSupported(sv.gr(), info.Verb))
	}
}

func (rq *request) key(sv *served, name string) store.Key {
	ns := ""
	if sv.namespaced {
		ns = rq.info.Namespace
	}
	return store.Key{Space: rq.data, Resource: sv.storeResource(), Namespace: ns, Name: name}
}

func (s *Server) serveGet(rq *request, sv *served) {
	if err := s.waitForResourceVersion(rq.r.Context(), rq); err != nil {
		rq.writeError(err)
		return
	}
	obj, err := rq.sp.Get(rq.key(sv, rq.info.Name))
	if err != nil {
		rq.writeError(storeError(err, sv.gr(), rq.info.Name))
		return
	}
	rq.writeStored(sv, obj)
}

// writeObject answers with one object, as JSON, protobuf, Table or
// PartialObjectMetadata depending on Accept.
func (rq *request) writeObject(sv *served, code int, data []byte) {
	form, proto := rq.negotiate(sv)
	switch {
	case form == formTable:
		u, err := parseObject(data)
		if err != nil {
			rq.writeError(err)
			return
		}
		t := rq.srv.table(rq, sv, []*unstructured.Unstructured{u}, true)
		t.ResourceVersion = u.GetResourceVersion()
		writeJSON(rq, code, t)
	case form == formPartial:
		u, err := parseObject(data)
		if err != nil {
			rq.writeError(err)
			return
		}
		writeJSON(rq, code, partialMeta(u))
	case proto:
		rq.writeProtoObject(sv, code, data)
	default:
		writeRaw(rq.w, code, "application/json", data)
	}
}

func (s *Server) serveCreate(rq *request, sv *served) {
	obj, err := rq.readObject(sv)
	if err != nil {
		rq.writeError(err)
		return
	}
	data, err := s.createObject(rq, sv, obj)
	if err != nil {
		rq.writeError(err)
		return
	}
	rq.writeObject(sv, http.StatusCreated, data)
}

// createObject creates obj (decoded from a create's body, or what a
// server-side apply made of a missing object) and returns the JSON stored,
// or that would be for a dry run.
func (s *Server) createObject(rq *request, sv *served, obj *unstructured.Unstructured) ([]byte, error) {
	if sv.crd != nil {
		if cc := s.catalog.crd(rq.space, sv.resource+"."+sv.group); cc != nil && crdTerminating(cc.obj) {
			return nil, apierrors.NewMethodNotSupported(sv.gr(), "create")
		}
	}
	if sv.namespaced {
		switch ns := obj.GetNamespace(); {
		case ns == "":
			obj.SetNamespace(rq.info.Namespace)
		case ns != rq.info.Namespace:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		obj.SetNamespace("")
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		errs := field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")}
		return nil, apierrors.NewInvalid(sv.gvk().GroupKind(), "", errs)
	}
	dry, err := rq.dryRun()
	if err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		// Named before anything checks it, as kube's store does.
		obj.SetName(obj.GetGenerateName() + utilrand.String(5))
	}
	if obj, err = normalize(rq, sv, obj, nil); err != nil {
		return nil, err
	}
	if obj, err = s.recordFields(rq, sv, nil, obj); err != nil {
		return nil, err
	}
	if err := prepareCreate(sv, obj, time.Now()); err != nil {
		return nil, err
	}
	if err := s.admitCreate(rq, sv, obj); err != nil {
		return nil, err
	}
	if err := s.admitRBAC(rq, sv, obj, nil); err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	if dry {
		// As kube's dry-run storage: the name must be free.
		if _, err := rq.sp.Get(rq.key(sv, obj.GetName())); err == nil {
			return nil, apierrors.NewAlreadyExists(sv.gr(), obj.GetName())
		}
		return data, nil
	}
	ops := []store.Op{{Type: store.OpCreate, Key: rq.key(sv, obj.GetName()), Data: data}}
	txn := rq.sp.Txn
	if isSpaces(sv) {
		// The record and the new space's objects, at once.
		more, err := spaceCreateOps(obj)
		if err != nil {
			return nil, err
		}
		ops, txn = append(ops, more...), s.store.Txn
	} else if check, ok := s.spaceCheck(rq); ok {
		ops = append(ops, check)
	}
	for {
		res, err := txn(rq.r.Context(), ops...)
		if last := len(ops) - 1; failedOp(err) == last && ops[last].Type == store.OpCheck {
			// The space's record changed since the request read it.
			rec, err := s.lookupSpace(rq.space)
			if err != nil {
				return nil, err
			}
			if _, deleting := layout.SpaceOf(rec); deleting {
				return nil, terminatingSpace(rq.space)
			}
			ops[last].ExpectRevision = rec.Revision
			continue
		}
		if err != nil {
			return nil, storeError(err, sv.gr(), obj.GetName())
		}
		rq.stored = res.Objects[0]
		return rq.stored.Data, nil
	}
}

// spaceCheck is the op that makes a create in rq's space conditional on
// the space's record as the request found it, so that a space whose
// deletion begins meanwhile (deleteSpace marks the record, then empties
// the space) takes nothing more. ok is false for a space that cannot be
// deleted (built in) or whose objects are not in s's store (backed), and
// while a replica of the store does not read the check (Config.CanCheck:
// an upgrade under way), when the create goes unchecked.
func (s *Server) spaceCheck(rq *request) (op store.Op, ok bool) {
	if rq.record == nil || layout.BuiltinSpace(rq.space) || store.StoreOf(rq.sp) != s.store {
		return store.Op{}, false
	}
	if s.cfg.CanCheck != nil && !s.cfg.CanCheck() {
		return store.Op{}, false
	}
	return store.Op{Type: store.OpCheck, Key: rq.record.Key, ExpectRevision: rq.record.Revision}, true
}

// failedOp is the index of the op that failed a Txn with err, -1 when
// err names none.
func failedOp(err error) int {
	var oe *store.OpError
	if errors.As(err, &oe) {
		return oe.Index
	}
	return -1
}

// admitCreate enforces the namespace lifecycle: objects go only into
// namespaces that exist and are not terminating. It also checks kind-specific
// rules (CRDs).
func (s *Server) admitCreate(rq *request, sv *served, obj *unstructured.Unstructured) error {
	if sv.namespaced {
		_, ns, err := getObject(rq.sp, nsKey(rq.data, obj.GetNamespace()))
		if errors.Is(err, store.ErrNotFound) {
			return apierrors.NewNotFound(namespacesGR, obj.GetNamespace())
		}
		if err != nil {
			return err
		}
		if ns.GetDeletionTimestamp() != nil {
			return &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: fmt.Sprintf("%s %q is forbidden: unable to create new content in namespace %s because it is being terminated", sv.gr().String(), obj.GetName(), obj.GetNamespace()),
				Details: &metav1.StatusDetails{Name: obj.GetName(), Group: sv.group, Kind: sv.resource,
					Causes: []metav1.StatusCause{{Type: "NamespaceTerminating", Message: fmt.Sprintf("namespace %s is being terminated", obj.GetNamespace()), Field: "metadata.namespace"}}},
			}}
		}
	}
	switch {
	case sv.gr() == crdGR:
		return s.admitCRD(rq, obj, nil)
	case isSpaces(sv):
		return s.admitSpace(sv, obj)
	}
	return s.admitExtra(rq, sv, obj)
}

// admitExtra runs Config.Validate, if any, on an object about to be
// created or updated: a 422 naming the fields it refuses.
func (s *Server) admitExtra(rq *request, sv *served, obj *unstructured.Unstructured) error {
	if s.cfg.Validate == nil {
		return nil
	}
	if errs := s.cfg.Validate(rq.space, sv.gr(), obj); len(errs) > 0 {
		return apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
	}
	return nil
}

func (s *Server) serveUpdate(rq *request, sv *served) {
	obj, err := rq.readObject(sv)
	if err != nil {
		rq.writeError(err)
		return
	}
	name := rq.info.Name
	if obj.GetName() != name {
		rq.writeError(apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name)))
		return
	}
	if sv.namespaced {
		if ns := obj.GetNamespace(); ns != "" && ns != rq.info.Namespace {
			rq.writeError(apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
			return
		}
		obj.SetNamespace(rq.info.Namespace)
	} else {
		obj.SetNamespace("")
	}
	pinned := obj.GetResourceVersion()
	if pinned == "" && sv.crd != nil {
		errs := field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), int64(0), "must be specified for an update")}
		rq.writeError(apierrors.NewInvalid(sv.gvk().GroupKind(), name, errs))
		return
	}
	stored, err := s.guaranteedUpdate(rq, sv, name, pinned, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return obj.DeepCopy(), nil
	})
	if err != nil {
		rq.writeError(err)
		return
	}
	rq.writeObject(sv, http.StatusOK, stored)
}

// guaranteedUpdate runs a read-modify-write cycle on one object: mutate gets
// a copy of the current version and returns the wanted one. With pinned set
// (the client's resourceVersion) a concurrent change is a 409; without it the
// cycle is retried. It returns the JSON of the result (stored, unchanged, or
// the would-be result of a dry run). An update that removes the last
// finalizer of an object being deleted deletes it.
func (s *Server) guaranteedUpdate(rq *request, sv *served, name, pinned string, mutate func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)) ([]byte, error) {
	dry, err := rq.dryRun()
	if err != nil {
		return nil, err
	}
	var pinnedRev int64
	if pinned != "" {
		if pinnedRev, err = strconv.ParseInt(pinned, 10, 64); err != nil || pinnedRev <= 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", pinned))
		}
	}
	key := rq.key(sv, name)
	ctx := rq.r.Context()
	synced := false // confirmed
	for attempt := 0; ; attempt++ {
		curObj, cur, err := getObject(rq.sp, key)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) && s.confirmed(ctx, rq.sp, &synced) {
				continue
			}
			return nil, storeError(err, sv.gr(), name)
		}
		if pinnedRev != 0 && curObj.Revision != pinnedRev {
			if s.confirmed(ctx, rq.sp, &synced) {
				continue
			}
			return nil, apierrors.NewConflict(sv.gr(), name, errors.New(registryConflictMessage))
		}
		next, err := mutate(cur.DeepCopy())
		if err != nil {
			return nil, err
		}
		if rv := next.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
			if s.confirmed(ctx, rq.sp, &synced) {
				continue
			}
			return nil, apierrors.NewConflict(sv.gr(), name, errors.New(registryConflictMessage))
		}
		next.SetResourceVersion(cur.GetResourceVersion())
		// As kube's rest.BeforeUpdate: an update that leaves out the uid
		// keeps the existing one; creation time and generation are the
		// server's.
		if next.GetUID() == "" {
			next.SetUID(cur.GetUID())
		}
		next.SetCreationTimestamp(cur.GetCreationTimestamp())
		next.SetGeneration(cur.GetGeneration())
		next.SetName(name)
		next.SetNamespace(cur.GetNamespace())
		next.SetAPIVersion(sv.apiVersion())
		next.SetKind(sv.kind)
		if next, err = normalize(rq, sv, next, cur); err != nil {
			return nil, err
		}
		if next, err = s.recordFields(rq, sv, cur, next); err != nil {
			return nil, err
		}
		if err := prepareUpdate(sv, rq.info.Subresource, next, cur); err != nil {
			return nil, err
		}
		switch {
		case sv.gr() == crdGR:
			if err := s.admitCRD(rq, next, cur); err != nil {
				return nil, err
			}
		case isSpaces(sv):
			if err := admitSpaceUpdate(sv, next, cur); err != nil {
				return nil, err
			}
		}
		if err := s.admitExtra(rq, sv, next); err != nil {
			return nil, err
		}
		if err := s.admitRBAC(rq, sv, next, curObj); err != nil {
			return nil, err
		}
		if sameObject(next, cur) {
			rq.stored = curObj
			return curObj.Data, nil
		}
		data, err := json.Marshal(next.Object)
		if err != nil {
			return nil, err
		}
		if dry {
			return data, nil
		}
		var res store.Result
		if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 && !hasSpecFinalizers(next) {
			res, err = rq.sp.Txn(ctx, store.Op{Type: store.OpDelete, Key: key, ExpectRevision: curObj.Revision})
			if err == nil {
				// The response shows the final state, as kube's does.
				return data, nil
			}
		} else {
			res, err = rq.sp.Txn(ctx, store.Op{Type: store.OpUpdate, Key: key, Data: data, ExpectRevision: curObj.Revision})
		}
		if err == nil {
			rq.stored = res.Objects[0]
			return res.Objects[0].Data, nil
		}
		if errors.Is(err, store.ErrConflict) && pinnedRev == 0 && attempt < maxConflictRetries {
			continue
		}
		return nil, storeError(err, sv.gr(), name)
	}
}

// hasSpecFinalizers reports namespace spec finalizers, which also hold
// deletion back.
func hasSpecFinalizers(obj *unstructured.Unstructured) bool {
	if obj.GetKind() != "Namespace" || obj.GetAPIVersion() != "v1" {
		return false
	}
	f, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
	return len(f) > 0
}
