package resources

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/canopy-dev/canopy/relay/apiserver/resources/internal/apiregistration"
)

// Info describes one served resource: one group, version and resource.
type Info struct {
	// Group is the API group ("" for the core group), Version the one
	// version served, Resource the plural lower-case name used in URLs.
	Group, Version, Resource string
	// Kind and ListKind name the object and list types (ListKind is empty
	// for the reviews, which cannot be listed); Singular is the singular
	// resource name discovery reports (kubectl accepts it).
	Kind, ListKind, Singular string
	// Namespaced is true for namespace-scoped resources.
	Namespaced bool
	// Verbs are the verbs discovery lists for the resource itself, sorted:
	// a subset of create delete deletecollection get list patch update watch.
	Verbs []string
	// ShortNames and Categories are what discovery lists ("all" is the
	// category `kubectl get all` expands).
	ShortNames []string
	Categories []string
	// Status is true when the resource has a status subresource
	// (verbs get, patch, update).
	Status bool
	// Scale, when not nil, describes the scale subresource (autoscaling/v1
	// Scale; verbs get, patch, update).
	Scale *ScaleInfo
	// Subresources lists the other subresources served, beyond status and
	// scale (serviceaccounts/token, for one).
	Subresources []Subresource
	// Strategic is true when strategic merge patch is supported, that is
	// for every type compiled into Canopy (all of the built-ins).
	Strategic bool
	// New returns a new, empty object of the Go type behind Kind, for
	// strategic merge patch and strict decoding. Its GVK is registered in
	// [Scheme].
	New func() runtime.Object
	// Fields returns the fields a field selector may use for this kind
	// beyond metadata.name and metadata.namespace (which the caller adds),
	// computed from the object's JSON map; nil when there are none. Values
	// are formatted as kube formats them: booleans "true"/"false", integers
	// in decimal, missing strings "".
	Fields func(obj map[string]any) fields.Set
	// Table prints objects of this resource as kubectl tables.
	Table TableConvertor
}

// GroupVersionResource returns the Info's group, version and resource.
func (i *Info) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: i.Group, Version: i.Version, Resource: i.Resource}
}

// GroupVersionKind returns the Info's group, version and kind.
func (i *Info) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: i.Group, Version: i.Version, Kind: i.Kind}
}

// ScaleInfo describes a scale subresource with JSON paths into the object,
// in the form a CustomResourceDefinition uses (".spec.replicas"), so the same
// description serves built-ins and custom resources.
type ScaleInfo struct {
	// SpecReplicasPath locates the desired replicas (an integer).
	SpecReplicasPath string
	// StatusReplicasPath locates the observed replicas (an integer).
	StatusReplicasPath string
	// LabelSelectorPath locates the selector reported as Scale
	// status.selector. When the value there is a string (as a custom
	// resource keeps it) it is used as is. For the built-ins it is
	// ".spec.selector", the structured selector itself, which
	// [ScaleFromObject] serializes as kube does: a metav1.LabelSelector
	// (apps) or a map of labels (replicationcontrollers). Empty means no
	// selector is reported.
	LabelSelectorPath string
}

// Subresource describes a subresource other than status and scale.
type Subresource struct {
	// Name is the subresource's name ("token" in serviceaccounts/token).
	Name string
	// Group, Version and Kind are the type the subresource accepts and
	// returns, when it differs from its parent's (discovery reports them);
	// empty means the parent's.
	Group, Version, Kind string
	// Verbs are the verbs discovery lists for the subresource.
	Verbs []string
}

// TableConvertor prints objects of one resource as the rows of a
// metav1.Table. Implementations are safe for concurrent use.
type TableConvertor interface {
	// Columns returns the column definitions: Priority 0 columns are
	// printed by default, Priority 1 columns only with -o wide.
	Columns() []metav1.TableColumnDefinition
	// Cells returns one row: one value per column, in column order, as
	// string, int64 or bool. now is the time AGE and similar columns are
	// measured against.
	Cells(obj *unstructured.Unstructured, now time.Time) []any
}

var (
	scheme  = newScheme()
	catalog = newCatalog()
	byGR    = indexCatalog(catalog)
	groups  = groupsOf(catalog)
)

// Scheme returns the scheme holding the Go type of every served kind: the
// types of client-go's scheme, apiextensions.k8s.io/v1 and
// apiregistration.k8s.io/v1. It is shared and must not be modified.
func Scheme() *runtime.Scheme { return scheme }

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		apiregistration.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic("resources: building scheme: " + err.Error())
		}
	}
	return s
}

// Builtins returns every served built-in resource, sorted by group (the
// core group first) and then by resource. The slice is new on every call;
// the Infos are shared and must not be modified.
func Builtins() []*Info {
	out := make([]*Info, len(catalog))
	copy(out, catalog)
	return out
}

// Lookup returns the served built-in resource with the given group and
// plural resource name, at whatever version it is served, or nil.
func Lookup(group, resource string) *Info {
	return byGR[schema.GroupResource{Group: group, Resource: resource}]
}

// BuiltinGroup reports whether group is the API group of a served built-in
// resource (the core group "" included). Such a group belongs to the
// built-in API as a whole: kube-apiserver's own resources live there, so a
// CustomResourceDefinition must not define resources in it.
func BuiltinGroup(group string) bool {
	_, ok := groups[group]
	return ok
}

func groupsOf(infos []*Info) map[string]struct{} {
	m := map[string]struct{}{}
	for _, info := range infos {
		m[info.Group] = struct{}{}
	}
	return m
}

func indexCatalog(infos []*Info) map[schema.GroupResource]*Info {
	m := make(map[schema.GroupResource]*Info, len(infos))
	for _, info := range infos {
		gr := schema.GroupResource{Group: info.Group, Resource: info.Resource}
		if _, dup := m[gr]; dup {
			panic("resources: duplicate resource " + gr.String())
		}
		m[gr] = info
	}
	return m
}

// HumanDuration formats d the way kube prints AGE columns ("5s", "3m2s",
// "10m", "5h", "2d3h", "3y"): about two significant figures. It is
// k8s.io/apimachinery's duration.HumanDuration.
func HumanDuration(d time.Duration) string {
	return duration.HumanDuration(d)
}
