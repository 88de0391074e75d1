package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"

	"github.com/canopy-dev/canopy/relay/apiserver/resources"
	"github.com/canopy-dev/canopy/relay/store"
	"sigs.k8s.io/yaml"
)

// Field validation directives (the fieldValidation query parameter).
const (
	fieldValidationIgnore = "Ignore"
	fieldValidationWarn   = "Warn"
	fieldValidationStrict = "Strict"
)

// readBody reads a request body of at most MaxBodyBytes and converts YAML
// to JSON. Protobuf and CBOR bodies get 415.
func (rq *request) readBody() ([]byte, error) {
	limit := rq.srv.cfg.MaxBodyBytes
	b, err := io.ReadAll(io.LimitReader(rq.r.Body, limit+1))
	if err != nil {
		return nil, apierrors.NewBadRequest("unable to read request body: " + err.Error())
	}
	if int64(len(b)) > limit {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
	}
	ct := rq.r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	switch mt {
	case "", "application/json", "*/*", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json":
	case "application/yaml":
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return nil, apierrors.NewBadRequest("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml: " + err.Error())
		}
		rq.yamlBody = b
		b = j
	case "application/apply-patch+yaml":
		// YAML or JSON: decodeApplyPatch checks its depth.
		return b, nil
	case runtime.ContentTypeProtobuf:
		if b, err = protobufToJSON(b); err != nil {
			return nil, err
		}
	default:
		return nil, unsupportedMediaType(ct)
	}
	if err := checkBodyDepth(b); err != nil {
		return nil, err
	}
	return b, nil
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %q)", ct),
	}}
}

// readObject reads the body of a create or update, checks its query
// options and decodes the object, in the order kube's handlers do.
func (rq *request) readObject(sv *served) (*unstructured.Unstructured, error) {
	body, err := rq.readBody()
	if err != nil {
		return nil, err
	}
	if err := rq.validateWriteOptions(); err != nil {
		return nil, err
	}
	return rq.decodeObject(sv, body)
}

// decodeObject parses the body of a create or update into an object of
// the served kind. Missing apiVersion/kind default to the endpoint's; a
// mismatch is a 400. With fieldValidation Strict or Warn, duplicate fields
// (and keys of a YAML body) are kept in rq.strictErrs for normalize, which
// reports them with the unknown fields, as kube's strict decoder does.
func (rq *request) decodeObject(sv *served, body []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	var err error
	switch rq.fieldValidation() {
	case fieldValidationStrict, fieldValidationWarn:
		if rq.yamlBody != nil {
			if _, yerr := yaml.YAMLToJSONStrict(rq.yamlBody); yerr != nil {
				rq.strictErrs = append(rq.strictErrs, yerr)
			}
		}
		var dups []error
		dups, err = kjson.UnmarshalStrict(body, &m, kjson.DisallowDuplicateFields)
		rq.strictErrs = append(rq.strictErrs, dups...)
	default:
		err = kjson.UnmarshalCaseSensitivePreserveInts(body, &m)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding request body: %v", err))
	}
	if m == nil {
		return nil, apierrors.NewBadRequest("request body must be a JSON or YAML object")
	}
	obj := &unstructured.Unstructured{Object: m}
	if av, ok := m["apiVersion"]; ok && av != sv.apiVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%v) does not match the expected API version (%s)", av, sv.apiVersion()))
	}
	if k, ok := m["kind"]; ok && k != sv.kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%v) does not match the expected kind (%s)", k, sv.kind))
	}
	if md, ok := m["metadata"]; ok {
		if _, isMap := md.(map[string]any); !isMap && md != nil {
			return nil, apierrors.NewBadRequest("metadata must be an object")
		}
	}
	obj.SetAPIVersion(sv.apiVersion())
	obj.SetKind(sv.kind)
	return obj, nil
}

// normalize shapes obj as kube would store it. Built-in kinds go through
// their Go type (dropping unknown fields and normalizing values such as
// quantities); custom resources are pruned, defaulted and validated by their
// schema. Unknown fields are handled per the fieldValidation directive.
//
// metadata.managedFields are left as they are, for the field manager
// (recordFields) to read after normalize: it validates them, and the
// Go-type round trip would lose the empty list that resets them.
func normalize(rq *request, sv *served, obj, old *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if errs := checkObjectDepth(obj.Object); len(errs) > 0 {
		return nil, apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
	}
	managed, hasManaged, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields")
	if hasManaged {
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	}
	obj, err := normalizeObject(rq, sv, obj, old)
	if err == nil && hasManaged {
		if md, ok := obj.Object["metadata"].(map[string]any); ok {
			md["managedFields"] = managed
		}
	}
	return obj, err
}

