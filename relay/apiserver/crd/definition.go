package crd

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Definition is a compiled CRD: everything the server needs to serve its
// resource. It is immutable.
type Definition struct {
	Group    string
	Resource string // plural
	Singular string
	Kind     string
	ListKind string

	ShortNames []string
	Categories []string
	Namespaced bool

	// Versions are the served versions in kube's priority order, the order
	// discovery lists them in (version.CompareKubeAwareVersionStrings, highest
	// first).
	Versions []*Version
	// StorageVersion is the version whose storage flag is set; it may be
	// unserved, in which case it is not in Versions.
	StorageVersion string
	// UID is the CRD's metadata.uid.
	UID string
}

// Version returns the served version named name, or nil.
func (d *Definition) Version(name string) *Version {
	for _, v := range d.Versions {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Version is one compiled, served version of a CRD. It is immutable.
type Version struct {
	Name    string
	Served  bool // always true: only served versions are compiled
	Storage bool

	// Status is set when the status subresource is enabled.
	Status bool
	// Scale is non-nil when the scale subresource is enabled.
	Scale *ScaleInfo
	// Table renders the version's additionalPrinterColumns (by default NAME
	// and AGE, as kube does for CRDs).
	Table TableConvertor

	apiVersion string // group/version
	kind       string
	namespaced bool

	// schema is the structural schema with defaults pruned, as the CR
	// handler keeps it for pruning, defaulting and embedded metadata.
	schema *structuralschema.Structural
	// validator checks the whole object against the OpenAPI schema;
	// statusValidator only .status, for the status subresource (nil when the
	// schema has no status property).
	validator       schemavalidation.SchemaValidator
	statusValidator schemavalidation.SchemaValidator
	// rules evaluates x-kubernetes-validations; nil when there are none.
	rules *cel.Validator
}

// ScaleInfo is a version's scale subresource, with the paths as written in
// the CRD (".spec.replicas"). LabelSelectorPath is empty when unset.
type ScaleInfo struct {
	SpecReplicasPath   string
	StatusReplicasPath string
	LabelSelectorPath  string
}

// Default applies kube's defaulting for a v1 CRD object, as the API server
// does when it decodes one: the SetDefaults_* funcs of apiextensions v1 that
// the scheme registers (singular and listKind from kind, conversion strategy
// None, webhook port 443, storedVersions from the storage version).
func Default(crd *apiextensionsv1.CustomResourceDefinition) {
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
}

// Compile validates a CRD exactly as kube-apiserver does on create (old ==
// nil) or update (ValidateCustomResourceDefinition or
// ValidateCustomResourceDefinitionUpdate) and compiles it. Call Default
// first, as decoding does in kube.
//
// As kube's CRD strategy does before validating, the status is not taken
// from crd: it is cleared on create and taken from old on update, then the
// storage version is added to storedVersions. On update, crd must carry the
// metadata the server keeps from old (uid, creationTimestamp, generation,
// resourceVersion), as rest.BeforeUpdate arranges, or metadata validation
// fails as it would in kube.
//
// At start-up, compile every stored CRD with old == nil.
//
// The Definition's names are spec.names. kube serves status.acceptedNames,
// which Established makes equal to them once CheckNames accepted them.
//
// The errors are the field errors kube puts in its 422 Invalid response.
// crd and old are not modified.
func Compile(crd, old *apiextensionsv1.CustomResourceDefinition) (*Definition, field.ErrorList) {
	// Conversion to the internal types and the compiled schemas share
	// memory with their input.
	crd = crd.DeepCopy()
	if errs := validateDefinition(crd, old); len(errs) > 0 {
		return nil, errs
	}

	names := crd.Spec.Names
	d := &Definition{
		Group:      crd.Spec.Group,
		Resource:   names.Plural,
		Singular:   names.Singular,
		Kind:       names.Kind,
		ListKind:   names.ListKind,
		ShortNames: slices.Clone(names.ShortNames),
		Categories: slices.Clone(names.Categories),
		Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		UID:        string(crd.UID),
	}
	versionsPath := field.NewPath("spec", "versions")
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Storage {
			d.StorageVersion = v.Name
		}
		if !v.Served {
			continue
		}
		cv, err := compileVersion(d, v)
		if err != nil {
			// Validation admits no schema that fails here.
			return nil, field.ErrorList{field.InternalError(versionsPath.Index(i), err)}
		}
		d.Versions = append(d.Versions, cv)
	}
	slices.SortStableFunc(d.Versions, func(a, b *Version) int {
		return -version.CompareKubeAwareVersionStrings(a.Name, b.Name)
	})
	return d, nil
}

// validateDefinition runs kube's CRD validation on the internal form of crd,
// with the status the CRD strategy's PrepareForCreate or PrepareForUpdate
// would leave.
func validateDefinition(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	ctx := context.Background()
	in, err := toInternal(crd)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if old == nil {
		in.Status = apiextensions.CustomResourceDefinitionStatus{}
		addStorageVersion(in)
		return crdvalidation.ValidateCustomResourceDefinition(ctx, in)
	}
	oldIn, err := toInternal(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("old CustomResourceDefinition: %w", err))}
	}
	in.Status = *oldIn.Status.DeepCopy()
	addStorageVersion(in)
	return crdvalidation.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
}

// toInternal converts crd to the internal types kube validates. The result
// may share memory with crd.
func toInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil)
	return out, err
}

// addStorageVersion appends the storage version to status.storedVersions
// unless present, as the CRD strategy does on create and update.
func addStorageVersion(crd *apiextensions.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !apiextensions.IsStoredVersion(crd, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

// compileVersion builds what kube's CR handler builds per version
// (getOrCreateServingInfoFor): the structural schema with pruned defaults,
// the OpenAPI validators, the CEL validator, subresources and the table.
func compileVersion(d *Definition, v *apiextensionsv1.CustomResourceDefinitionVersion) (*Version, error) {
	out := &Version{
		Name:       v.Name,
		Served:     v.Served,
		Storage:    v.Storage,
		Table:      newTable(v.AdditionalPrinterColumns),
		apiVersion: d.Group + "/" + v.Name,
		kind:       d.Kind,
		namespaced: d.Namespaced,
	}
	if sub := v.Subresources; sub != nil {
		out.Status = sub.Status != nil
		if sc := sub.Scale; sc != nil {
			out.Scale = &ScaleInfo{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
			if sc.LabelSelectorPath != nil {
				out.Scale.LabelSelectorPath = *sc.LabelSelectorPath
			}
		}
	}

	// Validation requires a schema for every version of a v1 CRD.
	validation := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, validation, nil); err != nil {
		return nil, err
	}
	props := validation.OpenAPIV3Schema
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, err
	}
	// NewStructural shares defaults with props; PruneDefaults changes them.
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, err
	}
	out.schema = s
	out.rules = cel.NewValidator(s, true, celconfig.PerCallLimit)

	if out.validator, _, err = schemavalidation.NewSchemaValidator(props); err != nil {
		return nil, err
	}
	if status, ok := props.Properties["status"]; ok && out.Status {
		if out.statusValidator, _, err = schemavalidation.NewSchemaValidator(&status); err != nil {
			return nil, err
		}
	}
	return out, nil
}
