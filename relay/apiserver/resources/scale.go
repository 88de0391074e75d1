package resources

import (
	"errors"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrNoScale is returned for a resource without a scale subresource.
var ErrNoScale = errors.New("resources: resource has no scale subresource")

// ScaleFromObject builds the autoscaling/v1 Scale view of obj, as kube's
// scale subresource returns it: the object's name, namespace, UID,
// resourceVersion and creationTimestamp; spec.replicas; status.replicas; and
// status.selector serialized as a label selector string. Missing replica
// counts read as 0.
func ScaleFromObject(info *Info, obj *unstructured.Unstructured) (*autoscalingv1.Scale, error) {
	if info == nil || info.Scale == nil {
		return nil, ErrNoScale
	}
	o := object(obj.Object)
	spec, err := replicasAt(o, info.Scale.SpecReplicasPath)
	if err != nil {
		return nil, err
	}
	status, err := replicasAt(o, info.Scale.StatusReplicasPath)
	if err != nil {
		return nil, err
	}
	selector, err := selectorAt(o, info.Scale.LabelSelectorPath)
	if err != nil {
		return nil, err
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              obj.GetName(),
			Namespace:         obj.GetNamespace(),
			UID:               obj.GetUID(),
			ResourceVersion:   obj.GetResourceVersion(),
			CreationTimestamp: obj.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, nil
}

// ApplyScale writes scale.spec.replicas into obj at the spec replicas path.
// When scale carries a resourceVersion it is copied onto obj, so that the
// caller's ordinary update of obj fails on a stale scale as kube's does.
// Negative replicas are rejected; nothing else of obj changes.
func ApplyScale(info *Info, obj *unstructured.Unstructured, scale *autoscalingv1.Scale) error {
	if info == nil || info.Scale == nil {
		return ErrNoScale
	}
	if scale.Spec.Replicas < 0 {
		return fmt.Errorf("resources: spec.replicas: must be greater than or equal to 0, got %d", scale.Spec.Replicas)
	}
	path, err := jsonPath(info.Scale.SpecReplicasPath)
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(obj.Object, int64(scale.Spec.Replicas), path...); err != nil {
		return fmt.Errorf("resources: setting %s: %w", info.Scale.SpecReplicasPath, err)
	}
	if rv := scale.ResourceVersion; rv != "" {
		obj.SetResourceVersion(rv)
	}
	return nil
}

// jsonPath splits a simple JSON path (".spec.replicas") into field names.
func jsonPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, ".") || len(p) < 2 || strings.Contains(p, "..") || strings.ContainsAny(p, "[]*") {
		return nil, fmt.Errorf("resources: unsupported JSON path %q", p)
	}
	return strings.Split(p[1:], "."), nil
}

// replicasAt reads an integer at path; absent reads as 0.
func replicasAt(o object, p string) (int32, error) {
	path, err := jsonPath(p)
	if err != nil {
		return 0, err
	}
	v, ok := o.get(path...)
	if !ok {
		return 0, nil
	}
	n, ok := asInt(v)
	if !ok {
		return 0, fmt.Errorf("resources: %s is a %T, not an integer", p, v)
	}
	return int32(n), nil
}

// selectorAt serializes the selector at path: a string is used as is (a
// custom resource's status.selector), a map of strings is a set of labels
// (a replicationcontroller's spec.selector), any other map a
// metav1.LabelSelector (apps).
func selectorAt(o object, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	path, err := jsonPath(p)
	if err != nil {
		return "", err
	}
	v, ok := o.get(path...)
	if !ok {
		return "", nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	m, ok := asMap(v)
	if !ok {
		return "", fmt.Errorf("resources: %s is a %T, not a selector", p, v)
	}
	if set, ok := labelSet(m); ok {
		return labels.SelectorFromSet(set).String(), nil
	}
	sel, err := o.labelSelector(path...)
	if err != nil {
		return "", fmt.Errorf("resources: %s: %w", p, err)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", fmt.Errorf("resources: %s: %w", p, err)
	}
	return s.String(), nil
}

// labelSet returns m as a label set when every value is a string.
func labelSet(m map[string]any) (labels.Set, bool) {
	set := make(labels.Set, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		set[k] = s
	}
	return set, true
}
