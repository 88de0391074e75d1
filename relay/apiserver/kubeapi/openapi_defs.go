package kubeapi

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	extopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"github.com/canopy-dev/canopy/relay/apiserver/resources"
)

// The OpenAPI models (definitions) of the built-in kinds.
//
// kube-apiserver serves models that openapi-gen generated from the source of
// the API types: their comments and markers. Only k8s.io/kubernetes ships
// them for every k8s.io/api type, and Canopy does not depend on it (its
// module graph and replace directives would come with it). The models are
// built instead, once per process, from what the modules Canopy already
// depends on carry:
//
//   - kube's own generated definitions where a module ships them:
//     apiextensions-apiserver's cover meta/v1 (ObjectMeta, Time, Status, the
//     options), runtime, resource.Quantity, version, autoscaling/v1 (Scale)
//     and apiextensions.k8s.io. These are exact.
//   - a type that states its own OpenAPI type (intstr.IntOrString) by its
//     OpenAPISchemaType, OpenAPISchemaFormat and OpenAPIV3OneOfTypes.
//   - every other type (all of k8s.io/api) by reflection over its Go type:
//     property names from the json tags, required when a field has no
//     omitempty, x-kubernetes-patch-strategy and -merge-key from the
//     patchStrategy and patchMergeKey tags (what kubectl's strategic merge
//     patch reads), descriptions from the type's SwaggerDoc (generated into
//     k8s.io/api from the same comments), and list and map types and unions
//     (x-kubernetes-list-type, -list-map-keys, -map-type, -unions) from the
//     structured-merge-diff schema client-go ships for apply configurations.
//
// What the Go types do not carry is missing: enum values, +default values,
// and +optional or +required markers that disagree with omitempty
// (docs/compat.md, "OpenAPI and kubectl explain").

// extGVK is the extension naming the kinds a model is the schema of.
const extGVK = "x-kubernetes-group-version-kind"

// openAPIScheme is the scheme of every Go type the server knows: model
// names and their x-kubernetes-group-version-kind come from it.
func openAPIScheme() *runtime.Scheme { return resources.Scheme() }

// apiregistrationPrefix is the canonical name prefix of Canopy's own copy of
// the apiregistration.k8s.io/v1 types; their models take kube-aggregator's
// names, as kube serves them.
const (
	apiregistrationPrefix = "github.com/canopy-dev/canopy/relay/apiserver/resources/internal/apiregistration."
	apiregistrationModel  = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1."
)

// canonicalName is the name kube-openapi's builders look models up by (the
// model name for every type that declares one, else package path and type
// name).
func canonicalName(t reflect.Type) string {
	return util.GetCanonicalTypeName(reflect.New(t).Interface())
}

// definitionNamer turns canonical names into model names and adds the
// x-kubernetes-group-version-kind extension of kinds, as kube-apiserver's
// definition namer does for its scheme.
type definitionNamer struct {
	gvks map[string][]any // canonical name -> []{group, version, kind}
}

var builtinNamer = sync.OnceValue(func() *definitionNamer {
	n := &definitionNamer{gvks: map[string][]any{}}
	scheme := openAPIScheme()
	kinds := scheme.AllKnownTypes()
	gvks := make([]schema.GroupVersionKind, 0, len(kinds))
	for gvk := range kinds {
		if gvk.Version != runtime.APIVersionInternal {
			gvks = append(gvks, gvk)
		}
	}
	sortGVKs(gvks)
	for _, gvk := range gvks {
		name := canonicalName(kinds[gvk])
		n.gvks[name] = append(n.gvks[name], map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
	}
	return n
})

func (n *definitionNamer) name(canonical string) (string, spec.Extensions) {
	model := canonical
	if rest, ok := strings.CutPrefix(canonical, apiregistrationPrefix); ok {
		model = apiregistrationModel + rest
	} else if strings.Contains(canonical, "/") {
		model = util.ToRESTFriendlyName(canonical)
	}
	if gvks, ok := n.gvks[canonical]; ok {
		return model, spec.Extensions{extGVK: gvks}
	}
	return model, nil
}

// builtinDefinitions is a common.GetOpenAPIDefinitions for the Go types of
// the built-in kinds served and of everything they reference. ref makes the
// reference to a model by canonical name (#/definitions/... in v2,
// #/components/schemas/... in v3).
func builtinDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	b := &defsBuilder{
		ref:   ref,
		known: extopenapi.GetOpenAPIDefinitions(ref),
		out:   map[string]common.OpenAPIDefinition{},
		smd:   builtinSMDSchema(),
	}
	for _, t := range builtinRootTypes() {
		b.add(t)
	}
	for name, def := range b.known {
		if _, ok := b.out[name]; !ok {
			b.out[name] = def
		}
	}
	return b.out
}

