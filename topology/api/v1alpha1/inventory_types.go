package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncTarget is one workload execution cluster (a destination). Its labels
// are its properties: Locations select SyncTargets by them, and
// customization substitutes them. It lives in the inventory space and is
// created by an admin or by the root when an edge relay first announces
// itself; the root keeps its status current from the relay tree.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=st,categories=canopy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.status.path`
// +kubebuilder:printcolumn:name="Connected",type=boolean,JSONPath=`.status.connected`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SyncTargetSpec `json:"spec,omitempty"`
	// +optional
	Status SyncTargetStatus `json:"status,omitempty"`
}

// SyncTargetSpec is empty for now: a SyncTarget's properties are its labels
// and annotations.
type SyncTargetSpec struct{}

// SyncTargetStatus is where the destination is in the relay tree, as the
// root last learned it. The root writes it; users should not.
type SyncTargetStatus struct {
	// Path names the relays from the root down to the edge relay serving
	// this destination, joined with "/" (root/region-a/edge-1).
	// +optional
	Path string `json:"path,omitempty"`
	// Connected is whether every link on the path is up.
	// +optional
	Connected bool `json:"connected"`
	// LastSeen is when the root last learned a change of this
	// destination's state: for a connected destination, when it
	// (re)connected or changed; for a disconnected one, when it was last
	// heard from.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
}

// SyncTargetList is a list of SyncTargets.
//
// +kubebuilder:object:root=true
type SyncTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncTarget `json:"items"`
}

// Location is a set of SyncTargets, chosen by label. Its own labels are
// what EdgePlacements select on (EdgePlacementSpec.LocationSelectors), so
// a Location is the unit in which users think about "where": a store, a
// site, a region. It may hold any number of SyncTargets, and a SyncTarget
// may belong to several Locations. It lives in the inventory space.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=loc,categories=canopy
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.instanceSelector.matchLabels`,description="The labels a SyncTarget must have (matchLabels of spec.instanceSelector)."
// +kubebuilder:printcolumn:name="Expressions",type=string,JSONPath=`.spec.instanceSelector.matchExpressions`,priority=1,description="The set-based requirements of spec.instanceSelector."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Location struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec LocationSpec `json:"spec"`
}

// LocationSpec says which SyncTargets a Location holds.
type LocationSpec struct {
	// InstanceSelector selects the SyncTargets of this Location by their
	// labels. The empty selector ({}) selects every SyncTarget.
	// +required
	InstanceSelector metav1.LabelSelector `json:"instanceSelector"`
}

// LocationList is a list of Locations.
//
// +kubebuilder:object:root=true
type LocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Location `json:"items"`
}
