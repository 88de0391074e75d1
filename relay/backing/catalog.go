package backing

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/canopy-dev/canopy/relay/store"
)

// apiResource is one resource the backend serves, at its preferred
// version.
type apiResource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	verbs      []string
	// status is whether it has a status subresource.
	status bool
}

func (r apiResource) gr() schema.GroupResource { return r.gvr.GroupResource() }

func (r apiResource) res() store.Resource {
	return store.Resource{Group: r.gvr.Group, Resource: r.gvr.Resource}
}

func (r apiResource) listable() bool {
	return slices.Contains(r.verbs, "list") && slices.Contains(r.verbs, "watch")
}

// catalog is the backend's discovery: its resources at their preferred
// versions.
type catalog struct {
	mu        sync.Mutex
	resources map[schema.GroupResource]apiResource
}

// refresh reads discovery again. Groups that fail to answer are left out
// (an aggregated API being down does not stop the space).
func (c *catalog) refresh(d discovery.DiscoveryInterface) error {
	groups, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return err
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	status := map[schema.GroupVersionResource]bool{}
	out := map[schema.GroupResource]apiResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || preferred[gv.Group] != gv.Version {
			continue
		}
		for _, r := range l.APIResources {
			if name, sub, ok := strings.Cut(r.Name, "/"); ok {
				status[gv.WithResource(name)] = status[gv.WithResource(name)] || sub == "status"
				continue
			}
			out[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = apiResource{
				gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced, verbs: r.Verbs}
		}
	}
	for gr, r := range out {
		r.status = status[r.gvr]
		out[gr] = r
	}
	c.mu.Lock()
	c.resources = out
	c.mu.Unlock()
	return nil
}

func (c *catalog) get(gr schema.GroupResource) (apiResource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.resources[gr]
	return r, ok
}

func (c *catalog) all() []apiResource {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]apiResource, 0, len(c.resources))
	for _, r := range c.resources {
		out = append(out, r)
	}
	return out
}

// fromUnstructured converts an informer's object into a typed one.
func fromUnstructured(o any, into any) error {
	u, ok := o.(runtime.Unstructured)
	if !ok {
		return fmt.Errorf("%T is not an unstructured object", o)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), into)
}
