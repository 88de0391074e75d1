package crd

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

var metadataPath = field.NewPath("metadata")

// Prepare makes a custom resource of this version ready to store, as
// kube-apiserver's decoder and custom resource strategy do on create (old ==
// nil) and update. It modifies obj in place:
//
//  1. apiVersion and kind must be this version's; if not, that is the only
//     error.
//  2. Fields the schema does not know are pruned (everywhere except under
//     x-kubernetes-preserve-unknown-fields), unknown metadata fields dropped
//     and nulls without defaults in non-nullable fields removed. The pruned
//     paths ("spec.colour", "metadata.bogus") are returned in pruned so the
//     server can implement fieldValidation=Strict (400 with `unknown field
//     "spec.colour"`) and Warn.
//  3. Defaults from the structural schema are applied.
//  4. The object is validated: metadata (name as a DNS subdomain and a valid
//     path segment, namespace iff the resource is namespaced, labels, ...;
//     on update, immutable fields and a set resourceVersion), the OpenAPI
//     schema, list-type invariants, the scale subresource's replica paths,
//     embedded resources and the x-kubernetes-validations CEL rules, with
//     kube's ratcheting of unchanged fields on update.
//
// The server does the rest of what the strategy and rest.BeforeCreate/Update
// do, before calling Prepare: generate the name, set uid and
// creationTimestamp on create, keep them and the generation from old on
// update, carry resourceVersion into patches, and, when Status is set, drop
// .status on create and keep old's on update. obj must be decoded as kube
// decodes unstructured JSON, integers as int64
// (unstructured.Unstructured.UnmarshalJSON does).
//
// Malformed metadata (kube fails the decode with 400 Bad Request) comes back
// as a field error on metadata.
func (v *Version) Prepare(obj, old *unstructured.Unstructured) (pruned []string, errs field.ErrorList) {
	if pruned, errs = v.decode(obj); len(errs) > 0 {
		return nil, errs
	}
	if old == nil {
		return pruned, v.validateCreate(obj)
	}
	return pruned, v.validateUpdate(obj, old)
}

// PrepareStatus is Prepare for an update through the status subresource,
// which exists only when Status is set; old must not be nil. As in kube, the
// OpenAPI schema is checked against .status only, the scale spec path is not
// checked and list-type errors are ratcheted as a whole. The server first
// replaces everything but .status (and metadata.managedFields) with old's.
func (v *Version) PrepareStatus(obj, old *unstructured.Unstructured) (pruned []string, errs field.ErrorList) {
	if pruned, errs = v.decode(obj); len(errs) > 0 {
		return nil, errs
	}
	return pruned, v.validateStatusUpdate(obj, old)
}

// decode checks obj's apiVersion and kind (kube's CR strategy does so
// first), then does what kube's CR decoder does after reading JSON: coerce
// and prune, then default.
func (v *Version) decode(obj *unstructured.Unstructured) ([]string, field.ErrorList) {
	if errs := v.validateTypeMeta(obj); len(errs) > 0 {
		return nil, errs
	}
	pruned, err := v.coerce(obj)
	if err != nil {
		return nil, field.ErrorList{err}
	}
	structuraldefaulting.Default(obj.Object, v.schema)
	return pruned, nil
}

// validateTypeMeta is the CR validator's ValidateTypeMeta.
func (v *Version) validateTypeMeta(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if kind := obj.GetKind(); kind != v.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+v.kind))
	}
	if apiVersion := obj.GetAPIVersion(); apiVersion != v.apiVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+v.apiVersion))
	}
	return errs
}

// coerce is what the CR handler's decoder does after JSON decoding
// (unstructuredSchemaCoercer.apply, tracking unknown fields): it decodes
// metadata strictly, prunes, drops non-nullable nulls, coerces embedded
// ObjectMeta and writes the normalized metadata back.
func (v *Version) coerce(obj *unstructured.Unstructured) ([]string, *field.Error) {
	meta, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, field.Invalid(metadataPath, obj.Object["metadata"], err.Error())
	}
	unknown = append(unknown, pruning.PruneWithOptions(obj.Object, v.schema, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, v.schema)
	ferr, embedded := schemaobjectmeta.CoerceWithOptions(nil, obj.Object, v.schema, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, embedded...)
	if found {
		if err := schemaobjectmeta.SetObjectMeta(obj.Object, meta); err != nil {
			return nil, field.InternalError(metadataPath, err)
		}
	}
	return unknown, nil
}

// validateCreate is rest.ValidateCreate with the CR strategy's Validate.
func (v *Version) validateCreate(obj *unstructured.Unstructured) field.ErrorList {
	ctx := context.Background()
	meta, errs := objectMeta(obj)
	if len(errs) == 0 {
		errs = metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, v.namespaced,
			metavalidation.NameIsDNSSubdomain, metadataPath, declarativeBeta())
	}
	errs = append(errs, schemavalidation.ValidateCustomResource(nil, obj.Object, v.validator)...)
	errs = append(errs, v.validateScaleSpec(obj)...)
	errs = append(errs, v.validateScaleStatus(obj)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, v.schema, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.schema, obj.Object)...)
	errs = append(errs, v.validateRules(ctx, errs, obj, nil, nil)...)
	if len(errs) > 0 {
		return errs
	}
	// Once the strategy is content, the generic registry checks the name
	// can be a path segment.
	return metavalidation.ValidateObjectMetaAccessor(obj, v.namespaced, pathSegment, metadataPath)
}

