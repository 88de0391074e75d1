package crd

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// widgetsYAML is a namespaced CRD with three served versions listed out of
// priority order and one unserved version. v1 is the storage version and
// has the full set of features.
const widgetsYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.canopy.dev
  uid: 6f1c1e0e-0000-4000-8000-000000000001
spec:
  group: example.canopy.dev
  scope: Namespaced
  names:
    plural: widgets
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  - name: v2alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: "self.size <= 100 || self.colour == 'red'"
              message: big widgets must be red
            properties:
              size: {type: integer, minimum: 1}
              colour: {type: string, enum: [red, green, blue], default: red}
              replicas: {type: integer, default: 1}
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              phase: {type: string}
              lastUpdated: {type: string, format: date-time}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Colour, type: string, jsonPath: .spec.colour}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Updated, type: date, jsonPath: .status.lastUpdated}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`

// gadgetsYAML is a cluster-scoped CRD in the same group, without printer
// columns.
const gadgetsYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.canopy.dev
spec:
  group: example.canopy.dev
  scope: Cluster
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

func crdFrom(t *testing.T, doc string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
		t.Fatalf("decoding CRD: %v", err)
	}
	Default(crd)
	return crd
}

// objectFrom decodes YAML as the server decodes JSON: integers as int64.
func objectFrom(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func compile(t *testing.T, doc string) *Definition {
	t.Helper()
	d, errs := Compile(crdFrom(t, doc), nil)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	return d
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// matches reports whether an error string matches a pattern in which each
// "*" stands for any text.
func matches(got, pattern string) bool {
	re := strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, `.*`)
	return regexp.MustCompile("^" + re + "$").MatchString(got)
}

// requireErrors checks that errs are the wanted error patterns (see
// matches), in any order, each once.
func requireErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errStrings(errs)
	if len(got) != len(want) {
		t.Errorf("got %d errors, want %d:\n  %s", len(got), len(want), strings.Join(got, "\n  "))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return matches(g, w) }) {
			t.Errorf("missing error %q", w)
		}
	}
	for _, g := range got {
		if !slices.ContainsFunc(want, func(w string) bool { return matches(g, w) }) {
			t.Errorf("unexpected error %q", g)
		}
	}
}

func TestDefault(t *testing.T) {
	crd := crdFrom(t, gadgetsYAML)
	crd.Spec.Names.Singular, crd.Spec.Names.ListKind, crd.Spec.Conversion, crd.Status.StoredVersions = "", "", nil, nil
	Default(crd)
	n := crd.Spec.Names
	if n.Singular != "gadget" || n.ListKind != "GadgetList" {
		t.Errorf("names = %+v", n)
	}
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion = %+v", crd.Spec.Conversion)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions = %v", crd.Status.StoredVersions)
	}
}

func TestCompile(t *testing.T) {
	d := compile(t, widgetsYAML)
	if d.Group != "example.canopy.dev" || d.Resource != "widgets" || d.Singular != "widget" ||
		d.Kind != "Widget" || d.ListKind != "WidgetList" || !d.Namespaced ||
		d.StorageVersion != "v1" || d.UID != "6f1c1e0e-0000-4000-8000-000000000001" {
		t.Errorf("definition = %+v", d)
	}
	if !slices.Equal(d.ShortNames, []string{"wd"}) || !slices.Equal(d.Categories, []string{"all"}) {
		t.Errorf("shortNames %v, categories %v", d.ShortNames, d.Categories)
	}
	var names []string
	for _, v := range d.Versions {
		names = append(names, v.Name)
	}
	if want := []string{"v1", "v1beta1", "v2alpha1"}; !slices.Equal(names, want) {
		t.Errorf("versions = %v, want %v (kube priority, served only)", names, want)
	}
	if d.Version("v1alpha1") != nil {
		t.Error("unserved version v1alpha1 compiled")
	}

	v1 := d.Version("v1")
	if !v1.Served || !v1.Storage || !v1.Status {
		t.Errorf("v1 = served %v storage %v status %v", v1.Served, v1.Storage, v1.Status)
	}
	wantScale := ScaleInfo{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ".status.selector"}
	if v1.Scale == nil || *v1.Scale != wantScale {
		t.Errorf("v1 scale = %+v", v1.Scale)
	}
	beta := d.Version("v1beta1")
	if beta.Storage || beta.Status || beta.Scale != nil {
		t.Errorf("v1beta1 = storage %v status %v scale %v", beta.Storage, beta.Status, beta.Scale)
	}

	// The Definition does not depend on the CRD object after Compile.
	crd := crdFrom(t, widgetsYAML)
	d, _ = Compile(crd, nil)
	crd.Spec.Versions[3].Schema.OpenAPIV3Schema.Properties["spec"].Required[0] = "colour"
	_, errs := d.Version("v1").Prepare(objectFrom(t, "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {colour: red}"), nil)
	requireErrors(t, errs, []string{`spec.size: Required value`, rulesNotChecked})

	g := compile(t, gadgetsYAML)
	if g.Namespaced || len(g.Versions) != 1 || g.Versions[0].Name != "v1" {
		t.Errorf("gadgets = %+v", g)
	}
}

func TestCompileInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(*apiextensionsv1.CustomResourceDefinition)
		want []string
	}{{
		name: "missing names",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{}
		},
		want: []string{
			`metadata.name: Invalid value: "gadgets.example.canopy.dev": must be spec.names.plural+"."+spec.group`,
			`spec.names.plural: Required value`,
			`spec.names.singular: Required value`,
			`spec.names.kind: Required value`,
			`spec.names.listKind: Required value`,
		},
	}, {
		name: "no storage version",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Storage = false
		},
		want: []string{
			`spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":false,*}]: must have exactly one version marked as storage version`,
			`status.storedVersions: Invalid value: null: must have at least one stored version`,
		},
	}, {
		name: "two storage versions",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *c.Spec.Versions[0].DeepCopy()
			v2.Name = "v2"
			c.Spec.Versions = append(c.Spec.Versions, v2)
		},
		want: []string{
			`spec.versions: Invalid value: [{"Name":"v1",*{"Name":"v2",*}]: must have exactly one version marked as storage version`,
			`status.storedVersions: Invalid value: ["v1"]: must have the storage version v2`,
		},
	}, {
		name: "non-structural schema",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Type = ""
			spec.Properties = map[string]apiextensionsv1.JSONSchemaProps{"size": {Minimum: new(1.0)}}
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		},
		want: []string{
			`spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields`,
		},
	}, {
		name: "invalid group",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Name = "gadgets.example"
			c.Spec.Group = "example"
		},
		want: []string{`spec.group: Invalid value: "example": should be a domain with at least one dot`},
	}, {
		name: "preserveUnknownFields",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.PreserveUnknownFields = true
		},
		want: []string{`spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := crdFrom(t, gadgetsYAML)
			tt.edit(crd)
			d, errs := Compile(crd, nil)
			if d != nil {
				t.Error("got a Definition for an invalid CRD")
			}
			requireErrors(t, errs, tt.want)
		})
	}
}

func TestCompileUpdate(t *testing.T) {
	old := crdFrom(t, widgetsYAML)
	old.ResourceVersion, old.Generation = "7", 1
	Established(old, metav1.Now())

	ok := old.DeepCopy()
	ok.Spec.Versions[3].AdditionalPrinterColumns = nil
	if _, errs := Compile(ok, old); len(errs) > 0 {
		t.Errorf("valid update: %v", errs)
	}

	tests := []struct {
		name string
		edit func(*apiextensionsv1.CustomResourceDefinition)
		want []string
	}{{
		name: "scope is immutable",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped },
		want: []string{`spec.scope: Invalid value: "Cluster": field is immutable`},
	}, {
		name: "stored version removed",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[2].Storage = true
			c.Spec.Versions = c.Spec.Versions[:3]
		},
		want: []string{`status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions`},
	}, {
		name: "resourceVersion required",
		edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.ResourceVersion = "" },
		want: []string{`metadata.resourceVersion: Invalid value: "": must be specified for an update`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := old.DeepCopy()
			crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{} // the old status is what counts
			tt.edit(crd)
			_, errs := Compile(crd, old)
			requireErrors(t, errs, tt.want)
		})
	}
}

func TestCheckNames(t *testing.T) {
	widgets := crdFrom(t, widgetsYAML)
	established := func(doc string, edit func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
		c := crdFrom(t, doc)
		edit(c)
		Default(c)
		Established(c, metav1.Now())
		return c
	}
	gadgets := established(gadgetsYAML, func(*apiextensionsv1.CustomResourceDefinition) {})

	tests := []struct {
		name                string
		others              []*apiextensionsv1.CustomResourceDefinition
		accepted            bool
		wantReason, wantMsg string
	}{{
		name:     "no others",
		accepted: true, wantReason: "NoConflicts", wantMsg: "no conflicts found",
	}, {
		name:     "no conflict",
		others:   []*apiextensionsv1.CustomResourceDefinition{gadgets},
		accepted: true, wantReason: "NoConflicts", wantMsg: "no conflicts found",
	}, {
		name:     "itself is skipped",
		others:   []*apiextensionsv1.CustomResourceDefinition{established(widgetsYAML, func(*apiextensionsv1.CustomResourceDefinition) {})},
		accepted: true, wantReason: "NoConflicts", wantMsg: "no conflicts found",
	}, {
		name: "singular taken by a short name",
		others: []*apiextensionsv1.CustomResourceDefinition{established(gadgetsYAML, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.ShortNames = []string{"widget"}
		})},
		wantReason: "SingularConflict", wantMsg: `"widget" is already in use`,
	}, {
		name: "short names taken",
		others: []*apiextensionsv1.CustomResourceDefinition{established(gadgetsYAML, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.ShortNames = []string{"wd"}
		})},
		wantReason: "ShortNamesConflict", wantMsg: `"wd" is already in use`,
	}, {
		name: "last conflict wins",
		others: []*apiextensionsv1.CustomResourceDefinition{established(gadgetsYAML, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.ShortNames = []string{"wd"}
			c.Spec.Names.Kind, c.Spec.Names.ListKind = "Widget", "WidgetList"
		})},
		wantReason: "ListKindConflict", wantMsg: `"WidgetList" is already in use`,
	}, {
		name: "other group",
		others: []*apiextensionsv1.CustomResourceDefinition{established(gadgetsYAML, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "other.canopy.dev"
			c.Spec.Names.Kind, c.Spec.Names.ListKind = "Widget", "WidgetList"
		})},
		accepted: true, wantReason: "NoConflicts", wantMsg: "no conflicts found",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accepted, reason, msg := CheckNames(widgets, tt.others)
			if accepted != tt.accepted || reason != tt.wantReason || msg != tt.wantMsg {
				t.Errorf("CheckNames = %v, %q, %q; want %v, %q, %q", accepted, reason, msg, tt.accepted, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

func TestEstablished(t *testing.T) {
	crd := crdFrom(t, widgetsYAML)
	crd.Status.StoredVersions = []string{"v1beta1"}
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	Established(crd, t0)

	if crd.Status.AcceptedNames.Plural != "widgets" || crd.Status.AcceptedNames.ListKind != "WidgetList" {
		t.Errorf("acceptedNames = %+v", crd.Status.AcceptedNames)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1", "v1"}) {
		t.Errorf("storedVersions = %v", crd.Status.StoredVersions)
	}
	want := []apiextensionsv1.CustomResourceDefinitionCondition{
		{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: t0, Reason: "NoConflicts", Message: "no conflicts found"},
		{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: t0, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"},
	}
	if !slices.EqualFunc(crd.Status.Conditions, want, func(a, b apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.LastTransitionTime.Equal(&b.LastTransitionTime) && a.Reason == b.Reason && a.Message == b.Message
	}) {
		t.Errorf("conditions = %+v", crd.Status.Conditions)
	}

	// A later call keeps the transition times of conditions already True.
	Established(crd, metav1.NewTime(t0.Add(time.Hour)))
	for _, c := range crd.Status.Conditions {
		if !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("%s moved to %v", c.Type, c.LastTransitionTime)
		}
	}
	if len(crd.Status.Conditions) != 2 || len(crd.Status.StoredVersions) != 2 {
		t.Errorf("status grew: %+v", crd.Status)
	}
}
