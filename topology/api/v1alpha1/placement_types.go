package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Bounds. The CRD schemas enforce the same numbers (maxItems); a test
// keeps the two in step.
const (
	// MaxDestinationsPerSlice is the page size of SinglePlacementSlices:
	// the scheduler writes an EdgePlacement's destinations into slices of
	// at most this many, so 100 000 destinations take 100 slices of a few
	// hundred KiB each, and a change to one destination rewrites one slice.
	MaxDestinationsPerSlice = 1000
	// MaxReportedConflicts bounds EdgePlacementStatus.Conflicts; the rest
	// are only counted (ConflictCount).
	MaxReportedConflicts = 100
)

// PlacementLabel is set on every SinglePlacementSlice to the name of its
// EdgePlacement, so that `kubectl get singleplacementslices -l
// edge.canopy.dev/placement=NAME` lists one placement's slices.
const PlacementLabel = GroupName + "/placement"

// Condition types of an EdgePlacement.
const (
	// ConditionSynced is True when every matched destination has applied
	// the current version of every object the placement selects
	// (SyncedDestinations == MatchedDestinations), False while some have
	// not or have failed.
	ConditionSynced = "Synced"
	// ConditionReady is True when the placement is Synced and the objects
	// it placed report themselves ready at every destination (from
	// reported state); Unknown until reported state arrives.
	ConditionReady = "Ready"
)

// Condition reasons of an EdgePlacement.
const (
	ReasonNoDestinations = "NoDestinations" // no Location selected, or its SyncTargets are gone
	ReasonPending        = "Pending"        // some destinations have not applied the current version yet
	ReasonFailed         = "Failed"         // some destinations failed to apply
	ReasonConflict       = "Conflict"       // another placement writes the same object differently
	ReasonAsExpected     = "AsExpected"     // the condition holds
)

// EdgePlacement says which workload objects of its space go to which
// Locations, and which objects created at the edge come back. An object
// is placed on every SyncTarget of every Location that LocationSelectors
// select, when it matches at least one Downsync clause. It lives in a
// workload description space (WDS).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=epl,categories=canopy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedDestinations`,description="Destinations (SyncTargets) the placement selects."
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.syncedDestinations`,description="Destinations that applied the current version of every selected object."
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failedDestinations`,priority=1,description="Destinations that failed to apply."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="The Ready condition."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EdgePlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EdgePlacementSpec `json:"spec"`
	// +optional
	Status EdgePlacementStatus `json:"status,omitempty"`
}

// EdgePlacementSpec is what to place where.
type EdgePlacementSpec struct {
	// LocationSelectors select Locations (in the inventory space) by their
	// labels: a Location is selected when any selector matches. An empty
	// selector ({}) selects every Location; no selectors select none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	LocationSelectors []metav1.LabelSelector `json:"locationSelectors,omitempty"`

	// Downsync says which objects of this space are placed: an object is
	// placed when it matches any clause. Cluster-scoped objects, including
	// CustomResourceDefinitions (apiGroup apiextensions.k8s.io, resource
	// customresourcedefinitions), are placed like namespaced ones.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Downsync []DownsyncClause `json:"downsync,omitempty"`

	// Upsync says which objects created at a destination (not placed
	// there) come back into this space: an object comes back when it
	// matches any clause.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Upsync []UpsyncClause `json:"upsync,omitempty"`

	// WantSingletonReportedState asks that, when an object is placed on
	// exactly one destination, that destination's .status be written back
	// into the object's .status in this space.
	// +optional
	WantSingletonReportedState bool `json:"wantSingletonReportedState,omitempty"`

	// StatusCollectors name StatusCollector objects of this space whose
	// results are combined, per placed object, into a CombinedStatus.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	StatusCollectors []string `json:"statusCollectors,omitempty"`
}

// DownsyncClause matches workload objects of the space. An object matches
// when it satisfies every field that is set; a field left out does not
// constrain. Lists of names accept "*", which matches any name.
type DownsyncClause struct {
	// APIGroup is the object's API group: "" is the core group (v1);
	// left out, any group matches.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup *string `json:"apiGroup,omitempty"`

	// Resources are lower-case plural resource names (deployments,
	// configmaps, customresourcedefinitions), or "*".
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Resources []string `json:"resources"`

	// Namespaces of the object, or "*". A namespaced object matches when
	// its namespace is listed here or selected by NamespaceSelector; with
	// neither set, every namespace matches. Cluster-scoped objects ignore
	// both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects namespaces by the labels of their
	// Namespace object (see Namespaces).
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ObjectNames are the object's name, or "*".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	ObjectNames []string `json:"objectNames,omitempty"`

	// LabelSelectors select objects by their labels: an object matches
	// when any selector does.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	LabelSelectors []metav1.LabelSelector `json:"labelSelectors,omitempty"`

	// Customizer names a Customizer applied to the objects this clause
	// selects, instead of the one their CustomizerAnnotation names: NAME
	// of a Customizer in the object's namespace for a namespaced object,
	// NAMESPACE/NAME for a cluster-scoped one. An object matched by
	// several clauses of one placement takes the first matching clause's.
	// Two placements that select the same object for the same destination
	// with different customizers are in conflict: both report it in their
	// status (Conflicts) and one deterministic winner is applied.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Customizer string `json:"customizer,omitempty"`
}

