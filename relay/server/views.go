package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var viewsResource = store.Resource{Group: edgev1alpha1.GroupName, Resource: edgev1alpha1.ResourceViews}

// views is kubeapi.Config.Views at the root: the View named name of a
// workload description space, served over the space's views space
// (layout.ViewsSpace, which topology/placement writes), selecting by the
// View's resource, source (the live copies of placed objects carry
// v1alpha1.PlacedCopyLabel) and selector, partitioned by its partition
// key.
func views(st *store.Store) func(space, name string) (*kubeapi.View, error) {
	return func(space, name string) (*kubeapi.View, error) {
		o, err := st.Get(store.Key{Space: space, Resource: viewsResource, Name: name})
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var v edgev1alpha1.View
		if err := json.Unmarshal(o.Data, &v); err != nil {
			return nil, err
		}
		sel := labels.Everything()
		if v.Spec.Selector != nil {
			if sel, err = metav1.LabelSelectorAsSelector(v.Spec.Selector); err != nil {
				sel = labels.Nothing()
			}
		}
		res := store.Resource{Group: v.Spec.APIGroup, Resource: v.Spec.Resource}
		placed := v.Spec.Source == edgev1alpha1.ViewSourcePlaced
		return &kubeapi.View{
			Resource: schema.GroupVersionResource{Group: v.Spec.APIGroup, Version: v.Spec.Version, Resource: v.Spec.Resource},
			Objects: store.View(st.Space(layout.ViewsSpace(space)), func(o *store.Object) bool {
				return o.Key.Resource == res && (o.Labels[edgev1alpha1.PlacedCopyLabel] == "true") == placed && sel.Matches(o.Labels)
			}),
			Partition: partitionOf(v.Spec.PartitionKey),
		}, nil
	}
}

// partitionOf is a View's partition function (nil without a key).
func partitionOf(key *edgev1alpha1.PartitionKey) func(*store.Object) string {
	switch {
	case key == nil:
		return nil
	case key.Label != "":
		return func(o *store.Object) string { return o.Labels[key.Label] }
	}
	path := strings.Split(key.Field, ".")
	memo := fieldMemo(key.Field)
	return func(o *store.Object) string {
		return o.Memo(memo, func(o *store.Object) any { return fieldValue(o.Data, path) }).(string)
	}
}

// fieldMemo keys the partition value of a field path in store.Object.Memo.
type fieldMemo string

// fieldValue is the string form of the scalar at path in an object's
// JSON ("" when there is none, or it is not a scalar).
func fieldValue(data []byte, path []string) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	v, ok, _ := unstructured.NestedFieldNoCopy(m, path...)
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// validateView checks what a View's schema cannot: its selector parses,
// its partition label is a label key, and the space serves its resource
// (served).
func validateView(obj *unstructured.Unstructured, served func(schema.GroupVersionResource) bool) field.ErrorList {
	var v edgev1alpha1.View
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &v); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	gvr := schema.GroupVersionResource{Group: v.Spec.APIGroup, Version: v.Spec.Version, Resource: v.Spec.Resource}
	if served != nil && !served(gvr) {
		errs = append(errs, field.NotFound(spec.Child("resource"), fmt.Sprintf("%s (version %s) is not served in this space", gvr.GroupResource(), gvr.Version)))
	}
	if v.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(v.Spec.Selector); err != nil {
			errs = append(errs, field.Invalid(spec.Child("selector"), v.Spec.Selector, err.Error()))
		}
	}
	if k := v.Spec.PartitionKey; k != nil && k.Label != "" {
		for _, msg := range validation.IsQualifiedName(k.Label) {
			errs = append(errs, field.Invalid(spec.Child("partitionKey", "label"), k.Label, msg))
		}
	}
	return errs
}
