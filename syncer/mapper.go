package syncer

import (
	"errors"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// mapper finds the resource of a kind as a client-go discovery REST
// mapper does (restmapper.DeferredDiscoveryRESTMapper over a memory
// cache), but asks discovery only for the group versions of the kinds it
// is asked about, and keeps only those: a destination that applies
// ConfigMaps and Deployments holds the resources of v1 and apps/v1, not a
// mapper of every group the cluster serves (about 200 KiB per destination
// against a kube API, which is much of an edge relay's memory when
// thousands run in one process).
//
// A group version the server does not serve (or whose discovery fails
// with an API error, as an aggregated API that is down) has no kinds
// until Reset. It is safe for concurrent use.
type mapper struct {
	disco discovery.DiscoveryInterface
	// reset also invalidates this cache (the upsync clauses' discovery),
	// as resetting the deferred mapper that shared it did.
	reset func()

	mu sync.Mutex
	// gvs holds the kinds of each group version asked about (nil: not
	// served); groups the versions of each group, preferred first.
	gvs    map[schema.GroupVersion]map[string]kindMapping
	groups map[string][]string
}

// kindMapping is where a kind is served in one group version.
type kindMapping struct {
	resource   string
	namespaced bool
}

func newMapper(disco discovery.DiscoveryInterface, reset func()) *mapper {
	return &mapper{disco: disco, reset: reset}
}

// Reset forgets what discovery said.
func (m *mapper) Reset() {
	m.mu.Lock()
	m.gvs, m.groups = nil, nil
	m.mu.Unlock()
	if m.reset != nil {
		m.reset()
	}
}

// mapping returns the resource of gk in version (the group's versions in
// order of preference when empty) and whether it is namespaced. A kind
// not served is a *meta.NoKindMatchError.
func (m *mapper) mapping(gk schema.GroupKind, version string) (schema.GroupVersionResource, bool, error) {
	versions := []string{version}
	if version == "" {
		var err error
		if versions, err = m.groupVersions(gk.Group); err != nil {
			return schema.GroupVersionResource{}, false, err
		}
	}
	for _, v := range versions {
		gv := schema.GroupVersion{Group: gk.Group, Version: v}
		kinds, err := m.kinds(gv)
		if err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		if km, ok := kinds[gk.Kind]; ok {
			return gv.WithResource(km.resource), km.namespaced, nil
		}
	}
	var searched []string
	if version != "" {
		searched = []string{version}
	}
	return schema.GroupVersionResource{}, false, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: searched}
}

// kinds returns the kinds served in gv, asking discovery once.
func (m *mapper) kinds(gv schema.GroupVersion) (map[string]kindMapping, error) {
	m.mu.Lock()
	kinds, ok := m.gvs[gv]
	m.mu.Unlock()
	if ok {
		return kinds, nil
	}
	list, err := m.disco.ServerResourcesForGroupVersion(gv.String())
	var st apierrors.APIStatus
	switch {
	case err == nil:
		kinds = kindsOf(list)
	case errors.As(err, &st):
		kinds = nil // not served (404), or its discovery fails: no kinds
	default:
		return nil, err // the server did not answer: ask again next time
	}
	m.mu.Lock()
	if m.gvs == nil {
		m.gvs = map[schema.GroupVersion]map[string]kindMapping{}
	}
	m.gvs[gv] = kinds
	m.mu.Unlock()
	return kinds, nil
}

// kindsOf maps the kinds of a discovery document as
// restmapper.NewDiscoveryRESTMapper does: subresources are left out; the
// lower-case kind and the kind's List (a guessed resource) map too; of
// two resources of one kind, the later wins.
func kindsOf(list *metav1.APIResourceList) map[string]kindMapping {
	kinds := make(map[string]kindMapping, 2*len(list.APIResources))
	guessed := map[string]kindMapping{}
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		km := kindMapping{resource: r.Name, namespaced: r.Namespaced}
		kinds[r.Kind] = km
		kinds[strings.ToLower(r.Kind)] = km
		plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Kind: r.Kind + "List"})
		guessed[r.Kind+"List"] = kindMapping{resource: plural.Resource, namespaced: r.Namespaced}
	}
	for k, km := range guessed {
		if _, ok := kinds[k]; !ok {
			kinds[k] = km
		}
	}
	return kinds
}

// groupVersions returns the versions group is served at, preferred first.
func (m *mapper) groupVersions(group string) ([]string, error) {
	m.mu.Lock()
	groups := m.groups
	m.mu.Unlock()
	if groups == nil {
		gl, err := m.disco.ServerGroups()
		if err != nil {
			return nil, err
		}
		groups = map[string][]string{}
		for _, g := range gl.Groups {
			vs := []string{g.PreferredVersion.Version}
			for _, v := range g.Versions {
				if v.Version != g.PreferredVersion.Version {
					vs = append(vs, v.Version)
				}
			}
			groups[g.Name] = vs
		}
		m.mu.Lock()
		m.groups = groups
		m.mu.Unlock()
	}
	return groups[group], nil
}
