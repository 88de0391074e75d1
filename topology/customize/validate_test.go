package customize

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

func toUnstructured(t *testing.T, c *v1alpha1.Customizer) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// A Customizer that would fail at every destination alike is invalid,
// with the field at fault; what depends on the destination is not
// checked. The MVI's Customizer is valid.
func TestValidate(t *testing.T) {
	if errs := Validate(toUnstructured(t, mviCustomizer)); len(errs) > 0 {
		t.Fatalf("the MVI Customizer: %v", errs)
	}
	bad := []struct {
		r    v1alpha1.Replacement
		want string // field and message
	}{
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `"%(zone"`}, `replacements[0].value: Invalid value: "\"%(zone\"": unterminated parameter reference`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `%(`}, `replacements[0].value: Invalid value: "%(": unterminated parameter reference`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `"%()"`}, `replacements[0].value: Invalid value: "\"%()\"": empty parameter reference`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `three`}, `replacements[0].value: Invalid value: "three": not one JSON value`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `"100%%" x`}, `replacements[0].value: Invalid value: "\"100%%\" x": not one JSON value`},
		{v1alpha1.Replacement{Path: "spec/replicas", Value: `3`}, `replacements[0].path: Invalid value: "spec/replicas": pointer "spec/replicas" does not start with /`},
		{v1alpha1.Replacement{Path: "/a~2", Value: `3`}, `replacements[0].path`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `3`, DestinationSelector: sel("Bogus", "size", "large")},
			`replacements[0].destinationSelector.matchExpressions[0].operator: Invalid value: "Bogus"`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `3`, DestinationSelector: sel("Exists", "bad key!")},
			`replacements[0].destinationSelector.matchExpressions[0].key: Invalid value: "bad key!"`},
		{v1alpha1.Replacement{Path: "/spec/replicas", Value: `3`, DestinationSelector: sel("In", "size")},
			`replacements[0].destinationSelector.matchExpressions[0].values: Required value`},
	}
	for _, b := range bad {
		c := &v1alpha1.Customizer{Replacements: []v1alpha1.Replacement{b.r}}
		errs := Validate(toUnstructured(t, c))
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), b.want) {
			t.Errorf("%+v: %v, want one error with %q", b.r, errs, b.want)
		}
	}
	// Only the destination can tell: an unknown parameter, a value that is
	// JSON only once expanded, a missing parent; and text around a % that
	// is not a reference.
	good := &v1alpha1.Customizer{Replacements: []v1alpha1.Replacement{
		{Path: "/spec/replicas", Value: `%(replicas)`},
		{Path: "/spec/template/metadata/labels/x", Value: `{%(fields)}`},
		{Path: "/no/such/parent", Value: `"50% of %%(x) and %(y)"`},
		{Path: "/data/a~1b~0c", Value: `"100%"`},
	}}
	if errs := Validate(toUnstructured(t, good)); len(errs) > 0 {
		t.Errorf("valid replacements refused: %v", errs)
	}
}

// checkTemplate accepts exactly what expandString can expand when every
// parameter is known.
func TestCheckTemplateAgreesWithExpand(t *testing.T) {
	p := Params{SyncTargetLabels: map[string]string{"a": "1", "b(": "2", "(a": "3"}}
	for _, s := range []string{"", "x", "%", "%%", "%%(", "%(a)", "%(a", "%()", "%(b()", "%((a)", "a%(a)b%", "%%%(a)", "%(a)%("} {
		_, expErr := expandString(s, &p)
		_, chkErr := checkTemplate(s)
		if (expErr == nil) != (chkErr == nil) {
			t.Errorf("%q: expandString says %v, checkTemplate says %v", s, expErr, chkErr)
		}
	}
}

func sel(op, key string, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: values}}}
}