// validateUpdate is rest.ValidateUpdate with the CR strategy's
// ValidateUpdate.
func (v *Version) validateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	ctx := context.Background()
	correlated := common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: v.schema})

	errs := v.validateMetaUpdate(ctx, obj, old)
	errs = append(errs, schemavalidation.ValidateCustomResourceUpdate(nil, obj.Object, old.Object, v.validator,
		schemavalidation.WithRatcheting(correlated))...)
	errs = append(errs, v.validateScaleSpec(obj)...)
	errs = append(errs, v.validateScaleStatus(obj)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, v.schema, false)...)
	if len(listtype.ValidateListSetsAndMaps(nil, v.schema, old.Object)) == 0 {
		errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.schema, obj.Object)...)
	}
	return append(errs, v.validateRules(ctx, errs, obj, old, correlated)...)
}

// validateStatusUpdate is rest.ValidateUpdate with the CR status strategy's
// ValidateUpdate.
func (v *Version) validateStatusUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	ctx := context.Background()
	correlated := common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: v.schema})

	errs := v.validateMetaUpdate(ctx, obj, old)
	if status, ok := obj.Object["status"]; ok {
		errs = append(errs, schemavalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, old.Object["status"],
			v.statusValidator, schemavalidation.WithRatcheting(correlated.Key("status")))...)
	}
	errs = append(errs, v.validateScaleStatus(obj)...)
	if newErrs := listtype.ValidateListSetsAndMaps(nil, v.schema, obj.Object); len(newErrs) > 0 &&
		len(listtype.ValidateListSetsAndMaps(nil, v.schema, old.Object)) == 0 {
		errs = append(errs, newErrs...)
	}
	return append(errs, v.validateRules(ctx, errs, obj, old, correlated)...)
}

// validateMetaUpdate is the metadata validation of an update: the generic
// registry's common checks, then the CR validator's. Both check labels,
// annotations, immutable fields and so on; kube repeats such errors in the
// causes of its response (only its message is deduplicated), here each is
// reported once.
func (v *Version) validateMetaUpdate(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	errs := metavalidation.ValidateObjectMetaAccessor(obj, v.namespaced, pathSegment, metadataPath)
	errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, metadataPath)...)
	meta, metaErrs := objectMeta(obj)
	oldMeta, oldMetaErrs := objectMeta(old)
	if len(metaErrs)+len(oldMetaErrs) > 0 {
		errs = append(append(errs, metaErrs...), oldMetaErrs...)
	} else {
		errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, meta, oldMeta, v.namespaced,
			nil, metadataPath, declarativeBeta())...)
	}
	seen := make(map[string]bool, len(errs))
	return slices.DeleteFunc(errs, func(err *field.Error) bool {
		s := err.Error()
		dup := seen[s]
		seen[s] = true
		return dup
	})
}

// validateRules evaluates the x-kubernetes-validations rules unless errs
// already holds an error that makes them meaningless, as the CR strategy
// does. correlated is nil on create.
func (v *Version) validateRules(ctx context.Context, errs field.ErrorList, obj, old *unstructured.Unstructured, correlated *common.CorrelatedObject) field.ErrorList {
	if v.rules == nil {
		return nil
	}
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj any
	var opts []cel.Option
	if old != nil {
		oldObj = old.Object
		opts = append(opts, cel.WithRatcheting(correlated))
	}
	ruleErrs, _ := v.rules.Validate(ctx, nil, v.schema, obj.Object, oldObj, celconfig.RuntimeCELCostBudget, opts...)
	return ruleErrs
}

// validateScaleSpec is the CR validator's ValidateScaleSpec.
func (v *Version) validateScaleSpec(obj *unstructured.Unstructured) field.ErrorList {
	if v.Scale == nil {
		return nil
	}
	return validateReplicas(obj, v.Scale.SpecReplicasPath)
}

// validateScaleStatus is the CR validator's ValidateScaleStatus.
func (v *Version) validateScaleStatus(obj *unstructured.Unstructured) field.ErrorList {
	if v.Scale == nil {
		return nil
	}
	errs := validateReplicas(obj, v.Scale.StatusReplicasPath)
	if p := v.Scale.LabelSelectorPath; p != "" {
		selector, _, err := unstructured.NestedString(obj.Object, splitPath(p)...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(p), selector, err.Error()))
		}
	}
	return errs
}

// validateReplicas checks the replica count at path, if set, is a
// non-negative int32. As in kube, the error's path is the CRD's path string.
func validateReplicas(obj *unstructured.Unstructured, path string) field.ErrorList {
	n, _, err := unstructured.NestedInt64(obj.Object, splitPath(path)...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), n, err.Error())}
	case n < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), n, "should be a non-negative integer")}
	case n > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// splitPath turns a scale path (".spec.replicas") into fields.
func splitPath(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "."), ".")
}

// objectMeta decodes obj's metadata as the CR validator's getObjectMeta does.
func objectMeta(obj *unstructured.Unstructured) (*metav1.ObjectMeta, field.ErrorList) {
	raw, ok := obj.Object["metadata"]
	if !ok || raw == nil {
		return &metav1.ObjectMeta{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(metadataPath, raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	meta := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
		return nil, field.ErrorList{field.Invalid(metadataPath, raw, err.Error())}
	}
	return meta, nil
}

// pathSegment is the generic registry's name check: the name must be usable
// as one segment of a URL path.
func pathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

func declarativeBeta() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta)
}
