package v1alpha1

// Annotations and labels of group edge.canopy.dev that travel between
// tiers: the placement translator writes them at the root, the relay tree
// routes by them, the edge syncer reads them, and reports carry them back.
// The group's other annotations and labels, which users write or read on
// their own objects, are kept with their kinds: CustomizerAnnotation and
// ExpandParametersAnnotation (customizer_types.go), PlacementLabel
// (placement_types.go), ObjectResourceLabel and ObjectNameLabel
// (status_types.go).

// Annotations of the objects of the root's downsync space, which every
// tier below receives as they are (but for DestinationsAnnotation, trimmed
// to the destinations below each child).
const (
	// DestinationsAnnotation lists (comma-separated) the destinations a
	// placed object targets: the relay tree routes by it, and an edge
	// applies only what lists it.
	DestinationsAnnotation = GroupName + "/destinations"
	// SourceAnnotation names the workload description space an object was
	// placed from (the inventory space for the SyncTargets and Locations sent
	// to their destinations); the placement controller owns (and deletes)
	// only the objects of the downsync space that carry it.
	SourceAnnotation = GroupName + "/placed-from"
	// SourceRevisionAnnotation is the resourceVersion of the workload
	// object a placed object was placed from (a root revision): what an
	// edge reports as applied (PlacementSync).
	SourceRevisionAnnotation = GroupName + "/source-revision"
	// CustomizerOverridesAnnotation lists, for destinations where the
	// winning placement chose another Customizer than the object's
	// CustomizerAnnotation, "destination=namespace/name" pairs
	// (comma-separated; an empty name means none).
	CustomizerOverridesAnnotation = GroupName + "/customizer-overrides"
	// LocationAnnotation, on a SyncTarget sent to its destination, names
	// the Location whose labels and annotations customize the objects
	// there, but for those that LocationOverridesAnnotation sends
	// elsewhere.
	LocationAnnotation = GroupName + "/location"
	// LocationOverridesAnnotation lists, on a workload object, for
	// destinations where the placement that wins it reached them through
	// another Location than their SyncTarget's LocationAnnotation names,
	// "destination=location" pairs (comma-separated): the Location that
	// customizes it there.
	LocationOverridesAnnotation = GroupName + "/location-overrides"
	// ViewedAnnotation, set to "true" on a placed object, says that a View
	// of its space gathers its live copies (ViewSourcePlaced): each
	// destination reports its copy under reports.ForwardedName, and that
	// report carries the annotation too.
	ViewedAnnotation = GroupName + "/viewed"
)

// DestinationAnnotation, on a forwarded report (upsynced object, singleton
// live state), names the destination it comes from.
const DestinationAnnotation = GroupName + "/destination"

// Labels of the objects Views serve.
const (
	// DestinationLabel names the destination the object came from.
	DestinationLabel = GroupName + "/destination"
	// PlacedCopyLabel, set to "true", marks the live copy of a placed
	// object (a View of source Placed serves it); an upsynced object
	// never carries it.
	PlacedCopyLabel = GroupName + "/placed-copy"
)

// Labels of objects in workload description spaces.
const (
	// UpsyncedLabel, set to "true", marks the objects of a workload
	// description space the placement controller wrote from upsync
	// reports; they are never placed.
	UpsyncedLabel = GroupName + "/upsynced"
	// SpaceRBACLabel, set to "true" on an RBAC object of a workload
	// description space, makes it govern access to that space (it is then
	// never placed). Without it, an RBAC object of such a space is inert
	// there: a workload to be applied at destinations. The default
	// ClusterRoles every space is created with (label
	// kubernetes.io/bootstrapping=rbac-defaults) are in effect too.
	SpaceRBACLabel = GroupName + "/space-rbac"
)
