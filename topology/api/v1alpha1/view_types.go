package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kind and resource of views.
const (
	KindView      = "View"
	ResourceViews = "views"
)

// ViewsGVR is the GroupVersionResource of View, for dynamic clients.
var ViewsGVR = SchemeGroupVersion.WithResource(ResourceViews)

func init() {
	SchemeBuilder.Register(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion, &View{}, &ViewList{})
		return nil
	})
}

// ViewSource says what a view gathers.
// +kubebuilder:validation:Enum=Upsynced;Placed
type ViewSource string

const (
	// ViewSourceUpsynced gathers the objects of the view's resource that
	// destinations upsync, through an upsync clause of a placement of the
	// view's space, one per destination.
	ViewSourceUpsynced ViewSource = "Upsynced"
	// ViewSourcePlaced gathers the live copies, at each destination, of
	// the objects of the view's resource that placements of the view's
	// space place there: the object as the destination's cluster holds it,
	// status included.
	ViewSourcePlaced ViewSource = "Placed"
)

// View serves the objects of one resource gathered from every destination
// as a read-only kube API of its own, at
// /spaces/<space>/views/<name>/, and, with a partition key, each
// partition at /spaces/<space>/views/<name>/partitions/<value>/. Each
// object is named <destination>.<name> and labelled
// edge.canopy.dev/destination. It lives in a workload description space.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=canopy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resource`,description="The resource it serves."
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.apiGroup`,description="Its API group."
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=`.status.objects`,description="Objects it serves."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type View struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ViewSpec `json:"spec"`
	// +optional
	Status ViewStatus `json:"status,omitempty"`
}

// ViewSpec names the resource a view serves and what it gathers.
type ViewSpec struct {
	// APIGroup is the resource's API group ("" or left out: the core
	// group).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup,omitempty"`

	// Version is the resource's version the view serves.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Version string `json:"version"`

	// Resource is the lower-case plural resource name; the view's space
	// must serve it (a built-in kind, or a CRD of the space).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Resource string `json:"resource"`

	// Source is what the view gathers: Upsynced (the default), the
	// objects destinations upsync; or Placed, the live copies at the
	// destinations of the objects placed there.
	// +optional
	// +kubebuilder:default=Upsynced
	Source ViewSource `json:"source,omitempty"`

	// Selector, when set, keeps the objects whose labels it selects.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// PartitionKey, when set, partitions the view by the value of a label
	// or a field of each object.
	// +optional
	PartitionKey *PartitionKey `json:"partitionKey,omitempty"`
}

// PartitionKey names what partitions a view: exactly one of Label and
// Field. An object whose value is missing, or not a valid label value,
// is in no partition (it is served by the whole view only).
// +kubebuilder:validation:XValidation:rule="has(self.label) != has(self.field)",message="exactly one of label and field"
type PartitionKey struct {
	// Label is a label key: an object's partition is its value.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Label string `json:"label,omitempty"`

	// Field is a field path, dot-separated (spec.providerName): an
	// object's partition is the string (or number, or boolean) there.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`
	Field string `json:"field,omitempty"`
}

// ViewStatus is what the root reports about a view.
type ViewStatus struct {
	// Objects is how many objects the view serves.
	// +optional
	Objects int64 `json:"objects,omitempty"`
}

// ViewList is a list of Views.
//
// +kubebuilder:object:root=true
type ViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []View `json:"items"`
}