// builtinRootTypes are the Go types of the built-in kinds served, their
// lists and the kinds their subresources take.
func builtinRootTypes() []reflect.Type {
	scheme := openAPIScheme()
	var out []reflect.Type
	add := func(gvk schema.GroupVersionKind) {
		if obj, err := scheme.New(gvk); err == nil {
			out = append(out, reflect.TypeOf(obj).Elem())
		}
	}
	for _, info := range resources.Builtins() {
		gv := schema.GroupVersion{Group: info.Group, Version: info.Version}
		add(gv.WithKind(info.Kind))
		if info.ListKind != "" {
			add(gv.WithKind(info.ListKind))
		}
		for _, sub := range info.Subresources {
			if sub.Kind != "" {
				add(schema.GroupVersionKind{Group: sub.Group, Version: sub.Version, Kind: sub.Kind})
			}
		}
	}
	return out
}

// builtinSMDSchema is the structured-merge-diff schema of client-go's
// apply configurations (every k8s.io/api type, named as the models are).
var builtinSMDSchema = sync.OnceValue(func() *smdschema.Schema {
	cm := &corev1.ConfigMap{}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	tv, err := builtinTypeConverter(corev1.SchemeGroupVersion.WithKind("ConfigMap")).ObjectToTyped(cm)
	if err != nil {
		return &smdschema.Schema{}
	}
	return tv.Schema()
})

// defsBuilder derives models from Go types.
type defsBuilder struct {
	ref   common.ReferenceCallback
	known map[string]common.OpenAPIDefinition // kube's generated models
	out   map[string]common.OpenAPIDefinition
	smd   *smdschema.Schema
}

// add makes the model of the named struct type t (and of the types it
// references) unless kube's generated models have it, and returns its
// canonical name.
func (b *defsBuilder) add(t reflect.Type) string {
	name := canonicalName(t)
	if _, ok := b.known[name]; ok {
		return name
	}
	if _, ok := b.out[name]; ok {
		return name
	}
	if def, ok := customTypeDefinition(t); ok {
		b.out[name] = def
		return name
	}
	b.out[name] = common.OpenAPIDefinition{} // a cycle stops here
	s := spec.Schema{}
	s.Type = spec.StringOrArray{"object"}
	docs := swaggerDocs(t)
	s.Description = docs[""]
	deps := map[string]bool{}
	b.addFields(&s, t, deps)
	smdType, _ := b.smd.FindNamedType(name)
	if m := smdType.Map; m != nil {
		if m.ElementRelationship == smdschema.Atomic {
			s.AddExtension("x-kubernetes-map-type", "atomic")
		}
		if len(m.Unions) > 0 {
			s.AddExtension("x-kubernetes-unions", smdUnions(m.Unions))
		}
	}
	def := common.OpenAPIDefinition{Schema: s}
	for d := range deps {
		def.Dependencies = append(def.Dependencies, d)
	}
	b.out[name] = def
	return name
}

// addFields adds the properties of struct t to s, inlining embedded structs
// whose json name is empty (TypeMeta), as encoding/json does.
func (b *defsBuilder) addFields(s *spec.Schema, t reflect.Type, deps map[string]bool) {
	docs := swaggerDocs(t)
	smdType, _ := b.smd.FindNamedType(canonicalName(t))
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, hasTag := f.Tag.Lookup("json")
		jsonName, opts, _ := strings.Cut(tag, ",")
		if jsonName == "-" && opts == "" {
			continue
		}
		if f.Anonymous && hasTag && jsonName == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				b.addFields(s, ft, deps)
				continue
			}
		}
		if jsonName == "" {
			jsonName = f.Name
		}
		omitEmpty := hasOption(opts, "omitempty")
		prop := b.schemaFor(f.Type, deps)
		prop.Description = docs[jsonName]
		if def := enforcedDefault(f.Type, omitEmpty || hasOption(opts, "omitzero")); def != nil {
			prop.Default = def
		}
		if v := f.Tag.Get("patchStrategy"); v != "" {
			prop.AddExtension("x-kubernetes-patch-strategy", v)
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			prop.AddExtension("x-kubernetes-patch-merge-key", v)
		}
		if smdType.Map != nil {
			if sf, ok := smdType.Map.FindField(jsonName); ok {
				smdFieldExtensions(&prop, sf.Type)
			}
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[jsonName] = prop
		if !omitEmpty {
			s.Required = append(s.Required, jsonName)
		}
	}
}

