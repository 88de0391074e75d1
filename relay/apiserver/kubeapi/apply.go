package kubeapi

// Server-side apply and metadata.managedFields.
//
// Every write records who set which fields, as kube-apiserver does: creates,
// updates and patches as an Update by the request's manager (the
// fieldManager parameter, else the User-Agent's product name), a
// server-side apply (PATCH with application/apply-patch+yaml) as an Apply
// that merges the applied configuration into the object and fails with 409
// on fields other managers own unless force=true. The work is done by
// apimachinery's managedfields.FieldManager, the one kube-apiserver uses,
// wired to the server's unstructured objects:
//
//   - built-in kinds are typed by the structured-merge-diff schemas that
//     client-go (k8s.io/api kinds) and apiextensions-apiserver (CRDs) ship for
//     their apply configurations: the schemas kube-apiserver is generated
//     from, so lists merge by their keys (containers by name, ports by port
//     and protocol) exactly as in kube. A built-in kind neither knows
//     (APIService) is deduced: every list atomic.
//   - custom resources are typed by their CRD's structural schema, through
//     the OpenAPI models kube's CRD handler builds (builder.BuildOpenAPIV3),
//     once per stored revision of the CRD.
//
// Objects keep their stored JSON shape: the server converts between the
// versions of a kind by relabelling (kube's conversion strategy None), and
// so does the field manager when it compares fields recorded at another
// version. Defaulting is normalize's, after the merge.

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"weak"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extapplyconfigurations "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
)

// serveApply answers a server-side apply: PATCH with
// application/apply-patch+yaml on an object or its status. The patch is
// the manager's whole intent for the fields it names; fields it named
// before and leaves out are removed unless another manager also owns
// them. An apply to a missing object creates it (through the create path:
// namespace checks, defaulting, validation, admission); one to the status
// of a missing object is a 404.
func (s *Server) serveApply(rq *request, sv *served) {
	manager, force, err := rq.applyOptions()
	if err != nil {
		rq.writeError(err)
		return
	}
	body, err := rq.readBody()
	if err != nil {
		rq.writeError(err)
		return
	}
	patch, err := rq.decodeApplyPatch(body)
	if err != nil {
		rq.writeError(err)
		return
	}
	fm := s.fieldManager(rq, sv)
	name := rq.info.Name
	apply := func(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		out, err := fm.Apply(live, patch.DeepCopy(), manager, force)
		if err != nil {
			return nil, applyError(err)
		}
		obj, ok := out.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("kubeapi: apply returned %T", out)
		}
		// kube's patcher checks what the merge produced against the URL.
		if obj.GetName() != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name))
		}
		if sv.namespaced {
			if ns := obj.GetNamespace(); ns != "" && ns != rq.info.Namespace {
				return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
			}
		}
		return obj, nil
	}
	for attempt := 0; ; attempt++ {
		data, err := s.guaranteedUpdate(rq, sv, name, "", apply)
		if !apierrors.IsNotFound(err) || rq.info.Subresource != "" {
			if err != nil {
				rq.writeError(err)
				return
			}
			rq.writeObject(sv, http.StatusOK, data)
			return
		}
		// No such object: apply creates it.
		obj, err := apply(newLive(sv))
		if err != nil {
			rq.writeError(err)
			return
		}
		if uid := obj.GetUID(); uid != "" {
			rq.writeError(apierrors.NewConflict(sv.gr(), name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid)))
			return
		}
		data, err = s.createObject(rq, sv, obj)
		if apierrors.IsAlreadyExists(err) && attempt < maxConflictRetries {
			continue // created meanwhile: apply to it
		}
		if err != nil {
			rq.writeError(err)
			return
		}
		rq.writeObject(sv, http.StatusCreated, data)
		return
	}
}

