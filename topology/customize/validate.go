package customize

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Validate checks a Customizer for what would fail at every destination
// alike, so that the API can refuse it with 422 rather than every edge
// failing the objects that use it: for each replacement, its path (a JSON
// Pointer), the syntax of its value's template (an unterminated or empty
// %(...) reference), a value without parameter references that is not one
// JSON value, and its destination selector (as kube validates label
// selectors). What depends on a destination (an unknown parameter, a
// missing parent, an expanded value that is not JSON) is left to Expand.
// Errors name the field, as replacements[2].value.
func Validate(obj *unstructured.Unstructured) field.ErrorList {
	var c v1alpha1.Customizer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &c); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("replacements"), nil, err.Error())}
	}
	var errs field.ErrorList
	for i := range c.Replacements {
		r := &c.Replacements[i]
		at := field.NewPath("replacements").Index(i)
		if _, err := parsePointer(r.Path); err != nil {
			errs = append(errs, field.Invalid(at.Child("path"), r.Path, err.Error()))
		}
		switch refs, err := checkTemplate(r.Value); {
		case err != nil:
			errs = append(errs, field.Invalid(at.Child("value"), r.Value, err.Error()))
		case refs == 0:
			text := strings.ReplaceAll(r.Value, "%%", "%")
			var v any
			if err := utiljson.Unmarshal([]byte(text), &v); err != nil {
				errs = append(errs, field.Invalid(at.Child("value"), r.Value, "not one JSON value: "+err.Error()))
			}
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(r.DestinationSelector,
			metav1validation.LabelSelectorValidationOptions{}, at.Child("destinationSelector"))...)
	}
	return errs
}

// checkTemplate checks the syntax of a template as expandString reads it
// and counts its parameter references.
func checkTemplate(s string) (refs int, err error) {
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			return refs, nil
		}
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "%%"):
			s = s[2:]
		case strings.HasPrefix(s, "%("):
			end := strings.IndexByte(s, ')')
			if end < 0 {
				return refs, fmt.Errorf("unterminated parameter reference %q", short(s))
			}
			if end == 2 {
				return refs, errors.New(`empty parameter reference "%()"`)
			}
			refs++
			s = s[end+1:]
		default:
			s = s[1:]
		}
	}
}
