package syncer

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/customize"
)

// instructionAnnotations are what the root writes on placed objects for
// the tree and for this syncer; none of them reaches the cluster.
var instructionAnnotations = [...]string{
	v1alpha1.DestinationsAnnotation,
	v1alpha1.SourceAnnotation,
	v1alpha1.CustomizerOverridesAnnotation,
	v1alpha1.LocationAnnotation,
	v1alpha1.LocationOverridesAnnotation,
	v1alpha1.SourceRevisionAnnotation,
	v1alpha1.ViewedAnnotation,
}

// serverMetadata are metadata fields the cluster assigns (or that refer to
// another cluster's objects): never part of what is applied.
var serverMetadata = [...]string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers"}

// DesiredObject is one inbox object as this destination must hold it.
type DesiredObject struct {
	// Key is the object's inbox key, with an empty Space.
	Key store.Key
	// Revision is the inbox revision of the version it was made from.
	Revision int64
	// Object is the customized object, without Canopy's instruction
	// annotations, server-set metadata or status.
	Object *unstructured.Unstructured
}

// ObjectError says why one inbox object cannot be applied here.
type ObjectError struct {
	Key store.Key // Space empty
	Err error
}

func (e ObjectError) Error() string { return KeyString(e.Key) + ": " + e.Err.Error() }
func (e ObjectError) Unwrap() error { return e.Err }

// KeyString renders an inbox key as reports name it:
// "deployments.apps/shop/web", "namespaces/shop" (cluster-scoped).
func KeyString(k store.Key) string {
	if k.Namespace == "" {
		return k.Resource.String() + "/" + k.Name
	}
	return k.Resource.String() + "/" + k.Namespace + "/" + k.Name
}

// Desired computes what destination self must hold from its inbox: every
// object not of group edge.canopy.dev (those are Canopy's own: the
// destination's SyncTarget and Location, the Customizers), customized for
// self.
//
// The parameters are customize.ParamsFor(self's SyncTarget, a Location),
// both found in the inbox: the Location the object's
// v1alpha1.LocationOverridesAnnotation names for self
// ("dest=location,..."), else the one self's SyncTarget's
// v1alpha1.LocationAnnotation names. The Customizer of an object is the
// one v1alpha1.CustomizerOverridesAnnotation names for self ("dest=namespace/name,...", an empty name meaning none),
// else the one its v1alpha1.CustomizerAnnotation names. The result carries
// none of the instruction annotations (placement's and customize's), no
// server-set metadata and no status.
//
// An object that cannot be expanded (an unknown parameter, a missing or
// malformed Customizer reference, a failing replacement, not an object)
// is left out and reported in errs, never half-expanded. An object whose
// v1alpha1.DestinationsAnnotation does not name self is left out silently
// (it is not for this destination). Objects keep the inbox's order.
//
// Desired is pure: it reads inbox (which it never changes) and nothing
// else, and is safe for concurrent use.
func Desired(inbox []*store.Object, self string) ([]DesiredObject, []ObjectError) {
	var m desiredMemo
	return m.desired(inbox, self)
}

// expansion is what every object's expansion reads besides the object:
// the parameters, and the inbox's Customizers and Locations (decoded once
// each).
type expansion struct {
	params  customize.Params // with the SyncTarget's own Location
	target  *v1alpha1.SyncTarget
	locs    map[string]*store.Object
	atLoc   map[string]customize.Params // by the Location an object names
	custs   map[[2]string]*store.Object
	decoded map[[2]string]*v1alpha1.Customizer
}

// newExpansion reads self's SyncTarget, its Location and the Customizers
// from inbox.
func newExpansion(inbox []*store.Object, self string) *expansion {
	var (
		target    *v1alpha1.SyncTarget
		locations = map[string]*store.Object{}
		e         = &expansion{locs: locations, atLoc: map[string]customize.Params{},
			custs: map[[2]string]*store.Object{}, decoded: map[[2]string]*v1alpha1.Customizer{}}
	)
	for _, o := range inbox {
		if o.Key.Resource.Group != v1alpha1.GroupName {
			continue
		}
		switch o.Key.Resource.Resource {
		case v1alpha1.ResourceSyncTargets:
			if o.Key.Name == self {
				var st v1alpha1.SyncTarget
				if json.Unmarshal(o.Data, &st) == nil {
					target = &st
				}
			}
		case v1alpha1.ResourceLocations:
			locations[o.Key.Name] = o
		case v1alpha1.ResourceCustomizers:
			e.custs[[2]string{o.Key.Namespace, o.Key.Name}] = o
		}
	}
	var own string
	if target != nil {
		own = target.Annotations[v1alpha1.LocationAnnotation]
		target.Annotations = withoutInstructions(target.Annotations)
	}
	e.target = target
	e.params = customize.ParamsFor(target, e.location(own))
	return e
}

