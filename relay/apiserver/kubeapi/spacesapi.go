package kubeapi

import (
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
//   - update and patch are refused: a space's kind is what it is.

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
                enum: ["", embedded]
                description: Where the space's objects are kept; embedded (the default) is the root's own store.
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
var spaceVerbs = []string{"create", "delete", "get", "list", "watch"}

// systemBuiltins are the built-in kinds served in the system space.
var systemBuiltins = map[schema.GroupResource]bool{
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        true,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}: true,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:     true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:  true,
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:      true,
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

// resources lists what rq's space serves.
func (s *Server) resources(rq *request) []*served {
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

// lookup finds the resource a request to rq's space names.
func (s *Server) lookup(rq *request, group, version, resource string) (*served, bool) {
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
// nor one the relays keep for themselves (422).
func (s *Server) admitSpace(sv *served, obj *unstructured.Unstructured) error {
	name := obj.GetName()
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
			"is reserved for the spaces Canopy makes itself (default, inventory, downsync, system, inbox, outbox, mailbox-*, reports-*)")}
		return apierrors.NewInvalid(sv.gvk().GroupKind(), name, errs)
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
// objects and then the record.
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
	for {
		list, err := s.store.List(store.ListOptions{Space: name, Limit: maxDeleteOps})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			break
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
	_, err := s.store.Txn(ctx, store.Op{Type: store.OpDelete, Key: cur.Key, ExpectUID: cur.UID})
	return err
}

// terminatingSpace is the answer to a write into a space being deleted.
func terminatingSpace(space string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("space %q is being deleted: it takes no new objects", space),
	}}
}