func normalizeObject(rq *request, sv *served, obj, old *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var unknown []string
	if sv.newTyped != nil {
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		typed := sv.newTyped()
		strictErrs, err := kjson.UnmarshalStrict(raw, typed)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding request body into %s: %v", sv.kind, err))
		}
		for _, e := range strictErrs {
			unknown = append(unknown, e.Error())
		}
		convertTyped(typed)
		resources.Default(typed)
		m, err := toUnstructuredMap(typed)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		obj = &unstructured.Unstructured{Object: m}
		obj.SetAPIVersion(sv.apiVersion())
		obj.SetKind(sv.kind)
	} else if sv.crdVer != nil {
		prepare := sv.crdVer.Prepare
		if rq.info != nil && rq.info.Subresource == "status" {
			prepare = sv.crdVer.PrepareStatus
		}
		pruned, errs := prepare(obj, old)
		for _, p := range pruned {
			unknown = append(unknown, fmt.Sprintf("unknown field %q", p))
		}
		if len(errs) > 0 {
			return nil, apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
		}
	}
	if err := rq.strictDecoding(sv, old, unknown); err != nil {
		return nil, err
	}
	return obj, nil
}

// strictDecoding reports what strict decoding found, as kube does: the
// duplicate fields of the request (rq.strictErrs) and the unknown fields of
// the object. With Warn each is a warning; with Strict they are one error,
// which for a create or update is kube's decoding error (400) and for a
// JSON, merge or strategic merge patch a 422 on the field "patch" that
// quotes the patched object (or the strategic merge patch).
func (rq *request) strictDecoding(sv *served, cur *unstructured.Unstructured, unknown []string) error {
	errs := rq.strictErrs
	for _, u := range unknown {
		errs = append(errs, errors.New(u))
	}
	if len(errs) == 0 {
		return nil
	}
	switch rq.fieldValidation() {
	case fieldValidationIgnore:
		return nil
	case fieldValidationWarn:
		for _, e := range errs {
			for _, w := range yamlWarnings(e.Error()) {
				addWarning(rq.w, w)
			}
		}
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	msg := "strict decoding error: " + strings.Join(msgs, ", ")
	switch verb := rq.info.Verb; {
	case rq.patch != nil:
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), rq.patch.quoted(sv, cur), msg)})
	case verb == "create" || verb == "update":
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", sv.kind, sv.version, sv.kind, msg))
	default:
		return apierrors.NewBadRequest(msg)
	}
}

// yamlWarnings splits the error of a strict YAML decoding into one warning
// per line, as kube's parseYAMLWarnings; other errors are one warning.
func yamlWarnings(msg string) []string {
	var rest string
	switch {
	case strings.HasPrefix(msg, "yaml: unmarshal errors:\n"):
		rest = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	case strings.HasPrefix(msg, "error converting YAML to JSON: yaml: unmarshal errors:\n"):
		rest = strings.TrimPrefix(msg, "error converting YAML to JSON: yaml: unmarshal errors:\n")
	default:
		return []string{msg}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

func toUnstructuredMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// fieldValidation returns the directive of the request (kube's default is
// Warn when the client says nothing). Other values are refused by
// validateWriteOptions before a request gets here.
func (rq *request) fieldValidation() string {
	switch v := rq.r.URL.Query().Get("fieldValidation"); v {
	case fieldValidationIgnore, fieldValidationStrict:
		return v
	default:
		return fieldValidationWarn
	}
}

// dryRun reports whether the request asks for dryRun=All; other values
// are a 422 as kube's (the options of the verb are Invalid).
func (rq *request) dryRun() (bool, error) {
	vals := rq.r.URL.Query()["dryRun"]
	if errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), vals); len(errs) > 0 {
		return false, rq.invalidOptions(errs)
	}
	return len(vals) > 0, nil
}

// validateWriteOptions checks the query options of a create or update
// (CreateOptions, UpdateOptions: fieldManager, dryRun, fieldValidation) as
// kube's handlers do before decoding the body: a 422 naming the options.
// Patches check their PatchOptions in servePatch and serveApply.
func (rq *request) validateWriteOptions() error {
	q := rq.r.URL.Query()
	var errs field.ErrorList
	switch rq.info.Verb {
	case "create":
		errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{FieldManager: q.Get("fieldManager"), DryRun: q["dryRun"], FieldValidation: q.Get("fieldValidation")})
	case "update":
		errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{FieldManager: q.Get("fieldManager"), DryRun: q["dryRun"], FieldValidation: q.Get("fieldValidation")})
	}
	if len(errs) > 0 {
		return rq.invalidOptions(errs)
	}
	return nil
}

