package v1alpha1

import (
	"time"

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

// Relay is one relay below the root as its parent sees the link to it:
// connected or not, and how far behind the parent's desired state it is.
// The root serves Relays in the inventory space, read-only and from
// memory: each relay with children reports its links up the tree, and
// nothing about them is stored (docs/user-guide.md, The console).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=canopy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.status.path`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Connected",type=boolean,JSONPath=`.status.connected`
// +kubebuilder:printcolumn:name="Lag-Revisions",type=integer,JSONPath=`.status.lag.revisions`
// +kubebuilder:printcolumn:name="Behind-Since",type=date,JSONPath=`.status.lag.since`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.lastSeen`
type Relay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status RelayStatus `json:"status,omitempty"`
}

// RelayStatus is the link from a relay's parent to it, as the parent last
// reported it.
type RelayStatus struct {
	// Path names the relays from the root down to this one, joined with
	// "/" (root/region-a/edge-1).
	// +optional
	Path string `json:"path,omitempty"`
	// Role is the relay's role: region or edge.
	// +optional
	Role string `json:"role,omitempty"`
	// Connected is whether the link from its parent is up.
	// +optional
	Connected bool `json:"connected"`
	// LastSeen is, for a disconnected relay, when its parent last heard
	// from it; unset while it is connected.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// Lag is set while the relay is connected and behind its parent: it
	// has not acknowledged a change sent RelayLagThreshold ago or longer.
	// (A disconnected relay is behind by whatever changed since LastSeen.)
	// +optional
	Lag *RelayLag `json:"lag,omitempty"`
}

// RelayLag is how far a relay trails its parent's desired state.
type RelayLag struct {
	// Revisions is how many of the parent's revisions the relay has not
	// acknowledged.
	Revisions int64 `json:"revisions"`
	// Since is when the parent sent the oldest change the relay has not
	// acknowledged.
	Since metav1.Time `json:"since"`
}

// RelayList is a list of Relays.
//
// +kubebuilder:object:root=true
type RelayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Relay `json:"items"`
}

// RelayLagThreshold is how long a change may wait for a connected relay's
// acknowledgement before its Relay shows it behind: shorter waits are a
// link at work or a busy relay catching up, and reporting each of them
// would send reports up the tree, and cost every tier, when it is busiest.
const RelayLagThreshold = 5 * time.Second
