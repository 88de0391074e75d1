package customize

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// decode parses JSON as apimachinery does (integers as int64).
func decode(t testing.TB, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return m
}

func encode(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// expectEqual compares as JSON, for readable failures.
func expectEqual(t *testing.T, got map[string]any, want string) {
	t.Helper()
	w := decode(t, want)
	if !reflect.DeepEqual(got, w) {
		t.Errorf("got\n%s\nwant\n%s", encode(t, got), encode(t, w))
	}
}

const (
	annExpand = `"edge.canopy.dev/expand-parameters": "true"`
	annCust   = `"edge.canopy.dev/customizer": "per-store"`
)

// The MVI: one Deployment on three destinations, with replicas, an env
// value and a label that differ per destination.
const mviDeployment = `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop",
    "labels": {"app": "web", "store": "%(syncTargetName)"},
    "annotations": {` + annExpand + `, ` + annCust + `, "note": "100%% of %(region) stores"}},
  "spec": {"replicas": 1,
    "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "shop:1.2",
        "args": ["--zone=%(zone)", "--tier", "%(tier)"],
        "env": [{"name": "LOCATION", "value": "%(locationName)"}, {"name": "ZONE", "value": "%(zone)"}]}]}}}}`

var mviCustomizer = &v1alpha1.Customizer{
	ObjectMeta: metav1.ObjectMeta{Name: "per-store", Namespace: "shop"},
	Replacements: []v1alpha1.Replacement{
		{Path: "/spec/replicas", Value: "%(replicas)"},
		{Path: "/spec/template/spec/containers/0/env/-", Value: `{"name": "STORE", "value": "%(syncTargetName)-%(zone)"}`},
		{Path: "/spec/template/spec/containers/0/resources", Value: `{"limits": {"cpu": "2"}}`,
			DestinationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"size": "large"}}},
	},
}

var stores = []Params{
	{SyncTargetName: "store-1", LocationName: "eu-west",
		SyncTargetLabels: map[string]string{"zone": "a", "size": "small", "replicas": "1"},
		LocationLabels:   map[string]string{"region": "eu", "tier": "gold"}},
	{SyncTargetName: "store-2", LocationName: "eu-west",
		SyncTargetLabels:    map[string]string{"zone": "b", "size": "large", "replicas": "3"},
		LocationLabels:      map[string]string{"region": "eu", "tier": "gold"},
		LocationAnnotations: map[string]string{"tier": "platinum"}}, // annotations before labels
	{SyncTargetName: "store-3", LocationName: "us-east",
		SyncTargetLabels:      map[string]string{"zone": "c", "size": "large", "replicas": "5"},
		SyncTargetAnnotations: map[string]string{"zone": "c2"}, // SyncTarget annotations before its labels
		LocationLabels:        map[string]string{"region": "us", "tier": "silver"}},
}

func TestMVI(t *testing.T) {
	want := []string{
		`{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "store": "store-1"}, "annotations": {"note": "100% of eu stores"}},
  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "shop:1.2", "args": ["--zone=a", "--tier", "gold"],
        "env": [{"name": "LOCATION", "value": "eu-west"}, {"name": "ZONE", "value": "a"}, {"name": "STORE", "value": "store-1-a"}]}]}}}}`,
		`{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "store": "store-2"}, "annotations": {"note": "100% of eu stores"}},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "shop:1.2", "args": ["--zone=b", "--tier", "platinum"],
        "env": [{"name": "LOCATION", "value": "eu-west"}, {"name": "ZONE", "value": "b"}, {"name": "STORE", "value": "store-2-b"}],
        "resources": {"limits": {"cpu": "2"}}}]}}}}`,
		`{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "store": "store-3"}, "annotations": {"note": "100% of us stores"}},
  "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "shop:1.2", "args": ["--zone=c2", "--tier", "silver"],
        "env": [{"name": "LOCATION", "value": "us-east"}, {"name": "ZONE", "value": "c2"}, {"name": "STORE", "value": "store-3-c2"}],
        "resources": {"limits": {"cpu": "2"}}}]}}}}`,
	}
	in := decode(t, mviDeployment)
	orig := runtime.DeepCopyJSON(in)
	for i, p := range stores {
		t.Run(p.SyncTargetName, func(t *testing.T) {
			ns, name, ok := CustomizerRef(in, "")
			if !ok || ns != "shop" || name != "per-store" {
				t.Fatalf("CustomizerRef = %q, %q, %t", ns, name, ok)
			}
			got, err := Expand(in, p, mviCustomizer)
			if err != nil {
				t.Fatal(err)
			}
			expectEqual(t, got, want[i])
			if _, ok := got["spec"].(map[string]any)["replicas"].(int64); !ok {
				t.Errorf("replicas is a %T, want int64", got["spec"].(map[string]any)["replicas"])
			}
		})
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("the input changed:\n%s", encode(t, in))
	}
}

