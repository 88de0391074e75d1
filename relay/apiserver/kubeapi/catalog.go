package kubeapi

import (
	"encoding/json"
	"sort"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/apiserver/resources"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

var crdResource = store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// served is one resource as the server serves it in one space: a built-in
// kind or a version of a custom resource.
type served struct {
	group, version, resource string
	kind, listKind, singular string
	namespaced               bool
	verbs                    []string
	shortNames, categories   []string
	status                   bool
	scale                    *resources.ScaleInfo
	// newTyped returns the Go type of a built-in kind (nil for custom
	// resources): strategic merge patch and strict decoding use it.
	newTyped func() runtime.Object
	// empty is newTyped's empty object as unstructured content (nil for
	// custom resources), built once: newLive copies it.
	empty   map[string]any
	fields  func(map[string]any) fields.Set
	table   tableConvertor
	builtin *resources.Info
	crd     *crd.Definition
	crdVer  *crd.Version
	// viewed is set on the resource of a view (served.readOnly): it has
	// no subresources.
	viewed bool
}

type tableConvertor = resources.TableConvertor

func (s *served) gr() schema.GroupResource {
	return schema.GroupResource{Group: s.group, Resource: s.resource}
}

func (s *served) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: s.group, Version: s.version, Kind: s.kind}
}

func (s *served) apiVersion() string {
	return s.gvk().GroupVersion().String()
}

func (s *served) storeResource() store.Resource {
	return store.Resource{Group: s.group, Resource: s.resource}
}

// hasVerb reports whether discovery lists verb for the resource.
func (s *served) hasVerb(verb string) bool {
	for _, v := range s.verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// catalog answers "what does space S serve": the built-in kinds plus the
// custom resources of S's established CRDs. CRDs are read from the store on
// demand and compiled once per stored revision, so a CRD is served as soon
// as its write is acknowledged.
type catalog struct {
	store    *store.Store
	builtins map[schema.GroupResource]*served
	byGK     map[schema.GroupKind]*served // built-ins by group and kind

	mu       sync.Mutex
	compiled map[store.Key]*compiledCRD
}

type compiledCRD struct {
	revision int64
	def      *crd.Definition
	obj      *apiextensionsv1.CustomResourceDefinition
	// specHash names the OpenAPI documents of the CRD by content (see
	// openAPIHash), computed once per revision.
	specHash func() string
}

func newCatalog(st *store.Store) *catalog {
	b := builtinCatalog()
	return &catalog{store: st, builtins: b.byGR, byGK: b.byGK, compiled: map[store.Key]*compiledCRD{}}
}

// builtinCatalog is built once per process and shared by every server (a
// simulation runs thousands of them): built-in kinds are the same for all.
var builtinCatalog = sync.OnceValue(func() (b struct {
	byGR map[schema.GroupResource]*served
	byGK map[schema.GroupKind]*served
}) {
	b.byGR = map[schema.GroupResource]*served{}
	b.byGK = map[schema.GroupKind]*served{}
	for _, info := range resources.Builtins() {
		s := &served{
			group: info.Group, version: info.Version, resource: info.Resource,
			kind: info.Kind, listKind: info.ListKind, singular: info.Singular,
			namespaced: info.Namespaced, verbs: info.Verbs,
			shortNames: info.ShortNames, categories: info.Categories,
			status: info.Status, scale: info.Scale,
			newTyped: info.New, fields: info.Fields, table: info.Table,
			builtin: info,
		}
		if s.table == nil {
			s.table = resources.DefaultTable()
		}
		if s.newTyped != nil {
			s.empty, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(s.newTyped())
		}
		b.byGR[s.gr()] = s
		b.byGK[s.gvk().GroupKind()] = s
	}
	return b
})

// SpaceKind returns the kind of space name (layout.SpaceKindWDS, ...), and false
// when there is no such space.
func (s *Server) SpaceKind(name string) (string, bool) {
	rec := s.catalog.space(name)
	if rec == nil {
		return "", false
	}
	kind, _ := layout.SpaceOf(rec)
	return kind, true
}

// space returns the record of space name (layout.SpaceOf reads its kind
// and whether it is being deleted), nil when there is no such space.
func (c *catalog) space(name string) *store.Object {
	if name == "" {
		return nil
	}
	obj, err := c.store.Get(store.Key{Resource: layout.SpaceResource, Name: name})
	if err != nil {
		return nil
	}
	return obj
}

// lookup finds the served resource for a request. ok is false when the
// group/version/resource is not served in the space.
func (c *catalog) lookup(space, group, version, resource string) (*served, bool) {
	gr := schema.GroupResource{Group: group, Resource: resource}
	if s, ok := c.builtins[gr]; ok {
		return s, s.version == version
	}
	cc := c.crd(space, resource+"."+group)
	if cc == nil || !crdServing(cc.obj) {
		return nil, false
	}
	for _, v := range cc.def.Versions {
		if v.Name == version && v.Served {
			return servedFromCRD(cc.def, v), true
		}
	}
	return nil, false
}

// crd returns the compiled CRD named name in space, or nil.
func (c *catalog) crd(space, name string) *compiledCRD {
	key := store.Key{Space: space, Resource: crdResource, Name: name}
	obj, err := c.store.Get(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.compiled, key)
		return nil
	}
	if cc, ok := c.compiled[key]; ok && cc.revision == obj.Revision {
		return cc
	}
	cc := compileStored(obj)
	if cc == nil {
		return nil
	}
	c.compiled[key] = cc
	return cc
}