// invalidOptions is the 422 of bad query options of the request's verb.
func (rq *request) invalidOptions(errs field.ErrorList) error {
	kind := "UpdateOptions"
	switch rq.info.Verb {
	case "create":
		kind = "CreateOptions"
	case "patch":
		kind = "PatchOptions"
	case "delete", "deletecollection":
		kind = "DeleteOptions"
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// nameValidator returns the name rule kube applies to a kind.
func nameValidator(sv *served) apivalidation.ValidateNameFunc {
	if sv.crd != nil {
		return validatePathSegmentName
	}
	switch sv.resource {
	case "namespaces":
		return apivalidation.NameIsDNSLabel
	case "services":
		return apivalidation.NameIsDNS1035Label
	case "roles", "clusterroles", "rolebindings", "clusterrolebindings", "nodes":
		return validatePathSegmentName
	}
	return apivalidation.NameIsDNSSubdomain
}

// validatePathSegmentName is the name rule of kinds whose names only need
// to be usable as one URL path segment.
func validatePathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// validateMeta checks metadata as kube's generic object-meta validation does.
func validateMeta(sv *served, obj *unstructured.Unstructured) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessor(obj, sv.namespaced, nameValidator(sv), field.NewPath("metadata"))
}

// prepareCreate sets the fields the server owns on a new object.
func prepareCreate(sv *served, obj *unstructured.Unstructured, now time.Time) error {
	// As kube's strategies: the object's metadata, then its content.
	if errs := append(validateMeta(sv, obj), validateKind(sv, obj, nil)...); len(errs) > 0 {
		return apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
	}
	obj.SetUID(types.UID(newUID()))
	obj.SetCreationTimestamp(metav1.NewTime(now))
	obj.SetResourceVersion("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	if sv.status && sv.resource != "nodes" {
		// Status is the server's (or a controller's) to write, through the
		// status subresource: a create starts from an empty one.
		if sv.crd != nil {
			delete(obj.Object, "status")
		} else {
			obj.Object["status"] = map[string]any{}
		}
	}
	if tracksGeneration(sv, obj) {
		obj.SetGeneration(1)
	} else {
		unstructured.RemoveNestedField(obj.Object, "metadata", "generation")
	}
	applyCreateDefaults(sv, obj)
	return nil
}

func newUID() string { return uuid.NewString() }

// tracksGeneration: custom resources always; built-in kinds that have a spec,
// except namespaces (whose spec only holds finalizers).
func tracksGeneration(sv *served, obj *unstructured.Unstructured) bool {
	if sv.crd != nil {
		return true
	}
	if sv.resource == "namespaces" || sv.resource == "nodes" || sv.resource == "services" {
		return false
	}
	_, ok := obj.Object["spec"]
	return ok
}

// applyCreateDefaults fills what kube's create strategies set beyond API
// defaulting (resources.Default, applied while decoding).
func applyCreateDefaults(sv *served, obj *unstructured.Unstructured) {
	switch sv.gr().String() {
	case "namespaces":
		if _, ok, _ := unstructured.NestedSlice(obj.Object, "spec", "finalizers"); !ok {
			_ = unstructured.SetNestedStringSlice(obj.Object, []string{"kubernetes"}, "spec", "finalizers")
		}
		_ = unstructured.SetNestedField(obj.Object, "Active", "status", "phase")
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["kubernetes.io/metadata.name"] = obj.GetName()
		obj.SetLabels(labels)
	case "pods":
		if _, ok, _ := unstructured.NestedString(obj.Object, "status", "phase"); !ok {
			_ = unstructured.SetNestedField(obj.Object, "Pending", "status", "phase")
		}
	}
}

// prepareUpdate carries the server-owned fields of cur into obj and applies
// the rules of the endpoint: the main resource cannot change status when a
// status subresource exists; the status subresource changes only status.
func prepareUpdate(sv *served, subresource string, obj, cur *unstructured.Unstructured) error {
	switch {
	case subresource == "status":
		next := cur.DeepCopy()
		if st, ok := obj.Object["status"]; ok {
			next.Object["status"] = st
		} else {
			delete(next.Object, "status")
		}
		metav1.ResetObjectMetaForStatus(next, cur)
		// The field manager's record of this write (apply.go), as kube's
		// status strategies keep it.
		if mf, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields"); ok {
			_ = unstructured.SetNestedField(next.Object, mf, "metadata", "managedFields")
		} else {
			unstructured.RemoveNestedField(next.Object, "metadata", "managedFields")
		}
		next.SetResourceVersion(obj.GetResourceVersion())
		*obj = *next
	case sv.status:
		if st, ok := cur.Object["status"]; ok {
			obj.Object["status"] = st
		} else {
			delete(obj.Object, "status")
		}
	}
	obj.SetUID(cur.GetUID())
	obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	obj.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	obj.SetSelfLink("")
	if obj.GetGenerateName() == "" {
		obj.SetGenerateName(cur.GetGenerateName())
	}
	errs := apivalidation.ValidateObjectMetaAccessorUpdate(obj, cur, field.NewPath("metadata"))
	errs = append(errs, validateMeta(sv, obj)...)
	if subresource != "status" {
		// The status subresource writes status only, which is not checked.
		errs = append(errs, validateKind(sv, obj, cur)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
	}
	if cur.GetDeletionTimestamp() != nil && len(newFinalizers(obj.GetFinalizers(), cur.GetFinalizers())) > 0 {
		errs := field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")}
		return apierrors.NewInvalid(sv.gvk().GroupKind(), obj.GetName(), errs)
	}
	if sv.resource == "namespaces" && sv.group == "" {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["kubernetes.io/metadata.name"] = obj.GetName()
		obj.SetLabels(labels)
	}
	// Generation moves when anything outside metadata and status changes.
	gen := cur.GetGeneration()
	if tracksGeneration(sv, obj) || gen != 0 {
		if gen == 0 {
			gen = 1
		}
		if !equalOutsideMetaAndStatus(obj, cur) {
			gen++
		}
		obj.SetGeneration(gen)
	}
	return nil
}

func newFinalizers(next, prev []string) []string {
	var out []string
	for _, f := range next {
		found := false
		for _, p := range prev {
			if p == f {
				found = true
				break
			}
		}
		if !found {
			out = append(out, f)
		}
	}
	return out
}

func equalOutsideMetaAndStatus(a, b *unstructured.Unstructured) bool {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
				out[k] = v
			}
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(strip(a.Object), strip(b.Object))
}

