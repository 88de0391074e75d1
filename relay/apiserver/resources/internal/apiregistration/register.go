package apiregistration

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is apiregistration.k8s.io/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}

// AddToScheme registers APIService and APIServiceList under SchemeGroupVersion.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &APIService{}, &APIServiceList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
