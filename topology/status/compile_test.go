package status

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// collector decodes a StatusCollector spec written in YAML.
func collector(t testing.TB, name, spec string) *v1alpha1.StatusCollector {
	t.Helper()
	sc := &v1alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sc.Spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	return sc
}

// mustCompile compiles a spec written in YAML.
func mustCompile(t testing.TB, name, spec string) *Collector {
	t.Helper()
	c, errs := Compile(collector(t, name, spec))
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs.ToAggregate())
	}
	return c
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name, spec string
		// want are the errors, each "TYPE PATH" and a part of the detail.
		want [][2]string
	}{
		{"syntax", `{groupBy: [{name: a, def: "1"}, {name: b, def: "obj.metadata.name +"}]}`,
			[][2]string{{"FieldValueInvalid spec.groupBy[1].def", "compilation failed: ERROR"}}},
		{"undeclared variable", `{select: [{name: a, def: "object.status"}]}`,
			[][2]string{{"FieldValueInvalid spec.select[0].def", "undeclared reference to 'object'"}}},
		{"filter not bool", `{filter: "obj.metadata.name + 'x'", combinedFields: [{name: "n", type: COUNT}]}`,
			[][2]string{{"FieldValueInvalid spec.filter", "must evaluate to a bool, not string"}}},
		{"filter int", `{filter: "size(associated)", combinedFields: [{name: "n", type: COUNT}]}`,
			[][2]string{{"FieldValueInvalid spec.filter", "must evaluate to a bool, not int"}}},
		{"sum of strings", `{combinedFields: [{name: s, type: SUM, subject: "destination.name + ''"}]}`,
			[][2]string{{"FieldValueInvalid spec.combinedFields[0].subject", "must evaluate to a number (int, uint or double), not string"}}},
		{"avg of bool", `{combinedFields: [{name: "n", type: COUNT}, {name: s, type: AVG, subject: "true"}]}`,
			[][2]string{{"FieldValueInvalid spec.combinedFields[1].subject", "must evaluate to a number (int, uint or double), not bool"}}},
		{"max of list", `{combinedFields: [{name: s, type: MAX, subject: "associated"}]}`,
			[][2]string{{"FieldValueInvalid spec.combinedFields[0].subject", "or a string, not list(map(string, dyn))"}}},
		{"min of bool", `{combinedFields: [{name: s, type: MIN, subject: "1 < 2"}]}`,
			[][2]string{{"FieldValueInvalid spec.combinedFields[0].subject", "or a string, not bool"}}},
		{"groupBy map", `{groupBy: [{name: g, def: "destination.labels"}, {name: h, def: "{'a': 1}"}]}`,
			[][2]string{{"FieldValueInvalid spec.groupBy[1].def", "must evaluate to a string, number, bool or null, not map(string, int)"}}},
		{"groupBy optional", `{groupBy: [{name: g, def: "obj.?status.?phase"}]}`,
			[][2]string{{"FieldValueInvalid spec.groupBy[0].def", "not optional_type(dyn)"}}},
		{"select list", `{select: [{name: a, def: "[1, 2]"}]}`,
			[][2]string{{"FieldValueInvalid spec.select[0].def", "not list(int)"}}},
		{"select timestamp", `{select: [{name: a, def: "timestamp('2024-01-01T00:00:00Z')"}]}`,
			[][2]string{{"FieldValueInvalid spec.select[0].def", "not google.protobuf.Timestamp"}}},
		{"sum without subject", `{combinedFields: [{name: s, type: SUM}]}`,
			[][2]string{{"FieldValueRequired spec.combinedFields[0].subject", "subject is required for SUM"}}},
		{"count with subject", `{combinedFields: [{name: "n", type: COUNT, subject: "1"}]}`,
			[][2]string{{"FieldValueForbidden spec.combinedFields[0].subject", "COUNT counts objects"}}},
		{"unknown aggregation", `{combinedFields: [{name: m, type: MEDIAN, subject: "1"}]}`,
			[][2]string{{"FieldValueNotSupported spec.combinedFields[0].type", `"COUNT"`}}},
		{"select with groupBy", `{select: [{name: a, def: "1"}], groupBy: [{name: b, def: "2"}]}`,
			[][2]string{{"FieldValueForbidden spec.select", "cannot be combined"}}},
		{"nothing to collect", `{filter: "true"}`,
			[][2]string{{"FieldValueRequired spec", "one of groupBy, combinedFields or select"}}},
		{"same column twice", `{groupBy: [{name: a, def: "1"}], combinedFields: [{name: a, type: COUNT}]}`,
			[][2]string{{"FieldValueDuplicate spec.combinedFields[0].name", ""}}},
		{"same select twice", `{select: [{name: a, def: "1"}, {name: a, def: "2"}]}`,
			[][2]string{{"FieldValueDuplicate spec.select[1].name", ""}}},
		{"empty name", `{select: [{name: "", def: "1"}]}`,
			[][2]string{{"FieldValueRequired spec.select[0].name", ""}}},
		{"empty def", `{groupBy: [{name: a, def: ""}]}`,
			[][2]string{{"FieldValueRequired spec.groupBy[0].def", ""}}},
		{"long def", `{groupBy: [{name: a, def: "` + strings.Repeat("1+", 2048) + `1"}]}`,
			[][2]string{{"FieldValueTooLong spec.groupBy[0].def", ""}}},
		{"limit too big", `{select: [{name: a, def: "1"}], limit: 1001}`,
			[][2]string{{"FieldValueInvalid spec.limit", "between 1 and 1000"}}},
		{"negative limit", `{select: [{name: a, def: "1"}], limit: -1}`,
			[][2]string{{"FieldValueInvalid spec.limit", "between 1 and 1000"}}},
		{"too many", `{select: [` + strings.Repeat(`{name: a, def: "1"}, `, 16) + `{name: a, def: "1"}]}`,
			[][2]string{{"FieldValueTooMany spec.select", ""}}},
		{"several at once", `{filter: "1", groupBy: [{name: g, def: "obj."}], combinedFields: [{name: s, type: SUM, subject: "'x'"}]}`,
			[][2]string{
				{"FieldValueInvalid spec.filter", "bool"},
				{"FieldValueInvalid spec.groupBy[0].def", "compilation failed"},
				{"FieldValueInvalid spec.combinedFields[0].subject", "number"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Compile(collector(t, "c", tc.spec))
			if c != nil {
				t.Fatal("compiled")
			}
			if tc.name == "too many" {
				errs = filterType(errs, field.ErrorTypeTooMany)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs.ToAggregate())
			}
			for i, w := range tc.want {
				got := string(errs[i].Type) + " " + errs[i].Field
				if got != w[0] || !strings.Contains(errs[i].Error(), w[1]) {
					t.Errorf("error %d: %s %q, want %s and a message containing %q", i, got, errs[i].Error(), w[0], w[1])
				}
			}
		})
	}
}