// applyOptions reads and validates the PatchOptions of an apply as kube
// does (422 when fieldManager is missing or invalid).
func (rq *request) applyOptions() (manager string, force bool, err error) {
	q := rq.r.URL.Query()
	opts := metav1.PatchOptions{FieldManager: q.Get("fieldManager"), DryRun: q["dryRun"], FieldValidation: q.Get("fieldValidation")}
	if v, ok := q["force"]; ok {
		// kube's query conversion: anything but "0" or "false" is true.
		force = len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
		opts.Force = &force
	}
	if errs := metav1validation.ValidatePatchOptions(&opts, types.ApplyYAMLPatchType); len(errs) > 0 {
		return "", false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return opts.FieldManager, force, nil
}

// validatePatchOptions checks the options of a patch that is not an apply
// as kube does (422): force is refused, fieldManager, dryRun and
// fieldValidation must be valid.
func (rq *request) validatePatchOptions(pt types.PatchType) error {
	q := rq.r.URL.Query()
	opts := metav1.PatchOptions{FieldManager: q.Get("fieldManager"), DryRun: q["dryRun"], FieldValidation: q.Get("fieldValidation")}
	if _, ok := q["force"]; ok {
		opts.Force = new(bool)
	}
	if errs := metav1validation.ValidatePatchOptions(&opts, pt); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return nil
}

// decodeApplyPatch parses an apply configuration (YAML, or JSON as
// client-go and kubectl send it) as kube's apply patcher does, integers as
// int64 as everywhere else here. With fieldValidation Strict a duplicate
// field is a 400; with Warn a warning.
func (rq *request) decodeApplyPatch(body []byte) (*unstructured.Unstructured, error) {
	directive := rq.fieldValidation()
	strict := directive == fieldValidationStrict || directive == fieldValidationWarn
	var m map[string]any
	var dup error
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		// JSON (also YAML): the JSON decoder is much the cheaper.
		if err := checkBodyDepth(body); err != nil {
			return nil, err
		}
		var err error
		if strict {
			var strictErrs []error
			if strictErrs, err = kjson.UnmarshalStrict(body, &m); err == nil && len(strictErrs) > 0 {
				dup = errors.Join(strictErrs...)
			}
		} else {
			err = kjson.UnmarshalCaseSensitivePreserveInts(body, &m)
		}
		if err != nil {
			m, dup = nil, nil // YAML flow style, or malformed: the YAML path says which
		}
	}
	if m == nil {
		var j []byte
		if strict {
			if j, dup = yaml.YAMLToJSONStrict(body); dup != nil {
				j = nil
			}
		}
		if j == nil {
			var err error
			if j, err = yaml.YAMLToJSON(body); err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
		if err := checkBodyDepth(j); err != nil {
			return nil, err
		}
		if err := utiljson.Unmarshal(j, &m); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
	}
	if dup != nil {
		if directive == fieldValidationStrict {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", dup))
		}
		addWarning(rq.w, dup.Error())
	}
	if m == nil {
		return nil, apierrors.NewBadRequest("error decoding patch: the apply configuration must be an object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// applyError maps what FieldManager.Apply returns. Conflicts and bad
// patches are already API errors. A patch that does not fit the schema
// ("field not declared in schema") is the client's error: 400 with kube's
// message, where kube-apiserver 1.37 still answers 500
// (kubernetes/kubernetes#139253).
func applyError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	if strings.HasPrefix(err.Error(), "failed to create typed patch object") {
		return apierrors.NewBadRequest(err.Error())
	}
	return err
}

// recordFields updates the managedFields of a write that is not an apply
// (an apply has merged them with the object): next is what the request
// makes of cur, nil for a create. It runs after normalize (defaults and
// pruning done) and before prepareCreate/prepareUpdate, as kube's handlers
// run their field manager before the strategy. The request's own
// managedFields, if any, replace the stored ones; an empty list (or a list
// of one empty entry) resets them.
func (s *Server) recordFields(rq *request, sv *served, cur, next *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if rq.isApply() {
		return next, nil
	}
	manager, err := rq.fieldManagerName()
	if err != nil {
		return nil, err
	}
	if rq.info.Subresource == "scale" && cur != nil {
		return recordScaleFields(sv, cur, next, manager)
	}
	live := cur
	if live == nil {
		live = newLive(sv)
	}
	out := s.fieldManager(rq, sv).UpdateNoErrors(live, next, manager)
	if u, ok := out.(*unstructured.Unstructured); ok {
		return u, nil
	}
	return next, nil
}

// recordScaleFields records a write through /scale as kube's scale
// subresources do (managedfields.ScaleHandler): the managers of the
// object's replicas become managers of the Scale's spec.replicas, the
// write is recorded on the Scale by its own field manager, and the result
// goes back to the object. So a manager that takes the replicas over
// appears with subresource scale and no time, the managers it took them
// from lose them, and a write to replicas nobody manages is not recorded
// at all (kube skips the field manager of an object without managed
// fields).
func recordScaleFields(sv *served, cur, next *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	h := managedfields.NewScaleHandler(cur.GetManagedFields(), sv.gvk().GroupVersion(), replicasPaths(sv))
	entries, err := h.ToSubresource()
	if err != nil {
		return next, nil // unreadable managed fields: left as they are, as kube does
	}
	live, err := scaleObject(sv, cur)
	if err != nil {
		return nil, err
	}
	live.SetManagedFields(entries)
	want, err := scaleObject(sv, next)
	if err != nil {
		return nil, err
	}
	out := scaleFieldManager().UpdateNoErrors(live, want, manager)
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return next, nil
	}
	parent, err := h.ToParent(u.GetManagedFields())
	if err != nil {
		return next, nil
	}
	next.SetManagedFields(parent)
	return next, nil
}

// replicasPaths maps each version of a kind to the path of its replicas
// (nil for a version of a custom resource without the scale subresource).
func replicasPaths(sv *served) managedfields.ResourcePathMappings {
	path := func(p string) fieldpath.Path {
		var elems []any
		for _, e := range fieldPath(p) {
			elems = append(elems, e)
		}
		return fieldpath.MakePathOrDie(elems...)
	}
	out := managedfields.ResourcePathMappings{}
	if sv.crd == nil {
		out[sv.apiVersion()] = path(sv.scale.SpecReplicasPath)
		return out
	}
	for _, v := range sv.crd.Versions {
		gv := schema.GroupVersion{Group: sv.group, Version: v.Name}.String()
		out[gv] = nil
		if v.Scale != nil {
			out[gv] = path(v.Scale.SpecReplicasPath)
		}
	}
	return out
}

// scaleObject is the Scale of an object, as the unstructured object the
// Scale's field manager works on.
func scaleObject(sv *served, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	sc, err := scaleOf(sv, u)
	if err != nil {
		return nil, err
	}
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(sc)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// scaleFieldManager is the field manager of autoscaling/v1 Scale written
// through a scale subresource. Scale has no apply configuration to be
// typed by; a deduced schema serves, as only spec.replicas (a scalar) goes
// back to the object.
func scaleFieldManager() *managedfields.FieldManager {
	key := managerKey{gvk: autoscalingv1.SchemeGroupVersion.WithKind("Scale"), subresource: "scale"}
	return builtinManagers.get(key, func() *managedfields.FieldManager {
		return newFieldManager(managedfields.NewDeducedTypeConverter(), key, nil, false)
	})
}

// newLive is the "live" object of a create for the field manager, as
// kube's handlers make it (an empty object of the kind): for a built-in
// kind its empty Go type, whose struct fields (spec, spec.template,
// spec.strategy...) are already there, so that a create does not record
// them, nor an empty struct the client sent, as set; for a custom resource
// an empty object. The field manager makes its empty objects the same way
// (unstructuredCreater).
func newLive(sv *served) *unstructured.Unstructured {
	if sv.empty == nil {
		return newEmpty(sv.gvk())
	}
	u := &unstructured.Unstructured{Object: kruntime.DeepCopyJSON(sv.empty)}
	u.SetGroupVersionKind(sv.gvk())
	return u
}

// isApply reports whether rq is a server-side apply.
func (rq *request) isApply() bool {
	if rq.info == nil || rq.info.Verb != "patch" {
		return false
	}
	mt, _, _ := mime.ParseMediaType(rq.r.Header.Get("Content-Type"))
	return types.PatchType(mt) == types.ApplyYAMLPatchType
}

// fieldManagerName is the manager of a create, update or patch: the
// fieldManager parameter (validated as kube does: 422 when too long or not
// printable), else the product name of the User-Agent.
func (rq *request) fieldManagerName() (string, error) {
	m := rq.r.URL.Query().Get("fieldManager")
	if errs := metav1validation.ValidateFieldManager(m, field.NewPath("fieldManager")); len(errs) > 0 {
		return "", rq.invalidOptions(errs)
	}
	if m != "" {
		return m, nil
	}
	return managerFromUserAgent(rq.r.UserAgent()), nil
}

// managerFromUserAgent is kube's default manager: the User-Agent up to its
// first "/", printable characters only, at most FieldManagerMaxLength bytes.
func managerFromUserAgent(ua string) string {
	product, _, _ := strings.Cut(ua, "/")
	var b strings.Builder
	for _, r := range product {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fieldManager returns the FieldManager of the request's resource and
// subresource. FieldManagers are safe for concurrent use and cached: for
// built-in kinds once per process, for custom resources once per compiled
// CRD revision.
func (s *Server) fieldManager(rq *request, sv *served) *managedfields.FieldManager {
	key := managerKey{gvk: sv.gvk(), subresource: rq.info.Subresource}
	if sv.crd == nil {
		return builtinManagers.get(key, func() *managedfields.FieldManager {
			return newFieldManager(builtinTypeConverter(key.gvk), key, resetFields(sv.status, key.subresource, sv.apiVersion()), false)
		})
	}
	fms := crdManagersFor(sv.crd)
	return fms.get(key, func() *managedfields.FieldManager {
		fms.once.Do(func() {
			fms.tc = managedfields.NewDeducedTypeConverter()
			// The CRD object of this revision: the catalog compiles each
			// revision once, so its Definition identifies it.
			if cc := s.catalog.crd(rq.data, sv.resource+"."+sv.group); cc != nil && cc.def == sv.crd {
				if tc, err := crdTypeConverter(cc.obj); err == nil {
					fms.tc = tc
				} else {
					s.log.Warn("server-side apply: CRD schema not usable, lists are atomic", "crd", cc.obj.Name, "error", err)
				}
			}
		})
		var versions []string
		for _, v := range sv.crd.Versions {
			versions = append(versions, schema.GroupVersion{Group: sv.group, Version: v.Name}.String())
		}
		return newFieldManager(fms.tc, key, resetFields(sv.status, key.subresource, versions...), true)
	})
}

// managerKey names a FieldManager: a kind at one version, and the
// subresource written ("", "status" or "scale").
type managerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// managerSet is a lazily filled cache of FieldManagers.
type managerSet struct {
	once sync.Once
	tc   managedfields.TypeConverter // custom resources: the CRD's

	mu sync.Mutex
	m  map[managerKey]*managedfields.FieldManager
}

func (ms *managerSet) get(k managerKey, build func() *managedfields.FieldManager) *managedfields.FieldManager {
	ms.mu.Lock()
	fm, ok := ms.m[k]
	ms.mu.Unlock()
	if ok {
		return fm
	}
	fm = build()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if prev, ok := ms.m[k]; ok {
		return prev
	}
	if ms.m == nil {
		ms.m = map[managerKey]*managedfields.FieldManager{}
	}
	ms.m[k] = fm
	return fm
}

// builtinManagers is shared by every server of the process (a simulation
// runs thousands): built-in kinds are the same for all.
var builtinManagers = &managerSet{}

// crdManagers holds the FieldManagers of each compiled CRD revision, keyed
// weakly by its Definition: when the catalog drops a revision and nothing
// else uses it, its entry goes with it.
var crdManagers sync.Map // weak.Pointer[crd.Definition] -> *managerSet

func crdManagersFor(def *crd.Definition) *managerSet {
	key := weak.Make(def)
	if v, ok := crdManagers.Load(key); ok {
		return v.(*managerSet)
	}
	v, loaded := crdManagers.LoadOrStore(key, &managerSet{})
	if !loaded {
		runtime.AddCleanup(def, func(k weak.Pointer[crd.Definition]) { crdManagers.Delete(k) }, key)
	}
	return v.(*managerSet)
}

func newFieldManager(tc managedfields.TypeConverter, k managerKey, reset map[fieldpath.APIVersion]fieldpath.Filter, custom bool) *managedfields.FieldManager {
	newFM := managedfields.NewDefaultFieldManager
	if custom {
		newFM = managedfields.NewDefaultCRDFieldManager
	}
	hub := k.gvk.GroupVersion()
	fm, err := newFM(tc, relabelConverter{}, noDefaults{}, unstructuredCreater{}, k.gvk, hub, k.subresource, reset)
	if err != nil {
		// Only a nil type converter fails, and none is.
		panic(err)
	}
	return fm
}

// resetFields are the fields a write through an endpoint cannot set, which
// its manager therefore does not own: status on the main resource of a kind
// with a status subresource, spec on the status subresource (kube's
// strategies' GetResetFields).
func resetFields(hasStatus bool, subresource string, apiVersions ...string) map[fieldpath.APIVersion]fieldpath.Filter {
	var set *fieldpath.Set
	switch {
	case subresource == "status":
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
	case subresource == "" && hasStatus:
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	default:
		return nil
	}
	out := make(map[fieldpath.APIVersion]fieldpath.Filter, len(apiVersions))
	for _, v := range apiVersions {
		out[fieldpath.APIVersion(v)] = fieldpath.NewExcludeSetFilter(set)
	}
	return out
}

// builtinTypeConverter types a built-in kind by the schemas client-go and
// apiextensions-apiserver generate for their apply configurations.
func builtinTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	tcs := builtinTypeConverters()
	switch {
	case gvk.Group == apiextensionsv1.GroupName:
		return tcs.extensions
	case clientgoscheme.Scheme.Recognizes(gvk):
		return tcs.core
	default:
		return managedfields.NewDeducedTypeConverter()
	}
}

var builtinTypeConverters = sync.OnceValue(func() (tcs struct{ core, extensions managedfields.TypeConverter }) {
	tcs.core = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
	ext := kruntime.NewScheme()
	if err := apiextensionsv1.AddToScheme(ext); err != nil {
		panic(err)
	}
	tcs.extensions = extapplyconfigurations.NewTypeConverter(ext)
	return tcs
})

// crdTypeConverter builds the type converter of a CRD from the OpenAPI
// models of its versions, as kube's CRD handler does
// (buildOpenAPIModelsForApply). The models carry ObjectMeta and the other
// meta/v1 definitions they reference.
func crdTypeConverter(c *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	var versions []string
	for _, v := range c.Spec.Versions {
		if v.Served {
			versions = append(versions, v.Name)
		}
	}
	if len(versions) == 0 {
		return nil, errors.New("no served version")
	}
	first, err := builder.BuildOpenAPIV3(c, versions[0], builder.Options{})
	if err != nil {
		return nil, err
	}
	models := first.Components.Schemas
	for _, v := range versions[1:] {
		doc, err := builder.BuildOpenAPIV3(c, v, builder.Options{})
		if err != nil {
			return nil, err
		}
		for name, s := range doc.Components.Schemas {
			if _, ok := models[name]; !ok {
				models[name] = s
			}
		}
	}
	return managedfields.NewTypeConverter(models, c.Spec.PreserveUnknownFields)
}

// newEmpty is the object an apply to a missing object starts from (and the
// "live" object of a create).
func newEmpty(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u
}

// relabelConverter converts an object between the versions of its kind by
// relabelling it: the server keeps objects in the version they were written
// in, and compares managed fields recorded at another version on the same
// shape (kube's conversion strategy None).
type relabelConverter struct{}

func (relabelConverter) Convert(in, out, context any) error {
	return fmt.Errorf("kubeapi: conversion of %T is not supported", in)
}

func (relabelConverter) ConvertToVersion(in kruntime.Object, target kruntime.GroupVersioner) (kruntime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("kubeapi: conversion of %T is not supported", in)
	}
	gvk := u.GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, fmt.Errorf("kubeapi: %v cannot be converted to %v", gvk, target)
	}
	if to == gvk {
		return u, nil
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(to)
	return out, nil
}

func (relabelConverter) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return "", "", fmt.Errorf("kubeapi: field label conversion is not supported")
}

// noDefaults: normalize defaults the merged object afterwards.
type noDefaults struct{}

func (noDefaults) Default(kruntime.Object) {}

// unstructuredCreater makes the field manager's empty objects: newLive
// for built-in kinds, an empty object for the others.
type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (kruntime.Object, error) {
	if sv, ok := builtinCatalog().byGK[gvk.GroupKind()]; ok && sv.version == gvk.Version {
		return newLive(sv), nil
	}
	return newEmpty(gvk), nil
}
