package kubeapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// The system space (layout.SystemSpace, of kind layout.SpaceKindSystem) is
// the administrative context of the root: it serves the space records
// (layout.SpaceResource, kept in the store's system space "") as the
// cluster-scoped kind Space of canopy.dev/v1alpha1, and beside them only
// what says and checks who may create and delete spaces: ClusterRoles,
// ClusterRoleBindings and the access reviews (systemBuiltins). Space is
// served through the custom resource machinery, from a CRD compiled in
// (spaceCRDManifest) and never stored: its schema checks spec.kind and
// spec.backend, its printer columns make the Table, its OpenAPI serves
// kubectl. What a CRD cannot say is here:
//
//   - create (createObject, through admitSpace) checks the name is a DNS
//     label that is not taken and not reserved (layout.BuiltinSpace), and
//     writes the record with the space's system namespaces and default
//     ClusterRoles in one Txn (spaceContents), as EnsureSpace does;
//   - delete (serveSpaceDelete) refuses the built-in spaces, marks the
//     record terminating (the space then takes no new objects), deletes
//     every object of the space and then the record;
//   - update and patch (admitSpaceUpdate) may change the backend of a
//     workload description or inventory space, the built-in ones
//     included, and nothing else of its spec: a space's kind is what it
//     is.

// spaceCRDManifest defines the kind Space.
const spaceCRDManifest = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: spaces.canopy.dev
spec:
  group: canopy.dev
  scope: Cluster
  names: {plural: spaces, singular: space, kind: Space, listKind: SpaceList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Kind, type: string, jsonPath: .spec.kind, description: What the space holds.}
    - {name: Backend, type: string, jsonPath: .spec.backend, description: Where its objects are kept.}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status', description: Whether a backed space has what placement needs.}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A space of the root, served at /spaces/<name>/ with its own kube API.
        properties:
          spec:
            type: object
            default: {}
            properties:
              kind:
                type: string
                default: wds
                enum: [wds, inventory]
                description: wds (a workload description space, the default) or inventory.
              backend:
                type: string
                enum: ["", embedded, kube]
                description: Where the space's objects are kept; embedded (the default) is the root's own store, kube an existing Kubernetes API server reached with the kubeconfig of kubeconfigSecret.
              kubeconfigSecret:
                type: object
                description: The Secret of the system space holding the kubeconfig of a kube backend.
                properties:
                  name: {type: string, description: The Secret's name.}
                  namespace: {type: string, description: Its namespace; canopy-system by default.}
                  key: {type: string, description: The key of its data holding the kubeconfig; kubeconfig by default.}
          status:
            type: object
            description: Written by Canopy for a backed space.
            properties:
              conditions:
                type: array
                description: Ready (Canopy installed its CRDs in the backend and listed what it needs) and Reachable (the backend answers now).
                items:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
`

// spaceServed is Space as the system space serves it.
var spaceServed = sync.OnceValue(func() *compiledCRD {
	var o apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(spaceCRDManifest), &o); err != nil {
		panic("kubeapi: the Space CRD: " + err.Error())
	}
	def, errs := crd.Compile(&o, nil)
	if len(errs) > 0 {
		panic("kubeapi: the Space CRD: " + errs.ToAggregate().Error())
	}
	return &compiledCRD{def: def, obj: &o, specHash: sync.OnceValue(func() string { return openAPIHash(&o) })}
})

// spaceVerbs are the verbs of Space.
var spaceVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

// systemBuiltins are the built-in kinds served in the system space.
var systemBuiltins = map[schema.GroupResource]bool{
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        true,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}: true,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:     true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:  true,
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:      true,
	// Secrets hold the kubeconfigs of backed spaces, in
	// layout.SystemSecretsNamespace.
	{Resource: "namespaces"}: true,
	{Resource: "secrets"}:    true,
}

// servedSpace is Space's served resource.
func servedSpace() *served {
	cc := spaceServed()
	sv := servedFromCRD(cc.def, cc.def.Versions[0])
	sv.verbs = spaceVerbs
	return sv
}

// isSpaces reports whether sv is Space.
func isSpaces(sv *served) bool { return sv.gr() == spacesGR && sv.crd == spaceServed().def }

// resources lists what rq's space serves (a view: its one resource).
func (s *Server) resources(rq *request) []*served {
	if rq.view != nil {
		return []*served{rq.view.sv}
	}
	all := s.catalog.all(rq.data)
	if rq.kind != layout.SpaceKindSystem {
		return all
	}
	out := []*served{}
	for _, sv := range all {
		if sv.builtin != nil && systemBuiltins[sv.gr()] {
			out = append(out, sv)
		}
	}
	return append(out, servedSpace())
}

// lookup finds the resource a request to rq's space (or view) names.
func (s *Server) lookup(rq *request, group, version, resource string) (*served, bool) {
	if v := rq.view; v != nil {
		return v.sv, v.sv.group == group && v.sv.version == version && v.sv.resource == resource
	}
	if rq.kind != layout.SpaceKindSystem {
		return s.catalog.lookup(rq.data, group, version, resource)
	}
	gr := schema.GroupResource{Group: group, Resource: resource}
	if gr == spacesGR {
		sv := servedSpace()
		return sv, version == sv.version
	}
	if !systemBuiltins[gr] {
		return nil, false
	}
	return s.catalog.lookup(rq.data, group, version, resource)
}

// systemSpaceData is the Space a request to the system space reads and
// writes: the store's system space "" for Space (the records), the
// system space's own for the rest.
func (s *Server) systemSpaceData(space, group, resource string) store.Space {
	if (schema.GroupResource{Group: group, Resource: resource}) == spacesGR {
		return s.store.Space("")
	}
	return s.store.Space(space)
}

// admitSpace checks a new space's name: a DNS label (it is a path segment
// and a kubeconfig context), not the name of a space that exists (409),
// nor one the relays keep for themselves (422); a kube backend names its
// Secret, and backs a workload description space (422). Status is
// Canopy's: what the request carries is dropped.
func (s *Server) admitSpace(sv *served, obj *unstructured.Unstructured) error {
	name := obj.GetName()
	unstructured.RemoveNestedField(obj.Object, "status")
	if backend, _, _ := unstructured.NestedString(obj.Object, "spec", "backend"); backend == layout.BackendKube {
		errs := backendErrors(obj)
		// A new inventory space does not drive placement (the built-in
		// one does): only a new workload description space is backed.
		if kind, _, _ := unstructured.NestedString(obj.Object, "spec", "kind"); kind != layout.SpaceKindWDS {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "kind"), kind, []string{layout.SpaceKindWDS}))
		}
		if len(errs) > 0 {
			return apierrors.NewInvalid(sv.gvk().GroupKind(), name, errs)
		}
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		errs := field.ErrorList{}
		for _, m := range msgs {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, m))
		}
		return apierrors.NewInvalid(sv.gvk().GroupKind(), name, errs)
	}
	if _, err := s.store.Get(store.Key{Resource: layout.SpaceResource, Name: name}); err == nil {
		return apierrors.NewAlreadyExists(sv.gr(), name)
	}
	if layout.BuiltinSpace(name) {
		errs := field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name,
			"is reserved for the spaces Canopy makes itself (default, inventory, downsync, system, inbox, outbox, mailbox-*, reports-*, views-*)")}
		return apierrors.NewInvalid(sv.gvk().GroupKind(), name, errs)
	}
	return nil
}

// backendErrors checks a kube backend names its Secret.
func backendErrors(obj *unstructured.Unstructured) field.ErrorList {
	if secret, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeconfigSecret", "name"); secret == "" {
		return field.ErrorList{field.Required(field.NewPath("spec", "kubeconfigSecret", "name"), "a kube backend is reached with the kubeconfig of a Secret of the system space")}
	}
	return nil
}

// admitSpaceUpdate checks an update of the space record cur to next: the
// kind does not change, the backend changes only for a workload
// description or inventory space, and a kube backend names its Secret.
// Status stays Canopy's, and goes with a kube backend.
func admitSpaceUpdate(sv *served, next, cur *unstructured.Unstructured) error {
	kind, _, _ := unstructured.NestedString(cur.Object, "spec", "kind")
	backend, _, _ := unstructured.NestedString(next.Object, "spec", "backend")
	errs := field.ErrorList{}
	if k, _, _ := unstructured.NestedString(next.Object, "spec", "kind"); k != kind {
		errs = append(errs, field.Invalid(field.NewPath("spec", "kind"), k, "field is immutable"))
	}
	was, _, _ := unstructured.NestedString(cur.Object, "spec", "backend")
	if cmp.Or(backend, layout.BackendEmbedded) != cmp.Or(was, layout.BackendEmbedded) && kind != layout.SpaceKindWDS && kind != layout.SpaceKindInventory {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "backend"), fmt.Sprintf("a space of kind %s is kept by the root", kind)))
	}
	if backend == layout.BackendKube {
		errs = append(errs, backendErrors(next)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(sv.gvk().GroupKind(), next.GetName(), errs)
	}
	delete(next.Object, "status")
	if st, ok := cur.Object["status"]; ok && backend == layout.BackendKube {
		next.Object["status"] = st
	}
	return nil
}

// spaceCreateOps are the writes beyond the record that create space name
// of kind: its system namespaces and default ClusterRoles.
func spaceCreateOps(obj *unstructured.Unstructured) ([]store.Op, error) {
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "kind")
	return spaceContents(obj.GetName(), kind, time.Now())
}

// maxDeleteOps bounds the deletes of one Txn of a space's deletion.
const maxDeleteOps = 500

// serveSpaceDelete deletes a space: it refuses a built-in one (403), marks
// the record terminating, deletes every object of the space, in Txns of
// at most maxDeleteOps, and then the record. A delete interrupted on the
// way (the record stays, terminating) finishes when asked again.
func (s *Server) serveSpaceDelete(rq *request, sv *served) {
	name := rq.info.Name
	opts, err := rq.deleteOptions()
	if err != nil {
		rq.writeError(err)
		return
	}
	key := store.Key{Resource: layout.SpaceResource, Name: name}
	cur, err := rq.sp.Get(key)
	if err != nil {
		rq.writeError(storeError(err, sv.gr(), name))
		return
	}
	if kind := layout.SpaceKindOf(cur); layout.BuiltinSpace(name) || kind != layout.SpaceKindWDS && kind != layout.SpaceKindInventory {
		rq.writeError(apierrors.NewForbidden(sv.gr(), name, fmt.Errorf("space %q is built in (of kind %s): Canopy keeps it, and it cannot be deleted", name, kind)))
		return
	}
	u, err := parseObject(cur.Data)
	if err != nil {
		rq.writeError(err)
		return
	}
	if err := preconditionsFailed(opts.Preconditions, sv, name, u); err != nil {
		rq.writeError(err)
		return
	}
	if err := s.beforeDelete(rq, sv, []*store.Object{cur}); err != nil {
		rq.writeError(err)
		return
	}
	if len(opts.DryRun) == 0 {
		if err := s.deleteSpace(rq.r.Context(), cur, u); err != nil {
			rq.writeError(storeError(err, sv.gr(), name))
			return
		}
	}
	rq.writeTyped(http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: name, Group: sv.group, Kind: sv.resource, UID: u.GetUID()},
	})
}

// deleteSpace marks the record cur (u) terminating, deletes the space's
// objects and what its Views gathered (layout.ViewsSpace), then the
// record.
func (s *Server) deleteSpace(ctx context.Context, cur *store.Object, u *unstructured.Unstructured) error {
	name := cur.Key.Name
	if u.GetDeletionTimestamp() == nil {
		now := metav1.NewTime(time.Now())
		u.SetDeletionTimestamp(&now)
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		res, err := s.store.Txn(ctx, store.Op{Type: store.OpUpdate, Key: cur.Key, Data: data, ExpectRevision: cur.Revision})
		if err != nil {
			return err
		}
		cur = res.Objects[0]
	}
	for _, space := range []string{name, layout.ViewsSpace(name)} {
		if err := s.emptySpace(ctx, space); err != nil {
			return err
		}
	}
	_, err := s.store.Txn(ctx, store.Op{Type: store.OpDelete, Key: cur.Key, ExpectUID: cur.UID})
	return err
}

// emptySpace deletes every object of a space of the store.
func (s *Server) emptySpace(ctx context.Context, space string) error {
	for {
		list, err := s.store.List(store.ListOptions{Space: space, Limit: maxDeleteOps})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		ops := make([]store.Op, len(list.Items))
		for i, o := range list.Items {
			ops[i] = store.Op{Type: store.OpDelete, Key: o.Key}
		}
		// Whatever their version: they all go. One deleted meanwhile
		// fails the Txn, and the space is listed again.
		if _, err := s.store.Txn(ctx, ops...); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
}

// terminatingSpace is the answer to a write into a space being deleted.
func terminatingSpace(space string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("space %q is being deleted: it takes no new objects", space),
	}}
}
