package server

import (
	"path"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// validateEdgePlacement checks what the EdgePlacement schema cannot: every
// label selector (spec.locationSelectors, and each downsync clause's
// namespaceSelector and labelSelectors) is a valid one, as kube checks
// label selectors, and every upsync clause's names are patterns path.Match
// can read (the edge matches names with it), so that a bad selector or
// pattern is a 422 naming it rather than a placement that silently selects
// nothing through it.
func validateEdgePlacement(obj *unstructured.Unstructured) field.ErrorList {
	var ep edgev1alpha1.EdgePlacement
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &ep); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	for i := range ep.Spec.LocationSelectors {
		errs = append(errs, validSelector(&ep.Spec.LocationSelectors[i], spec.Child("locationSelectors").Index(i))...)
	}
	for i := range ep.Spec.Downsync {
		dc := &ep.Spec.Downsync[i]
		at := spec.Child("downsync").Index(i)
		errs = append(errs, validSelector(dc.NamespaceSelector, at.Child("namespaceSelector"))...)
		for j := range dc.LabelSelectors {
			errs = append(errs, validSelector(&dc.LabelSelectors[j], at.Child("labelSelectors").Index(j))...)
		}
	}
	for i := range ep.Spec.Upsync {
		for j, p := range ep.Spec.Upsync[i].Names {
			if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, field.Invalid(spec.Child("upsync").Index(i).Child("names").Index(j), p,
					"not a valid name pattern (*, ?, [...] and \\ as in path.Match): "+err.Error()))
			}
		}
	}
	return errs
}

// validateLocation checks a Location's spec.instanceSelector.
func validateLocation(obj *unstructured.Unstructured) field.ErrorList {
	var loc edgev1alpha1.Location
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &loc); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	return validSelector(&loc.Spec.InstanceSelector, field.NewPath("spec", "instanceSelector"))
}

func validSelector(sel *metav1.LabelSelector, at *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, at)
}