// location decodes Location name of the inbox; nil when there is none.
func (e *expansion) location(name string) *v1alpha1.Location {
	o := e.locs[name]
	if o == nil {
		return nil
	}
	var l v1alpha1.Location
	if json.Unmarshal(o.Data, &l) != nil {
		return nil
	}
	l.Annotations = withoutInstructions(l.Annotations)
	return &l
}

// paramsAt returns the parameters of self reached through Location loc.
func (e *expansion) paramsAt(loc string) customize.Params {
	p, ok := e.atLoc[loc]
	if !ok {
		p = customize.ParamsFor(e.target, e.location(loc))
		e.atLoc[loc] = p
	}
	return p
}

// customizer returns Customizer ns/name of the inbox, decoded.
func (e *expansion) customizer(ns, name string) (*v1alpha1.Customizer, error) {
	k := [2]string{ns, name}
	if c, ok := e.decoded[k]; ok {
		return c, nil
	}
	o := e.custs[k]
	if o == nil {
		return nil, fmt.Errorf("%w: %s/%s", ErrCustomizerNotFound, ns, name)
	}
	var c v1alpha1.Customizer
	if err := json.Unmarshal(o.Data, &c); err != nil {
		return nil, fmt.Errorf("%w: customizer %s/%s: %v", ErrInvalidObject, ns, name, err)
	}
	e.decoded[k] = &c
	return &c, nil
}

// desiredOne expands one workload object; nil, nil when it is not for
// self.
func desiredOne(o *store.Object, self string, e *expansion) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(o.Data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidObject)
	}
	ann := stringMap(m, "metadata", "annotations")
	if d, ok := ann[v1alpha1.DestinationsAnnotation]; ok && !listed(d, self) {
		return nil, nil
	}
	var cust *v1alpha1.Customizer
	ref, overridden := override(ann[v1alpha1.CustomizerOverridesAnnotation], self)
	if !overridden {
		ref = ann[v1alpha1.CustomizerAnnotation]
	}
	if ref != "" {
		ns, name, ok := customize.CustomizerRef(m, ref)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrBadCustomizerRef, ref)
		}
		c, err := e.customizer(ns, name)
		if err != nil {
			return nil, err
		}
		cust = c
	}
	params := e.params
	if loc, ok := override(ann[v1alpha1.LocationOverridesAnnotation], self); ok {
		params = e.paramsAt(loc)
	}
	exp, err := customize.Expand(m, params, cust)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: exp}
	clean(u)
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return nil, fmt.Errorf("%w: apiVersion, kind and metadata.name are required", ErrInvalidObject)
	}
	return u, nil
}

// clean removes what the cluster must not receive: instruction
// annotations, server-set metadata and status.
func clean(u *unstructured.Unstructured) {
	delete(u.Object, "status")
	md, _ := u.Object["metadata"].(map[string]any)
	if md == nil {
		return
	}
	for _, f := range serverMetadata {
		delete(md, f)
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		for _, k := range instructionAnnotations {
			delete(a, k)
		}
		if len(a) == 0 {
			delete(md, "annotations")
		}
	}
}

func withoutInstructions(a map[string]string) map[string]string {
	if a == nil {
		return nil
	}
	out := make(map[string]string, len(a))
	for k, v := range a {
		out[k] = v
	}
	for _, k := range instructionAnnotations {
		delete(out, k)
	}
	return out
}

// override finds self in a CustomizerOverridesAnnotation or
// LocationOverridesAnnotation value.
func override(v, self string) (ref string, ok bool) {
	for _, pair := range strings.Split(v, ",") {
		d, c, found := strings.Cut(strings.TrimSpace(pair), "=")
		if found && d == self {
			return strings.TrimSpace(c), true
		}
	}
	return "", false
}

// listed reports whether a comma-separated list names self.
func listed(list, self string) bool {
	for _, d := range strings.Split(list, ",") {
		if strings.TrimSpace(d) == self {
			return true
		}
	}
	return false
}

// stringMap reads a map of strings at path (non-strings are skipped).
func stringMap(m map[string]any, path ...string) map[string]string {
	var cur any = m
	for _, p := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[p]
	}
	src, _ := cur.(map[string]any)
	out := make(map[string]string, len(src))
	for k, v := range src {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