// sameObject reports whether two versions are equal but for resourceVersion
// (and managed fields timestamps, once those exist): such an update is a
// no-op and is not written.
func sameObject(a, b *unstructured.Unstructured) bool {
	ac, bc := a.DeepCopy(), b.DeepCopy()
	ac.SetResourceVersion("")
	bc.SetResourceVersion("")
	return reflect.DeepEqual(ac.Object, bc.Object)
}

// getObject reads and decodes one stored object.
func getObject(r store.Reader, k store.Key) (*store.Object, *unstructured.Unstructured, error) {
	obj, err := r.Get(k)
	if err != nil {
		return nil, nil, err
	}
	u, err := parseObject(obj.Data)
	if err != nil {
		return nil, nil, err
	}
	return obj, u, nil
}

// parseObject decodes stored JSON.
func parseObject(data []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("kubeapi: corrupt stored object: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fieldErrors is a one-error field.ErrorList for path (dotted) and value.
func fieldErrors(path string, value any, detail string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, detail)}
}

// protobufCodec decodes the protobuf bodies that client-go's typed clients
// (and so kubectl) send for built-in kinds.
var protobufCodec = protobuf.NewSerializer(protobufScheme, protobufScheme)

var protobufScheme = func() *runtime.Scheme {
	sch := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(sch))
	utilruntime.Must(apiextensionsv1.AddToScheme(sch))
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	return sch
}()

func protobufToJSON(b []byte) ([]byte, error) {
	obj, gvk, err := protobufCodec.Decode(b, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding protobuf request body: %v", err))
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return json.Marshal(obj)
}

// convertTyped applies what kube's conversion to its internal types does to
// a decoded object: a Secret's stringData is merged into data (winning over
// it) and never stored.
func convertTyped(obj runtime.Object) {
	if sec, ok := obj.(*corev1.Secret); ok && len(sec.StringData) > 0 {
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		for k, v := range sec.StringData {
			sec.Data[k] = []byte(v)
		}
		sec.StringData = nil
	}
}
