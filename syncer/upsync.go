package syncer

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/selection"
)

// Upsync (DESIGN.md sections 4 and 5, step 6): the objects of the cluster
// that an upsync clause of a placement here names, and that Canopy does
// not manage (no ManagedLabel=true), are reported under
// {their resource, namespace, reports.ForwardedName(self, name)}, with
// v1alpha1.DestinationAnnotation naming this destination, and the outbox
// copy renamed to that name (so that a tier or a view holding the reports
// of many destinations sees distinct names). A report goes when its
// object does, loses the managed label's absence, or stops matching.
//
// Clauses are resolved against discovery (wildcards included: a clause
// with resources ["*"] and no apiGroup watches every listable resource of
// the cluster); each (resource, namespace) of the result is one informer,
// cluster-wide when a clause does not restrict namespaces. Names are
// matched on the informer's events: each entry of a clause's names is a
// shell pattern with path.Match's syntax ("up-*", "db-?", "[ab]-x", "*"
// for any name); one without *, ? or [ is an exact name.

// upsyncRule is one UpsyncClause, ready for matching.
// It holds no pointers: its printed form (fmt.Sprint) tells a change of
// the clauses.
type upsyncRule struct {
	anyGroup   bool
	group      string
	resources  []string // "*" matches any
	namespaces []string // empty or "*": any
	names      []string // empty: any; else patterns (selection.NameMatches)
}

func newUpsyncRule(c v1alpha1.UpsyncClause) upsyncRule {
	r := upsyncRule{anyGroup: c.APIGroup == nil, resources: c.Resources, namespaces: c.Namespaces, names: c.Names}
	if c.APIGroup != nil {
		r.group = *c.APIGroup
	}
	return r
}

// inList reports whether v is in list ("*" matching any); an empty list
// holds every value when emptyAll.
func inList(list []string, v string, emptyAll bool) bool {
	if len(list) == 0 {
		return emptyAll
	}
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

func (r *upsyncRule) matchesResource(group, resource string) bool {
	return (r.anyGroup || r.group == group) && inList(r.resources, resource, false)
}

// allNamespaces reports whether the rule takes objects of any namespace.
func (r *upsyncRule) allNamespaces() bool {
	return len(r.namespaces) == 0 || slices.Contains(r.namespaces, "*")
}

// matches reports whether an object (ns empty: cluster-scoped) matches,
// as selection.UpsyncMatches decides for the clause.
func (r *upsyncRule) matches(group, resource, ns, name string) bool {
	return r.matchesResource(group, resource) && (ns == "" || inList(r.namespaces, ns, true)) && selection.NameMatches(r.names, name)
}

func (m *model) upsyncs(group, resource, ns, name string) bool {
	for i := range m.upsync {
		if m.upsync[i].matches(group, resource, ns, name) {
			return true
		}
	}
	return false
}

// upsyncWatch is one informer of upsynced objects; ns empty: all
// namespaces (or a cluster-scoped resource).
type upsyncWatch struct {
	gvr schema.GroupVersionResource
	ns  string
}

// upsyncSelector leaves out the objects Canopy manages (and keeps those
// without the label).
const upsyncSelector = ManagedLabel + "!=true"

// upsyncWatches resolves rules against discovery. unresolved is true when
// a rule names a resource the cluster does not serve (yet) or discovery
// failed: resolving again later may find more.
func (s *Syncer) upsyncWatches(rules []upsyncRule) (want map[upsyncWatch]bool, unresolved bool, err error) {
	want = map[upsyncWatch]bool{}
	if len(rules) == 0 {
		return want, false, nil
	}
	lists, err := discovery.ServerPreferredResources(s.discoCache)
	if len(lists) == 0 && err != nil {
		return nil, true, err
	}
	unresolved = err != nil
	found := make([]bool, len(rules))
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !slices.Contains(ar.Verbs, "list") || !slices.Contains(ar.Verbs, "watch") {
				continue
			}
			gvr := gv.WithResource(ar.Name)
			for i := range rules {
				r := &rules[i]
				if !r.matchesResource(gv.Group, ar.Name) {
					continue
				}
				found[i] = true
				if !ar.Namespaced || r.allNamespaces() {
					want[upsyncWatch{gvr, ""}] = true
					continue
				}
				for _, ns := range r.namespaces {
					want[upsyncWatch{gvr, ns}] = true
				}
			}
		}
	}
	for w := range want {
		if w.ns != "" && want[upsyncWatch{w.gvr, ""}] {
			delete(want, w)
		}
	}
	for i, ok := range found {
		if !ok && !slices.Contains(rules[i].resources, "*") {
			unresolved = true
		}
	}
	return want, unresolved, nil
}