func compileStored(obj *store.Object) *compiledCRD {
	var o apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(obj.Data, &o); err != nil {
		return nil
	}
	def, errs := crd.Compile(&o, nil)
	if len(errs) > 0 {
		return nil
	}
	return &compiledCRD{revision: obj.Revision, def: def, obj: &o, specHash: sync.OnceValue(func() string { return openAPIHash(&o) })}
}

// crdServing reports whether a CRD's resource is served: established (and
// possibly terminating: reads and deletes still work while it is).
func crdServing(o *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range o.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func crdTerminating(o *apiextensionsv1.CustomResourceDefinition) bool {
	return o.DeletionTimestamp != nil
}

func servedFromCRD(def *crd.Definition, v *crd.Version) *served {
	verbs := []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
	return &served{
		group: def.Group, version: v.Name, resource: def.Resource,
		kind: def.Kind, listKind: def.ListKind, singular: def.Singular,
		namespaced: def.Namespaced, verbs: verbs,
		shortNames: def.ShortNames, categories: def.Categories,
		status: v.Status, scale: (*resources.ScaleInfo)(v.Scale),
		table: v.Table, crd: def, crdVer: v,
	}
}

// all lists every resource served in space (built-ins first, then custom
// resources), each group's versions in preference order.
func (c *catalog) all(space string) []*served {
	out := make([]*served, 0, len(c.builtins))
	for _, info := range resources.Builtins() {
		out = append(out, c.builtins[schema.GroupResource{Group: info.Group, Resource: info.Resource}])
	}
	list, err := c.store.List(store.ListOptions{Space: space, Resource: crdResource})
	if err != nil {
		return out
	}
	var custom []*served
	for _, obj := range list.Items {
		cc := c.crd(space, obj.Key.Name)
		if cc == nil || !crdServing(cc.obj) {
			continue
		}
		for _, v := range cc.def.Versions {
			if v.Served {
				custom = append(custom, servedFromCRD(cc.def, v))
			}
		}
	}
	sort.SliceStable(custom, func(i, j int) bool { return custom[i].group < custom[j].group })
	return append(out, custom...)
}

// FieldsFor is the store's Options.Fields: kind-specific field-selector
// fields of built-in kinds (only those decode the whole object).
func FieldsFor(r store.Resource, v *store.FieldSource) fields.Set {
	info := resources.Lookup(r.Group, r.Resource)
	if info == nil || info.Fields == nil {
		return nil
	}
	return info.Fields(v.Object())
}