func TestLookup(t *testing.T) {
	p := Params{SyncTargetName: "st", LocationName: "loc",
		LocationAnnotations:   map[string]string{"a": "loc-ann", "syncTargetName": "shadowed?"},
		LocationLabels:        map[string]string{"a": "loc-label", "b": "loc-label"},
		SyncTargetAnnotations: map[string]string{"a": "st-ann", "b": "st-ann", "c": "st-ann"},
		SyncTargetLabels:      map[string]string{"a": "st-label", "b": "st-label", "c": "st-label", "d": "st-label", "empty": ""},
	}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"syncTargetName", "st", true}, {"locationName", "loc", true},
		{"a", "loc-ann", true}, {"b", "loc-label", true}, {"c", "st-ann", true}, {"d", "st-label", true},
		{"empty", "", true}, {"missing", "", false},
	} {
		if v, ok := p.Lookup(tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %t; want %q, %t", tc.name, v, ok, tc.want, tc.ok)
		}
	}
	var zero Params
	if _, ok := zero.Lookup("syncTargetName"); ok {
		t.Error("an empty built-in is known")
	}
	st := &v1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "st", Labels: map[string]string{"z": "1"}, Annotations: map[string]string{"y": "2"}}}
	loc := &v1alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "loc", Labels: map[string]string{"x": "3"}, Annotations: map[string]string{"w": "4"}}}
	want := Params{SyncTargetName: "st", LocationName: "loc", SyncTargetLabels: st.Labels, SyncTargetAnnotations: st.Annotations,
		LocationLabels: loc.Labels, LocationAnnotations: loc.Annotations}
	if got := ParamsFor(st, loc); !reflect.DeepEqual(got, want) {
		t.Errorf("ParamsFor = %+v", got)
	}
	if got := ParamsFor(nil, nil); !reflect.DeepEqual(got, Params{}) {
		t.Errorf("ParamsFor(nil, nil) = %+v", got)
	}
}

func TestExpandString(t *testing.T) {
	p := &Params{SyncTargetName: "st", SyncTargetLabels: map[string]string{"zone": "a", "pct": "%(zone)", "example.com/tier": "gold"}}
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"", "", ""},
		{"%(zone)", "a", ""},
		{"x-%(zone)-%(syncTargetName)-y", "x-a-st-y", ""},
		{"%(example.com/tier)", "gold", ""},
		{"%%", "%", ""},
		{"%%(zone)", "%(zone)", ""},
		{"%%%(zone)", "%a", ""},
		{"50%", "50%", ""},
		{"%d %s", "%d %s", ""},
		{"%(pct)", "%(zone)", ""}, // values are not expanded again
		{"%(nope)", "", `: unknown parameter "nope"`},
		{"a%(zone", "", `: unterminated parameter reference "%(zone"`},
		{"%()", "", `: empty parameter reference "%()"`},
	} {
		got, err := expandString(tc.in, p)
		if err != nil {
			err = place("", err)
		}
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: got %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = expandString("no parameters here", p) }); n != 0 {
		t.Errorf("a plain string allocates %v times", n)
	}
}

