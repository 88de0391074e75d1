package crd

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rulesNotChecked is the error kube adds instead of evaluating
// x-kubernetes-validations on an object with structural errors.
const rulesNotChecked = `<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`

// widget is a valid v1 Widget as a client sends it.
const widget = `
apiVersion: example.canopy.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: default
  uid: 0b3e6f1a-0000-4000-8000-000000000002
  creationTimestamp: "2026-01-02T03:04:05Z"
spec:
  size: 3
  replicas: 2
`

func TestPrepareCreate(t *testing.T) {
	d := compile(t, widgetsYAML)
	tests := []struct {
		name       string
		version    string
		obj        string
		wantPruned []string
		wantErrs   []string
		// wantSpec is compared with the prepared object's spec when set.
		wantSpec map[string]any
	}{{
		name: "defaults",
		obj:  widget,
		wantSpec: map[string]any{
			"size": int64(3), "replicas": int64(2), "colour": "red",
		},
	}, {
		name: "prunes unknown fields, keeps preserved ones",
		obj: widget + `
  bogus: 1
  config: {anything: {goes: [1, 2]}}
  ports: [{name: http, port: 80, protocol: TCP}]
extra: true
`,
		wantPruned: []string{"extra", "spec.bogus", "spec.ports[0].protocol"},
		wantSpec: map[string]any{
			"size": int64(3), "replicas": int64(2), "colour": "red",
			"config": map[string]any{"anything": map[string]any{"goes": []any{int64(1), int64(2)}}},
			"ports":  []any{map[string]any{"name": "http", "port": int64(80)}},
		},
	}, {
		name: "unknown metadata fields",
		obj: `
apiVersion: example.canopy.dev/v1
kind: Widget
metadata: {name: w1, namespace: default, colour: blue}
spec: {size: 1}
`,
		wantPruned: []string{"metadata.colour"},
	}, {
		name: "embedded resource",
		obj: widget + `
  template:
    kind: ConfigMap
    metadata: {name: a/b, colour: blue}
    data: {a: b}
`,
		wantPruned: []string{"spec.template.metadata.colour"},
		wantErrs: []string{
			`spec.template.apiVersion: Required value`,
			`spec.template.metadata.name: Invalid value: "a/b": may not contain '/'`,
			rulesNotChecked,
		},
	}, {
		name:     "minimum",
		obj:      "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 0}",
		wantErrs: []string{`spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1`},
	}, {
		name: "required, enum, and the rules left unchecked",
		obj:  "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {colour: purple}",
		wantErrs: []string{
			`spec.size: Required value`,
			`spec.colour: Unsupported value: "purple": supported values: "red", "green", "blue"`,
			rulesNotChecked,
		},
	}, {
		name:     "CEL rule",
		obj:      "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 200, colour: blue}",
		wantErrs: []string{`spec: Invalid value: big widgets must be red`},
	}, {
		name: "type mismatch",
		obj:  "apiVersion: example.canopy.dev/v1beta1\nkind: Gadget\nmetadata: {name: w1, namespace: default}\nspec: {size: 0}",
		wantErrs: []string{
			`kind: Invalid value: "Gadget": must be Widget`,
			`apiVersion: Invalid value: "example.canopy.dev/v1beta1": must be example.canopy.dev/v1`,
		},
	}, {
		name: "metadata",
		obj:  "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: Bad_Name, labels: {'a b': c}}\nspec: {size: 1}",
		wantErrs: []string{
			`metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of*`,
			`metadata.namespace: Required value`,
			`metadata.labels: Invalid value: "a b": name part must consist of*`,
			rulesNotChecked,
		},
	}, {
		name:     "malformed metadata",
		obj:      "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default, labels: 3}\nspec: {size: 1}",
		wantErrs: []string{`metadata: Invalid value: {"labels":3,"name":"w1","namespace":"default"}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type map[string]string`},
	}, {
		name: "scale replicas",
		obj:  "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1, replicas: -1}\nstatus: {selector: 5}",
		wantErrs: []string{
			`status.selector: Invalid value: "integer": status.selector in body must be of type string: "integer"`,
			`.spec.replicas: Invalid value: -1: should be a non-negative integer`,
			`.status.selector: Invalid value: "": * accessor error: 5 is of the type int64, expected string`,
			rulesNotChecked,
		},
	}, {
		name: "list map keys",
		obj: "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n" +
			"spec: {size: 1, ports: [{name: http, port: 80}, {name: http, port: 81}]}",
		wantErrs: []string{`spec.ports[1]: Duplicate value: {"name":"http"}`},
	}, {
		name:       "another version's schema",
		version:    "v1beta1",
		obj:        "apiVersion: example.canopy.dev/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 0, colour: blue}",
		wantPruned: []string{"spec.colour"},
		wantSpec:   map[string]any{"size": int64(0)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := d.Version(tt.version)
			if tt.version == "" {
				v = d.Version("v1")
			}
			obj := objectFrom(t, tt.obj)
			pruned, errs := v.Prepare(obj, nil)
			if !slices.Equal(pruned, tt.wantPruned) {
				t.Errorf("pruned = %q, want %q", pruned, tt.wantPruned)
			}
			requireErrors(t, errs, tt.wantErrs)
			if tt.wantSpec != nil && !reflect.DeepEqual(obj.Object["spec"], tt.wantSpec) {
				t.Errorf("spec = %#v\nwant   %#v", obj.Object["spec"], tt.wantSpec)
			}
			if _, ok := obj.Object["extra"]; ok {
				t.Error("unknown root field kept")
			}
		})
	}
}