// UpsyncClause matches objects created at a destination. An object
// matches when it satisfies every field that is set; lists of names accept
// "*".
type UpsyncClause struct {
	// APIGroup is the object's API group: "" is the core group; left out,
	// any group matches.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup *string `json:"apiGroup,omitempty"`

	// Resources are lower-case plural resource names, or "*".
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Resources []string `json:"resources"`

	// Namespaces of the object, or "*"; left out, every namespace.
	// Cluster-scoped objects ignore it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Namespaces []string `json:"namespaces,omitempty"`

	// Names of the object, as shell patterns (path.Match: * matches any
	// run of characters, ? one, [...] one of a class; "up-*", "*"); left
	// out, every name. A malformed pattern is refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`
}

// EdgePlacementStatus is what became of a placement, written by the root.
type EdgePlacementStatus struct {
	// ObservedGeneration is the metadata.generation of the spec the
	// status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchedDestinations counts the destinations (SyncTargets) the
	// placement selects.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MatchedDestinations int32 `json:"matchedDestinations"`
	// SyncedDestinations counts the matched destinations that have applied
	// every selected object as of SyncedRevision.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SyncedDestinations int32 `json:"syncedDestinations"`
	// FailedDestinations counts the matched destinations that failed to
	// apply some selected object.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailedDestinations int32 `json:"failedDestinations"`
	// SyncedRevision is the root revision (a resourceVersion of this
	// space) that SyncedDestinations refers to.
	// +optional
	SyncedRevision string `json:"syncedRevision,omitempty"`

	// Conflicts lists up to MaxReportedConflicts (100) objects that this
	// placement and another one place on the same destination with
	// different contents; ConflictCount counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// ConflictCount counts all conflicts, listed or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConflictCount int32 `json:"conflictCount,omitempty"`

	// Conditions: Synced and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Conflict is one object that two or more placements put on the same
// destination with different contents (after customization). One
// deterministic winner is applied.
type Conflict struct {
	// Object is the workload object in conflict.
	// +required
	Object ObjectReference `json:"object"`
	// Destination is the SyncTarget it is placed on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Destination string `json:"destination"`
	// Placements are the EdgePlacements that disagree, this one included.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Placements []string `json:"placements"`
	// Winner is the EdgePlacement whose version is applied.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Winner string `json:"winner,omitempty"`
	// Message says how they differ.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ObjectReference names a workload object by group, resource, namespace
// and name.
type ObjectReference struct {
	// Group is the API group; "" is the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// Resource is the lower-case plural resource name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
	// Namespace is empty for cluster-scoped objects.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EdgePlacementList is a list of EdgePlacements.
//
// +kubebuilder:object:root=true
type EdgePlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgePlacement `json:"items"`
}

// SinglePlacementSlice is one page of the scheduler's output for one
// EdgePlacement: destinations it matches, at most MaxDestinationsPerSlice
// per slice. The scheduler writes it in the EdgePlacement's space, with an
// ownerReference to the EdgePlacement (deleting the placement deletes its
// slices) and the label PlacementLabel; users only read it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sps,categories=canopy
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.edgePlacement`,description="The EdgePlacement these destinations belong to."
// +kubebuilder:printcolumn:name="Destinations",type=integer,JSONPath=`.destinationCount`,description="Destinations in this slice."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.destinationCount == (has(self.destinations) ? size(self.destinations) : 0)",message="destinationCount must equal the number of destinations"
type SinglePlacementSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// EdgePlacement names the EdgePlacement (in the same space) whose
	// destinations this slice holds.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	EdgePlacement string `json:"edgePlacement"`

	// Destinations matched by the EdgePlacement, sorted by SyncTarget name
	// then Location name; at most MaxDestinationsPerSlice (1000).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Destinations []Destination `json:"destinations,omitempty"`

	// DestinationCount is len(Destinations), kept as a field so that
	// kubectl get can show it.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	DestinationCount int32 `json:"destinationCount"`
}

// Destination is one SyncTarget matched through one Location.
type Destination struct {
	// SyncTargetName is the SyncTarget's name (in the inventory space).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SyncTargetName string `json:"syncTargetName"`
	// SyncTargetUID is the SyncTarget's metadata.uid, so that a SyncTarget
	// deleted and re-created under the same name is a new destination.
	// +optional
	SyncTargetUID types.UID `json:"syncTargetUID,omitempty"`
	// LocationName is the Location that selected the SyncTarget (the first
	// by name, when several did).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	LocationName string `json:"locationName"`
	// Labels are the SyncTarget's labels when it was scheduled: what
	// routing, status grouping and the root's customization preview need
	// without re-reading the inventory.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`
}

// SinglePlacementSliceList is a list of SinglePlacementSlices.
//
// +kubebuilder:object:root=true
type SinglePlacementSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SinglePlacementSlice `json:"items"`
}