// schemaFor is the schema of a value of Go type t: a reference for a named
// struct (or a type kube's models name), else an inline schema.
func (b *defsBuilder) schemaFor(t reflect.Type, deps map[string]bool) spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" && t.PkgPath() != "" {
		name := canonicalName(t)
		_, known := b.known[name]
		if _, custom := customTypeDefinition(t); known || custom || t.Kind() == reflect.Struct {
			if !known {
				b.add(t)
			}
			deps[name] = true
			return spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(name)}}
		}
	}
	var s spec.Schema
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s.Type, s.Format = spec.StringOrArray{"string"}, "byte"
			return s
		}
		item := b.schemaFor(t.Elem(), deps)
		s.Type = spec.StringOrArray{"array"}
		s.Items = &spec.SchemaOrArray{Schema: &item}
	case reflect.Map:
		item := b.schemaFor(t.Elem(), deps)
		s.Type = spec.StringOrArray{"object"}
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &item}
	case reflect.Struct, reflect.Interface:
		s.Type = spec.StringOrArray{"object"}
	default:
		typ, format := common.OpenAPITypeFormat(t.Kind().String())
		s.Type, s.Format = spec.StringOrArray{typ}, format
	}
	return s
}

// customTypeDefinition is the model of a type that states its own OpenAPI
// type (intstr.IntOrString, when kube's generated models lack it): its
// OpenAPISchemaType and OpenAPISchemaFormat, and in v3 the alternatives of
// its OpenAPIV3OneOfTypes, with the v2 form embedded as openapi-gen embeds
// it (the builders pick the form of their version).
func customTypeDefinition(t reflect.Type) (common.OpenAPIDefinition, bool) {
	v := reflect.New(t).Interface()
	typer, ok := v.(interface{ OpenAPISchemaType() []string })
	if !ok {
		return common.OpenAPIDefinition{}, false
	}
	var v2 spec.Schema
	v2.Type = typer.OpenAPISchemaType()
	if f, ok := v.(interface{ OpenAPISchemaFormat() string }); ok {
		v2.Format = f.OpenAPISchemaFormat()
	}
	oneOf, ok := v.(interface{ OpenAPIV3OneOfTypes() []string })
	if !ok {
		return common.OpenAPIDefinition{Schema: v2}, true
	}
	var v3 spec.Schema
	v3.Format = v2.Format
	for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
		v3.OneOf = append(v3.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
	}
	return common.EmbedOpenAPIDefinitionIntoV2Extension(common.OpenAPIDefinition{Schema: v3}, common.OpenAPIDefinition{Schema: v2}), true
}

// smdFieldExtensions marks a property with the list or map type its field
// has in the structured-merge-diff schema.
func smdFieldExtensions(prop *spec.Schema, tr smdschema.TypeRef) {
	if tr.ElementRelationship != nil && *tr.ElementRelationship == smdschema.Atomic {
		prop.AddExtension("x-kubernetes-map-type", "atomic")
		return
	}
	switch {
	case tr.Inlined.List != nil:
		l := tr.Inlined.List
		switch {
		case l.ElementRelationship == smdschema.Associative && len(l.Keys) > 0:
			prop.AddExtension("x-kubernetes-list-type", "map")
			keys := make([]any, len(l.Keys))
			for i, k := range l.Keys {
				keys[i] = k
			}
			prop.AddExtension("x-kubernetes-list-map-keys", keys)
		case l.ElementRelationship == smdschema.Associative:
			prop.AddExtension("x-kubernetes-list-type", "set")
		default:
			prop.AddExtension("x-kubernetes-list-type", "atomic")
		}
	case tr.Inlined.Map != nil && tr.Inlined.Map.ElementRelationship == smdschema.Atomic:
		prop.AddExtension("x-kubernetes-map-type", "atomic")
	}
}

// smdUnions states the unions of a struct as openapi-gen does.
func smdUnions(unions []smdschema.Union) []any {
	out := make([]any, len(unions))
	for i, u := range unions {
		fields := map[string]any{}
		for _, f := range u.Fields {
			fields[f.FieldName] = f.DiscriminatorValue
		}
		m := map[string]any{"fields-to-discriminateBy": fields}
		if u.Discriminator != nil {
			m["discriminator"] = *u.Discriminator
		}
		out[i] = m
	}
	return out
}

// enforcedDefault is the value encoding/json always writes for a field of
// type t (nil when it may leave the field out, or writes null): openapi-gen
// states it as the field's default.
func enforcedDefault(t reflect.Type, omitEmpty bool) any {
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return enforcedDefault(t.Field(0).Type, omitEmpty)
		}
		return map[string]any{}
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	}
	if omitEmpty {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	default:
		return 0
	}
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func hasOption(opts, name string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// swaggerDocs returns the SwaggerDoc of a type: its description under ""
// and its fields' by json name.
func swaggerDocs(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// sortGVKs sorts as kube-apiserver lists a model's kinds: by group, version
// and kind.
func sortGVKs(gvks []schema.GroupVersionKind) {
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Kind, b.Kind))
	})
}