// ensureUpsync makes the upsync informers match m's clauses. On a
// discovery failure it keeps the informers it has. It returns whether to
// resolve again later. Reporter only.
func (s *Syncer) ensureUpsync(m *model) (retry bool) {
	want, unresolved, err := s.upsyncWatches(m.upsync)
	if err != nil {
		s.log.Debug("resolving upsync clauses", "error", err)
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for w, inf := range s.rep.upsync {
		if !want[w] {
			inf.stop()
			delete(s.rep.upsync, w)
			s.markUpsyncReportsLocked(w.gvr.GroupResource(), w.ns)
		}
	}
	for w := range want {
		if s.rep.upsync[w] != nil {
			continue
		}
		gr := w.gvr.GroupResource()
		s.rep.upsync[w] = s.startInformer(w.gvr, informerConfig{ns: w.ns, selector: upsyncSelector,
			on: func(u *unstructured.Unstructured) { s.upsyncChanged(gr, u) },
			synced: func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.markUpsyncReportsLocked(gr, w.ns)
			}})
	}
	// A change of names or namespaces of a clause keeps the informers but
	// changes what they report.
	if sig := fmt.Sprint(m.upsync); sig != s.rep.upsyncSig {
		s.rep.upsyncSig = sig
		for w, inf := range s.rep.upsync {
			if inf.synced.Load() {
				s.markUpsyncReportsLocked(w.gvr.GroupResource(), w.ns)
			}
		}
	}
	return unresolved
}

// upsyncKey is where an upsynced object is reported.
func (s *Syncer) upsyncKey(gr schema.GroupResource, ns, name string) store.Key {
	return store.Key{Resource: store.Resource{Group: gr.Group, Resource: gr.Resource}, Namespace: ns, Name: reports.ForwardedName(s.cfg.Name, name)}
}

// upsyncChanged handles an event of an upsync informer.
func (s *Syncer) upsyncChanged(gr schema.GroupResource, m *unstructured.Unstructured) {
	s.mu.Lock()
	s.dirty[s.upsyncKey(gr, m.GetNamespace(), m.GetName())] = struct{}{}
	s.wakeLocked()
	s.mu.Unlock()
}

// markUpsyncReportsLocked marks dirty the reports of gr in ns (all when
// empty), those the informers hold and those of the outbox, so that each
// is written or deleted; mu held.
func (s *Syncer) markUpsyncReportsLocked(gr schema.GroupResource, ns string) {
	for w, inf := range s.rep.upsync {
		if w.gvr.GroupResource() != gr || !inf.synced.Load() {
			continue
		}
		for _, u := range inf.list() {
			if ns == "" || u.GetNamespace() == ns {
				s.dirty[s.upsyncKey(gr, u.GetNamespace(), u.GetName())] = struct{}{}
			}
		}
	}
	lr, err := s.cfg.Store.List(store.ListOptions{Space: s.cfg.Outbox, Resource: store.Resource{Group: gr.Group, Resource: gr.Resource}})
	if err == nil {
		prefix := reports.ForwardedName(s.cfg.Name, "")
		for _, o := range lr.Items {
			if strings.HasPrefix(o.Key.Name, prefix) && (ns == "" || o.Key.Namespace == ns) {
				k := o.Key
				k.Space = ""
				s.dirty[k] = struct{}{}
			}
		}
	}
	s.wakeLocked()
}

// upsyncReportLocked decides the report under k, a key of the upsync form:
// the object to report, or del, or skip while an informer that would hold
// it has not listed; mu held.
func (s *Syncer) upsyncReportLocked(k store.Key) (live *unstructured.Unstructured, del, skip bool) {
	name, ok := strings.CutPrefix(k.Name, reports.ForwardedName(s.cfg.Name, ""))
	m := s.rep.model
	if !ok || m == nil || !m.upsyncs(k.Resource.Group, k.Resource.Resource, k.Namespace, name) {
		return nil, true, false
	}
	for w, inf := range s.rep.upsync {
		if w.gvr.Group != k.Resource.Group || w.gvr.Resource != k.Resource.Resource || (w.ns != "" && w.ns != k.Namespace) {
			continue
		}
		if !inf.synced.Load() {
			return nil, false, true
		}
		if u, ok := inf.get(k.Namespace, name); ok && u.GetLabels()[ManagedLabel] != "true" {
			return u, false, false
		}
	}
	return nil, true, false
}