func TestPrepareClusterScoped(t *testing.T) {
	v := compile(t, gadgetsYAML).Version("v1")
	obj := objectFrom(t, "apiVersion: example.canopy.dev/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {any: [thing]}")
	_, errs := v.Prepare(obj, nil)
	requireErrors(t, errs, []string{`metadata.namespace: Forbidden: not allowed on this type`})

	obj = objectFrom(t, "apiVersion: example.canopy.dev/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {any: [thing]}")
	if pruned, errs := v.Prepare(obj, nil); len(pruned)+len(errs) > 0 {
		t.Errorf("Prepare = %q, %v", pruned, errs)
	}
}

// stored returns a Widget as the store holds it.
func stored(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	return storedWithStatus(t, spec, "{replicas: 1, phase: Running}")
}

func storedWithStatus(t *testing.T, spec, status string) *unstructured.Unstructured {
	t.Helper()
	return objectFrom(t, `
apiVersion: example.canopy.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: default
  uid: 0b3e6f1a-0000-4000-8000-000000000002
  resourceVersion: "10"
  generation: 1
  creationTimestamp: "2026-01-02T03:04:05Z"
spec: `+spec+`
status: `+status)
}

func TestPrepareUpdate(t *testing.T) {
	v := compile(t, widgetsYAML).Version("v1")
	tests := []struct {
		name     string
		old, obj *unstructured.Unstructured
		edit     func(*unstructured.Unstructured)
		wantErrs []string
	}{{
		name: "valid",
		old:  stored(t, "{size: 2, colour: red, replicas: 1}"),
		obj:  stored(t, "{size: 3}"),
	}, {
		name:     "invalid",
		old:      stored(t, "{size: 2, colour: red, replicas: 1}"),
		obj:      stored(t, "{size: 0}"),
		wantErrs: []string{`spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1`},
	}, {
		name: "unchanged invalid fields ratchet",
		old:  stored(t, "{size: 0, colour: blue, replicas: 1}"),
		obj:  stored(t, "{size: 0, colour: blue, replicas: 1}"),
		edit: func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "a"}) },
	}, {
		name: "changed CEL-invalid field",
		old:  stored(t, "{size: 100, colour: blue, replicas: 1}"),
		obj:  stored(t, "{size: 101, colour: blue, replicas: 1}"),
		wantErrs: []string{
			`spec: Invalid value: big widgets must be red`,
		},
	}, {
		name: "metadata, each error once",
		old:  stored(t, "{size: 2, colour: red, replicas: 1}"),
		obj:  stored(t, "{size: 2}"),
		edit: func(u *unstructured.Unstructured) {
			u.SetUID("other")
			u.SetResourceVersion("")
			u.SetLabels(map[string]string{"a b": "c"})
		},
		wantErrs: []string{
			`metadata.uid: Invalid value: "other": field is immutable`,
			`metadata.resourceVersion: Invalid value: "": must be specified for an update`,
			`metadata.labels: Invalid value: "a b": name part must consist of*`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.edit != nil {
				tt.edit(tt.obj)
			}
			_, errs := v.Prepare(tt.obj, tt.old)
			requireErrors(t, errs, tt.wantErrs)
		})
	}
}

func TestPrepareStatus(t *testing.T) {
	v := compile(t, widgetsYAML).Version("v1")
	tests := []struct {
		name       string
		status     string
		wantPruned []string
		wantErrs   []string
	}{{
		name:   "valid",
		status: "{replicas: 3, phase: Running, selector: 'app=w1'}",
	}, {
		name:       "pruned",
		status:     "{replicas: 3, colour: red}",
		wantPruned: []string{"status.colour"},
	}, {
		name:   "status schema",
		status: "{replicas: many}",
		wantErrs: []string{
			// As in kube: the status validator is rooted at .status.
			`status.replicas: Invalid value: "string": replicas in body must be of type integer: "string"`,
			`.status.replicas: Invalid value: 0: .status.replicas accessor error: many is of the type string, expected int64`,
			rulesNotChecked,
		},
	}, {
		name:     "scale status",
		status:   "{replicas: -2}",
		wantErrs: []string{`.status.replicas: Invalid value: -2: should be a non-negative integer`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The spec is invalid in both; a status update does not check it.
			const spec = "{size: 0, colour: red, replicas: 1}"
			old := stored(t, spec)
			obj := storedWithStatus(t, spec, tt.status)
			pruned, errs := v.PrepareStatus(obj, old)
			if !slices.Equal(pruned, tt.wantPruned) {
				t.Errorf("pruned = %q, want %q", pruned, tt.wantPruned)
			}
			requireErrors(t, errs, tt.wantErrs)
		})
	}
}