func filterType(errs field.ErrorList, typ field.ErrorType) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestCompileAccepts shows expressions of the shapes users write.
func TestCompileAccepts(t *testing.T) {
	for _, spec := range []string{
		`{combinedFields: [{name: count, type: COUNT}]}`,
		`{filter: "obj.kind == 'Deployment'", groupBy: [{name: zone, def: "destination.labels['zone']"}],
		  combinedFields: [{name: "n", type: COUNT}, {name: ready, type: SUM, subject: "obj.status.readyReplicas"},
		                   {name: avg, type: AVG, subject: "obj.?status.?readyReplicas.orValue(0)"},
		                   {name: oldest, type: MIN, subject: "obj.metadata.creationTimestamp"},
		                   {name: most, type: MAX, subject: "size(associated)"}]}`,
		`{groupBy: [{name: image, def: "obj.spec.template.spec.containers[0].image"}, {name: big, def: "obj.spec.replicas > 3"},
		            {name: none, def: "null"}, {name: u, def: "1u"}, {name: d, def: "1.5"}]}`,
		`{select: [{name: dest, def: "destination.name"}, {name: pods, def: "associated.filter(a, a.kind == 'Pod').size()"},
		           {name: restarts, def: "associated.filter(a, a.kind == 'Pod').map(p, p.status.containerStatuses[0].restartCount).sum()"},
		           {name: cpu, def: "quantity(obj.spec.template.spec.containers[0].resources.requests.cpu).asApproximateFloat()"},
		           {name: up, def: "obj.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')"},
		           {name: lower, def: "destination.name.lowerAscii()"}], limit: 1000}`,
	} {
		sc := collector(t, "c", spec)
		if _, errs := Compile(sc); len(errs) > 0 {
			t.Errorf("%s: %v", spec, errs.ToAggregate())
		}
	}
}

// TestValidate is the admission entry point: paths from the object's root.
func TestValidate(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector",
		"metadata": map[string]any{"name": "c"},
		"spec": map[string]any{"combinedFields": []any{
			map[string]any{"name": "n", "type": "COUNT"},
			map[string]any{"name": "s", "type": "SUM", "subject": "string(obj.metadata.name)"},
		}},
	}}
	errs := Validate(obj)
	if len(errs) != 1 || errs[0].Field != "spec.combinedFields[1].subject" || errs[0].Type != field.ErrorTypeInvalid {
		t.Fatalf("got %v", errs.ToAggregate())
	}
	unstructured.RemoveNestedField(obj.Object, "spec", "combinedFields")
	if err := unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"name": "a", "def": "obj.metadata.name"}}, "spec", "select"); err != nil {
		t.Fatal(err)
	}
	if errs := Validate(obj); len(errs) > 0 {
		t.Fatalf("refused: %v", errs.ToAggregate())
	}
	obj.Object["spec"] = "no"
	if errs := Validate(obj); len(errs) != 1 || errs[0].Field != "spec" {
		t.Fatalf("got %v", errs.ToAggregate())
	}
}

// TestVersion: the spec hash changes with the spec, not with the name,
// and the default limit is the explicit one.
func TestVersion(t *testing.T) {
	a := mustCompile(t, "a", `{combinedFields: [{name: "n", type: COUNT}]}`)
	b := mustCompile(t, "b", `{combinedFields: [{name: "n", type: COUNT}], limit: 20}`)
	c := mustCompile(t, "a", `{combinedFields: [{name: m, type: COUNT}]}`)
	if a.specHash != b.specHash || a.specHash == c.specHash || a.specHash == "" {
		t.Errorf("hashes %q %q %q", a.specHash, b.specHash, c.specHash)
	}
	if a.Limit() != v1alpha1.DefaultStatusCollectorLimit || a.Name() != "a" {
		t.Errorf("limit %d name %q", a.Limit(), a.Name())
	}
}