// TestNoExpansionWithoutAnnotation: strings stay as they are unless the
// object asks, while a Customizer's values are always templates.
func TestNoExpansionWithoutAnnotation(t *testing.T) {
	in := decode(t, `{"metadata": {"name": "c", "annotations": {`+annCust+`}}, "data": {"a": "%(zone) %(nope)"}}`)
	cust := &v1alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "eu"},
		Replacements: []v1alpha1.Replacement{{Path: "/data/b", Value: `"%(zone) 100%%"`}}}
	got, err := Expand(in, Params{SyncTargetLabels: map[string]string{"zone": "z"}}, cust)
	if err != nil {
		t.Fatal(err)
	}
	expectEqual(t, got, `{"metadata": {"name": "c"}, "data": {"a": "%(zone) %(nope)", "b": "z 100%"}}`)
	// Only "true" asks for expansion.
	in = decode(t, `{"metadata": {"name": "c", "annotations": {"edge.canopy.dev/expand-parameters": "yes", "keep": "%(x)"}}}`)
	got, err = Expand(in, Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectEqual(t, got, `{"metadata": {"name": "c", "annotations": {"keep": "%(x)"}}}`)
}

// TestInstructionsDropped: the two annotations are removed, a map they
// alone filled goes with them, and other annotations stay.
func TestInstructionsDropped(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata": {"name": "a", "annotations": {` + annExpand + `, ` + annCust + `}}}`, `{"metadata": {"name": "a"}}`},
		{`{"metadata": {"name": "a", "annotations": {` + annExpand + `, "b": "%(syncTargetName)"}}}`, `{"metadata": {"name": "a", "annotations": {"b": "st"}}}`},
		{`{"metadata": {"name": "a", "annotations": {}}}`, `{"metadata": {"name": "a", "annotations": {}}}`},
		{`{"metadata": {"name": "a"}}`, `{"metadata": {"name": "a"}}`},
		{`{"kind": "x"}`, `{"kind": "x"}`},
		// Only the object's own annotations are instructions.
		{`{"spec": {"template": {"metadata": {"annotations": {` + annCust + `}}}}}`, `{"spec": {"template": {"metadata": {"annotations": {` + annCust + `}}}}}`},
	} {
		got, err := Expand(decode(t, tc.in), Params{SyncTargetName: "st"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		expectEqual(t, got, tc.want)
	}
	// Typed maps (map[string]string annotations) are handled too.
	in := map[string]any{"metadata": map[string]any{"name": "a", "labels": map[string]string{"s": "%(syncTargetName)"},
		"annotations": map[string]string{v1alpha1.ExpandParametersAnnotation: "true"}}, "list": []string{"%(syncTargetName)"}}
	got, err := Expand(in, Params{SyncTargetName: "st"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectEqual(t, got, `{"metadata": {"name": "a", "labels": {"s": "st"}}, "list": ["st"]}`)
}

func TestReplacements(t *testing.T) {
	p := Params{SyncTargetName: "st-1", SyncTargetLabels: map[string]string{"zone": "a", "size": "large"}}
	base := `{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": []}}`
	for _, tc := range []struct {
		name string
		reps []v1alpha1.Replacement
		want string
	}{
		{"set a new key", []v1alpha1.Replacement{{Path: "/spec/n", Value: `5`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": [], "n": 5}}`},
		{"replace a key, any JSON type", []v1alpha1.Replacement{{Path: "/spec/m", Value: `[true, null, 1.5, "s"]`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": [true, null, 1.5, "s"], "empty": []}}`},
		{"insert at 0", []v1alpha1.Replacement{{Path: "/spec/list/0", Value: `0`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [0, 1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": []}}`},
		{"insert in the middle", []v1alpha1.Replacement{{Path: "/spec/list/2", Value: `"mid"`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, "mid", 3], "m": {"a/b": 1, "c~d": 2}, "empty": []}}`},
		{"insert at the length appends", []v1alpha1.Replacement{{Path: "/spec/list/3", Value: `4`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3, 4], "m": {"a/b": 1, "c~d": 2}, "empty": []}}`},
		{"dash appends, in order", []v1alpha1.Replacement{{Path: "/spec/empty/-", Value: `"a"`}, {Path: "/spec/empty/-", Value: `"b"`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": ["a", "b"]}}`},
		{"escapes", []v1alpha1.Replacement{{Path: "/spec/m/a~1b", Value: `10`}, {Path: "/spec/m/c~0d", Value: `20`}, {Path: "/spec/m/~01", Value: `30`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 10, "c~d": 20, "~1": 30}, "empty": []}}`},
		{"empty key", []v1alpha1.Replacement{{Path: "/spec/m/", Value: `0`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2, "": 0}, "empty": []}}`},
		{"nested template producing an object", []v1alpha1.Replacement{{Path: "/spec/where", Value: `{"zone": "%(zone)", "at": ["%(syncTargetName)", "100%%"]}`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": [], "where": {"zone": "a", "at": ["st-1", "100%"]}}}`},
		{"later replacements see earlier ones", []v1alpha1.Replacement{{Path: "/spec/new", Value: `{}`}, {Path: "/spec/new/k", Value: `"%(zone)"`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": [], "new": {"k": "a"}}}`},
		{"through an array element", []v1alpha1.Replacement{{Path: "/spec/list/1", Value: `{"a": []}`}, {Path: "/spec/list/1/a/-", Value: `"%(zone)"`}},
			`{"metadata": {"name": "x"}, "spec": {"list": [1, {"a": ["a"]}, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": []}}`},
		{"selector-limited", []v1alpha1.Replacement{
			{Path: "/spec/small", Value: `true`, DestinationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"size": "small"}}},
			{Path: "/spec/large", Value: `true`, DestinationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"size": "large"}}},
			{Path: "/spec/notB", Value: `true`, DestinationSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}},
			{Path: "/spec/all", Value: `true`, DestinationSelector: &metav1.LabelSelector{}},
			// A skipped replacement is not checked: its parent is missing.
			{Path: "/nope/x", Value: `%(nope)`, DestinationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}},
		}, `{"metadata": {"name": "x"}, "spec": {"list": [1, 2, 3], "m": {"a/b": 1, "c~d": 2}, "empty": [], "large": true, "notB": true, "all": true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := decode(t, base)
			got, err := Expand(in, p, &v1alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Replacements: tc.reps})
			if err != nil {
				t.Fatal(err)
			}
			expectEqual(t, got, tc.want)
			expectEqual(t, in, base)
		})
	}
}

// TestErrors: every failure names its place, and nothing partial comes
// back.
func TestErrors(t *testing.T) {
	p := Params{SyncTargetName: "st", SyncTargetLabels: map[string]string{"zone": "a"}, SyncTargetAnnotations: map[string]string{"quote": `say "hi"`}}
	deploy := `{"metadata": {"name": "d", "namespace": "eu", "annotations": {` + annExpand + `}},
	  "spec": {"template": {"spec": {"containers": [{"env": [{"name": "A", "value": "%(zone)"}, {"name": "B", "value": "%(region)"}]}]}}}}`
	plain := `{"metadata": {"name": "d"}, "spec": {"n": 1, "list": [1], "s": "str"}}`
	rep := func(path, value string) *v1alpha1.Customizer {
		return &v1alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "eu"},
			Replacements: []v1alpha1.Replacement{{Path: "/spec/ok", Value: "1"}, {Path: "/spec/ok2", Value: "2"}, {Path: path, Value: value}}}
	}
	for _, tc := range []struct {
		name, obj string
		cust      *v1alpha1.Customizer
		want      string
		param     string // the ParameterError's name, when it is one
	}{
		{"unknown parameter in the object", deploy, nil,
			`spec.template.spec.containers[0].env[1].value: unknown parameter "region"`, "region"},
		{"unknown parameter in a label value", `{"metadata": {"labels": {"example.com/zone": "%(nope)"}, "annotations": {` + annExpand + `}}}`, nil,
			`metadata.labels["example.com/zone"]: unknown parameter "nope"`, "nope"},
		{"unknown parameter in a nested array", `{"metadata": {"annotations": {` + annExpand + `}}, "a": [[0, ["%(nope)"]]]}`, nil,
			`a[0][1][0]: unknown parameter "nope"`, "nope"},
		{"unknown parameter in a replacement", plain, rep("/spec/x", `"%(zone)-%(region)"`),
			`customizer eu/c1 replacements[2].value: unknown parameter "region"`, "region"},
		{"bad template in the object", `{"metadata": {"annotations": {` + annExpand + `}}, "s": "%(zone"}`, nil,
			`s: unterminated parameter reference "%(zone"`, ""},
		{"bad template in a replacement", plain, rep("/spec/x", `"%()"`),
			`customizer eu/c1 replacements[2].value: empty parameter reference "%()"`, ""},
		{"relative path", plain, rep("spec/x", `1`), `customizer eu/c1 replacements[2].path: pointer "spec/x" does not start with /`, ""},
		{"empty path", plain, rep("", `1`), `customizer eu/c1 replacements[2].path: empty pointer`, ""},
		{"bad escape", plain, rep("/spec/a~2", `1`), `customizer eu/c1 replacements[2].path: pointer "/spec/a~2": ~ must be followed by 0 or 1`, ""},
		{"trailing tilde", plain, rep("/spec/a~", `1`), `customizer eu/c1 replacements[2].path: pointer "/spec/a~": ~ must be followed by 0 or 1`, ""},
		{"missing parent", plain, rep("/spec/nope/x", `1`), `customizer eu/c1 replacements[2]: path /spec/nope/x: parent /spec/nope does not exist`, ""},
		{"scalar parent", plain, rep("/spec/s/x", `1`), `customizer eu/c1 replacements[2]: path /spec/s/x: parent /spec/s is a string, not an object or array`, ""},
		{"index past the end", plain, rep("/spec/list/2", `1`), `customizer eu/c1 replacements[2]: path /spec/list/2: at /spec/list: index 2 is out of range (array of 1)`, ""},
		{"missing element parent", plain, rep("/spec/list/1/x", `1`), `customizer eu/c1 replacements[2]: path /spec/list/1/x: parent /spec/list/1 does not exist: index 1 is out of range (array of 1)`, ""},
		{"dash as a parent", plain, rep("/spec/list/-/x", `1`), `parent /spec/list/- does not exist: "-" is not an array index`, ""},
		{"leading zero", plain, rep("/spec/list/01", `1`), `"01" is not an array index`, ""},
		{"not JSON", plain, rep("/spec/x", `eu-%(zone)`), `customizer eu/c1 replacements[2].value: "eu-a" is not one JSON value`, ""},
		{"parameter breaking JSON", plain, rep("/spec/x", `"%(quote)"`), `customizer eu/c1 replacements[2].value: "\"say \"hi\"\"" is not one JSON value`, ""},
		{"long value cut short", plain, rep("/spec/x", strings.Repeat("x", 1000)), `"` + strings.Repeat("x", 80) + `..." is not one JSON value`, ""},
		{"two JSON values", plain, rep("/spec/x", `1 2`), `customizer eu/c1 replacements[2].value: "1 2" is not one JSON value`, ""},
		{"bad destination selector", plain, &v1alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "c1"}, Replacements: []v1alpha1.Replacement{
			{Path: "/x", Value: "1", DestinationSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}}},
			`customizer c1 replacements[0].destinationSelector: `, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := decode(t, tc.obj)
			orig := runtime.DeepCopyJSON(in)
			got, err := Expand(in, p, tc.cust)
			if got != nil {
				t.Errorf("a result came back: %s", encode(t, got))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			var pe *ParameterError
			if isParam := errors.As(err, &pe); isParam != (tc.param != "") || (isParam && pe.Name != tc.param) {
				t.Errorf("ParameterError %+v, want name %q", pe, tc.param)
			}
			if !reflect.DeepEqual(in, orig) {
				t.Errorf("the input changed:\n%s", encode(t, in))
			}
		})
	}
	// Unsupported Go values in the object are refused, not shared.
	if _, err := Expand(map[string]any{"spec": map[string]any{"ch": make(chan int)}}, p, nil); err == nil || !strings.Contains(err.Error(), "spec.ch: unsupported value of type chan int") {
		t.Errorf("got %v", err)
	}
}

// TestDeterministicError: with several unknown parameters the same one is
// reported every time, so that a destination's failure reason is stable.
func TestDeterministicError(t *testing.T) {
	in := decode(t, `{"metadata": {"annotations": {`+annExpand+`}}, "data": {"k1": "%(p1)", "k2": "%(p2)", "k3": "%(p3)", "k4": "%(p4)", "k5": "%(p5)", "k6": "%(p6)"}}`)
	for range 50 {
		_, err := Expand(in, Params{}, nil)
		if err == nil || err.Error() != `data.k1: unknown parameter "p1"` {
			t.Fatalf("got %v", err)
		}
	}
}

// TestNoAliasing: changing the result does not change the input.
func TestNoAliasing(t *testing.T) {
	for _, ann := range []string{"", annExpand} {
		in := decode(t, `{"metadata": {"name": "a", "annotations": {`+ann+`}}, "spec": {"m": {"k": "v"}, "l": [{"k": "v"}, [1]]}}`)
		orig := runtime.DeepCopyJSON(in)
		got, err := Expand(in, Params{}, &v1alpha1.Customizer{Replacements: []v1alpha1.Replacement{{Path: "/spec/l/0/k2", Value: `"x"`}}})
		if err != nil {
			t.Fatal(err)
		}
		spec := got["spec"].(map[string]any)
		spec["m"].(map[string]any)["k"] = "changed"
		spec["l"].([]any)[1].([]any)[0] = int64(2)
		got["metadata"].(map[string]any)["name"] = "b"
		if !reflect.DeepEqual(in, orig) {
			t.Errorf("the input changed:\n%s", encode(t, in))
		}
	}
}

func TestCustomizerRef(t *testing.T) {
	namespaced := func(ann string) map[string]any {
		md := map[string]any{"name": "d", "namespace": "eu"}
		if ann != "" {
			md["annotations"] = map[string]any{v1alpha1.CustomizerAnnotation: ann}
		}
		return map[string]any{"metadata": md}
	}
	cluster := func(ann string) map[string]any {
		o := namespaced(ann)
		delete(o["metadata"].(map[string]any), "namespace")
		return o
	}
	for _, tc := range []struct {
		name   string
		obj    map[string]any
		clause string
		ns, n  string
		ok     bool
	}{
		{"none", namespaced(""), "", "", "", false},
		{"annotation", namespaced("c1"), "", "eu", "c1", true},
		{"clause overrides annotation", namespaced("c1"), "c2", "eu", "c2", true},
		{"clause alone", namespaced(""), "c2", "eu", "c2", true},
		{"own namespace qualified", namespaced("eu/c1"), "", "eu", "c1", true},
		{"other namespace", namespaced("us/c1"), "", "", "", false},
		{"cluster-scoped", cluster("eu/c1"), "", "eu", "c1", true},
		{"cluster-scoped clause", cluster("eu/c1"), "us/c2", "us", "c2", true},
		{"cluster-scoped bare name", cluster("c1"), "", "", "", false},
		{"empty namespace", cluster("/c1"), "", "", "", false},
		{"empty name", cluster("eu/"), "", "", "", false},
		{"two slashes", cluster("eu/c/1"), "", "", "", false},
		{"no metadata", map[string]any{}, "", "", "", false},
	} {
		ns, n, ok := CustomizerRef(tc.obj, tc.clause)
		if ns != tc.ns || n != tc.n || ok != tc.ok {
			t.Errorf("%s: %q, %q, %t; want %q, %q, %t", tc.name, ns, n, ok, tc.ns, tc.n, tc.ok)
		}
	}
}

// BenchmarkExpand expands the MVI Deployment (parameters and a
// three-replacement Customizer) for one destination.
func BenchmarkExpand(b *testing.B) {
	in := decode(b, mviDeployment)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Expand(in, stores[1], mviCustomizer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopy is the floor: the same Deployment without expansion or a
// Customizer.
func BenchmarkCopy(b *testing.B) {
	in := decode(b, strings.Replace(mviDeployment, annExpand+", ", "", 1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Expand(in, stores[1], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzExpand: whatever the object's strings and the replacement, Expand
// does not panic, never changes its input, and returns either a result or
// an error.
func FuzzExpand(f *testing.F) {
	f.Add("%(zone)-%%-%(syncTargetName)", "/spec/list/0", `{"a": "%(zone)"}`)
	f.Add("%(", "/spec/m/a~1b", `"%()"`)
	f.Add("50%", "/spec/list/-", `[1, 2]`)
	f.Add("%(nope)", "/spec/~2", `1 2`)
	f.Fuzz(func(t *testing.T, str, path, value string) {
		in := map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}},
			"spec": map[string]any{"s": str, "list": []any{str, int64(1)}, "m": map[string]any{"a/b": str}}}
		orig := runtime.DeepCopyJSON(in)
		p := Params{SyncTargetName: "st", SyncTargetLabels: map[string]string{"zone": "a"}}
		got, err := Expand(in, p, &v1alpha1.Customizer{Replacements: []v1alpha1.Replacement{{Path: path, Value: value}}})
		if (got == nil) == (err == nil) {
			t.Fatalf("result %v, error %v", got, err)
		}
		if !reflect.DeepEqual(in, orig) {
			t.Fatal("the input changed")
		}
	})
}

// TestUserGuideExample keeps the example of docs/user-guide.md
// ("Customization") honest.
func TestUserGuideExample(t *testing.T) {
	const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
  annotations:
    edge.canopy.dev/expand-parameters: "true"
    edge.canopy.dev/customizer: per-store
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: shop:1.2
        env:
        - {name: REGION, value: "%(region)"}
        - {name: ZONE, value: "%(zone)"}
`
	const customizer = `
apiVersion: edge.canopy.dev/v1alpha1
kind: Customizer
metadata:
  name: per-store
  namespace: shop
replacements:
- path: /metadata/labels/store
  value: '"%(syncTargetName)"'
- path: /spec/replicas
  value: '%(replicas)'
- path: /spec/template/spec/containers/0/env/-
  value: '{"name": "STORE", "value": "%(syncTargetName)-%(zone)"}'
- path: /spec/template/spec/containers/0/resources
  value: '{"limits": {"cpu": "2"}}'
  destinationSelector: {matchLabels: {size: large}}
`
	js, err := yaml.YAMLToJSON([]byte(deployment))
	if err != nil {
		t.Fatal(err)
	}
	in := decode(t, string(js))
	var cust v1alpha1.Customizer
	if err := yaml.UnmarshalStrict([]byte(customizer), &cust); err != nil {
		t.Fatal(err)
	}
	loc := map[string]string{"region": "eu"}
	for _, tc := range []struct {
		st, zone, size, replicas, limits string
	}{
		{"store-1", "a", "small", "1", ""},
		{"store-2", "b", "large", "3", `, "resources": {"limits": {"cpu": "2"}}`},
		{"store-3", "c", "large", "5", `, "resources": {"limits": {"cpu": "2"}}`},
	} {
		p := Params{SyncTargetName: tc.st, LocationName: "stores", LocationLabels: loc,
			SyncTargetLabels: map[string]string{"zone": tc.zone, "size": tc.size, "replicas": tc.replicas}}
		got, err := Expand(in, p, &cust)
		if err != nil {
			t.Fatal(err)
		}
		expectEqual(t, got, `{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "store": "`+tc.st+`"}},
  "spec": {"replicas": `+tc.replicas+`, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "shop:1.2",
        "env": [{"name": "REGION", "value": "eu"}, {"name": "ZONE", "value": "`+tc.zone+`"}, {"name": "STORE", "value": "`+tc.st+`-`+tc.zone+`"}]`+tc.limits+`}]}}}}`)
	}
}
