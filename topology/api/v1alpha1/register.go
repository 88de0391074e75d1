package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "edge.canopy.dev"

// Version is the API version of every kind in this package.
const Version = "v1alpha1"

// SchemeGroupVersion is edge.canopy.dev/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Kinds.
const (
	KindSyncTarget           = "SyncTarget"
	KindLocation             = "Location"
	KindEdgePlacement        = "EdgePlacement"
	KindSinglePlacementSlice = "SinglePlacementSlice"
	KindCustomizer           = "Customizer"
	KindRelay                = "Relay"
)

// Resource names (plural, lower case), as they appear in URLs and in
// kubectl get.
const (
	ResourceSyncTargets           = "synctargets"
	ResourceLocations             = "locations"
	ResourceEdgePlacements        = "edgeplacements"
	ResourceSinglePlacementSlices = "singleplacementslices"
	ResourceCustomizers           = "customizers"
	ResourceRelays                = "relays"
)

// GroupVersionResources of the kinds, for dynamic clients.
var (
	SyncTargetsGVR           = SchemeGroupVersion.WithResource(ResourceSyncTargets)
	LocationsGVR             = SchemeGroupVersion.WithResource(ResourceLocations)
	EdgePlacementsGVR        = SchemeGroupVersion.WithResource(ResourceEdgePlacements)
	SinglePlacementSlicesGVR = SchemeGroupVersion.WithResource(ResourceSinglePlacementSlices)
	CustomizersGVR           = SchemeGroupVersion.WithResource(ResourceCustomizers)
	RelaysGVR                = SchemeGroupVersion.WithResource(ResourceRelays)
)

// Resource qualifies a resource name with this group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind qualifies a kind with this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&SyncTarget{}, &SyncTargetList{},
		&Location{}, &LocationList{},
		&EdgePlacement{}, &EdgePlacementList{},
		&SinglePlacementSlice{}, &SinglePlacementSliceList{},
		&Customizer{}, &CustomizerList{},
		&Relay{}, &RelayList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
