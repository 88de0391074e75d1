package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations on workload objects that ask for customization. Expansion
// happens per destination, as late as possible: at the edge, which knows
// its own properties.
const (
	// CustomizerAnnotation names the Customizer applied to an object: for
	// a namespaced object, a Customizer of the object's namespace (NAME);
	// for a cluster-scoped object, NAMESPACE/NAME.
	CustomizerAnnotation = GroupName + "/customizer"
	// ExpandParametersAnnotation, set to "true", asks that parameter
	// references (see Replacement.Value) in every string of the object be
	// expanded, before any Customizer applies.
	ExpandParametersAnnotation = GroupName + "/expand-parameters"
)

// Built-in customization parameters; every other parameter name is looked
// up in the destination's Location annotations, Location labels,
// SyncTarget annotations and SyncTarget labels, in that order.
const (
	ParamSyncTargetName = "syncTargetName"
	ParamLocationName   = "locationName"
)

// Customizer holds rule-based replacements applied to the objects that
// name it (CustomizerAnnotation), separately for each destination. It
// lives in a workload description space, in the namespace of the objects
// that use it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=cust,categories=canopy
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Customizer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Replacements are applied in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Replacements []Replacement `json:"replacements,omitempty"`
}

// Replacement sets one field of an object to a per-destination value.
type Replacement struct {
	// Path is a JSON Pointer (RFC 6901) to the field, such as
	// /spec/replicas or /data/zone. The field is set the way a JSON Patch
	// "add" sets it: its parent must exist; in an array, an index inserts
	// and "-" appends.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(/([^/~]|~[01])*)+$`
	Path string `json:"path"`

	// Value is a template of the field's new value, as JSON text: '3',
	// '"eu-%(zone)"', '{"zone": "%(zone)"}'. Each %(NAME) is replaced by
	// the destination's parameter NAME (ParamSyncTargetName,
	// ParamLocationName, else a Location or SyncTarget annotation or
	// label); %% writes a single %. The expanded text must be one JSON
	// value. An unknown parameter fails the object at that destination.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value"`

	// DestinationSelector limits the replacement to destinations whose
	// SyncTarget labels it matches; left out, it applies at every
	// destination.
	// +optional
	DestinationSelector *metav1.LabelSelector `json:"destinationSelector,omitempty"`
}

// CustomizerList is a list of Customizers.
//
// +kubebuilder:object:root=true
type CustomizerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Customizer `json:"items"`
}
