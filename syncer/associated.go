package syncer

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Associated objects (DESIGN.md section 4): what a placed workload object
// owns through ownerReference chains, as its collectors see them in
// `associated`:
//
//	Deployment → ReplicaSet → Pod
//	StatefulSet, DaemonSet, Job → Pod
//	CronJob → Job → Pod
//
// They are watched only for objects that some placement evaluates
// collectors on, with one informer per (resource, namespace) of such
// objects: a namespace with one evaluated Deployment costs a ReplicaSet
// and a Pod informer of that namespace (two watches), whatever else the
// cluster runs elsewhere. Cached objects are kept without managedFields.

// Associated resources.
var (
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	jobsGVR        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// associatedOf lists, per resource of a placed object, the resources of
// the objects its ownership chain reaches.
var associatedOf = map[store.Resource][]schema.GroupVersionResource{
	{Group: "apps", Resource: "deployments"}:  {replicaSetsGVR, podsGVR},
	{Group: "apps", Resource: "statefulsets"}: {podsGVR},
	{Group: "apps", Resource: "daemonsets"}:   {podsGVR},
	{Group: "batch", Resource: "jobs"}:        {podsGVR},
	{Group: "batch", Resource: "cronjobs"}:    {jobsGVR, podsGVR},
}

// ownerKinds maps the kinds that own associated objects to their
// resources, for finding a managed owner from an ownerReference.
var ownerKinds = map[schema.GroupKind]string{
	{Group: "apps", Kind: "Deployment"}:  "deployments",
	{Group: "apps", Kind: "ReplicaSet"}:  "replicasets",
	{Group: "apps", Kind: "StatefulSet"}: "statefulsets",
	{Group: "apps", Kind: "DaemonSet"}:   "daemonsets",
	{Group: "batch", Kind: "Job"}:        "jobs",
	{Group: "batch", Kind: "CronJob"}:    "cronjobs",
}

// maxOwnerDepth bounds the ownership chains followed (CronJob → Job → Pod).
const maxOwnerDepth = 2

// TruncatedKind is the kind of the marker that ends a list of associated
// objects cut at Config.MaxAssociated: {"apiVersion":
// "edge.canopy.dev/v1alpha1", "kind": TruncatedKind, "metadata": {"name":
// "truncated"}, "omitted": N}. Collectors that filter associated objects
// by kind never see it.
const TruncatedKind = "TruncatedAssociatedObjects"

// assocWatch is one informer of associated objects.
type assocWatch struct {
	gvr schema.GroupVersionResource
	ns  string
}

// dropManagedFields is applied to every cached object: managedFields are
// never reported nor evaluated, and are a large share of an object.
func dropManagedFields(u *unstructured.Unstructured) {
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
}

// ensureAssociated makes the informers of associated objects match m: one
// per (resource, namespace) that an evaluated object needs. Reporter
// only.
func (s *Syncer) ensureAssociated(m *model) {
	want := map[assocWatch]bool{}
	for k := range m.objects {
		if res := associatedOf[k.Resource]; res != nil && k.Namespace != "" && m.evaluated(k) {
			for _, gvr := range res {
				want[assocWatch{gvr, k.Namespace}] = true
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for w, inf := range s.rep.assoc {
		if !want[w] {
			inf.stop()
			delete(s.rep.assoc, w)
		}
	}
	for w := range want {
		if s.rep.assoc[w] != nil {
			continue
		}
		s.rep.assoc[w] = s.startInformer(w.gvr, informerConfig{ns: w.ns, owners: true,
			on: s.associatedChanged, synced: func() { s.associatedSynced(w.ns) }})
	}
}

// associatedSynced re-evaluates the objects of ns once an informer of
// their associated objects has listed.
func (s *Syncer) associatedSynced(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.rep.model
	if m == nil {
		return
	}
	for k := range m.objects {
		if k.Namespace == ns && associatedOf[k.Resource] != nil {
			s.markEvalLocked(k)
		}
	}
}

// associatedChanged handles an event of an associated object: the managed
// object at the top of its ownership chain is re-evaluated.
func (s *Syncer) associatedChanged(m *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markOwnersLocked(m.GetNamespace(), m.GetOwnerReferences(), maxOwnerDepth)
}

// markOwnersLocked marks for evaluation the managed objects among refs
// and, up to depth levels, among the owners of the associated objects
// refs name; mu held.
func (s *Syncer) markOwnersLocked(ns string, refs []metav1.OwnerReference, depth int) {
	for _, or := range refs {
		gv, err := schema.ParseGroupVersion(or.APIVersion)
		if err != nil {
			continue
		}
		res, ok := ownerKinds[schema.GroupKind{Group: gv.Group, Kind: or.Kind}]
		if !ok {
			continue
		}
		if r := s.byRef[ref{Group: gv.Group, Resource: res, Namespace: ns, Name: or.Name}]; r != nil {
			s.markEvalLocked(r.Key)
			continue
		}
		if depth <= 1 {
			continue
		}
		gvr := schema.GroupVersionResource{Group: gv.Group, Version: "v1", Resource: res}
		if inf := s.rep.assoc[assocWatch{gvr, ns}]; inf != nil {
			if owner, ok := inf.get(ns, or.Name); ok && owner.GetUID() == or.UID {
				s.markOwnersLocked(ns, owner.GetOwnerReferences(), depth-1)
			}
		}
	}
}

// associated returns the associated objects of live, an object of
// resource res: those whose ownership chain leads to it, ordered by depth,
// kind and name, at most Config.MaxAssociated and then a TruncatedKind
// marker. ok is false while an informer it needs has not listed (the
// list would be incomplete).
func (s *Syncer) associated(res store.Resource, live *unstructured.Unstructured) (out []map[string]any, ok bool) {
	gvrs := associatedOf[res]
	if gvrs == nil {
		return nil, true
	}
	ns := live.GetNamespace()
	var infs []*informer
	s.mu.Lock()
	for _, gvr := range gvrs {
		inf := s.rep.assoc[assocWatch{gvr, ns}]
		if inf == nil || !inf.synced.Load() {
			s.mu.Unlock()
			return nil, false
		}
		infs = append(infs, inf)
	}
	s.mu.Unlock()

	type found struct {
		depth int
		u     *unstructured.Unstructured
	}
	var all []found
	seen := map[types.UID]bool{live.GetUID(): true}
	frontier := []types.UID{live.GetUID()}
	for depth := 1; depth <= maxOwnerDepth && len(frontier) > 0; depth++ {
		var next []types.UID
		for _, uid := range frontier {
			for _, inf := range infs {
				for _, u := range inf.ownedBy(uid) {
					if seen[u.GetUID()] {
						continue
					}
					seen[u.GetUID()] = true
					all = append(all, found{depth, u})
					next = append(next, u.GetUID())
				}
			}
		}
		frontier = next
	}
	slices.SortFunc(all, func(a, b found) int {
		return cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(a.u.GetKind(), b.u.GetKind()), cmp.Compare(a.u.GetName(), b.u.GetName()))
	})
	limit := s.cfg.MaxAssociated
	out = make([]map[string]any, 0, min(len(all), limit)+1)
	for _, f := range all[:min(len(all), limit)] {
		out = append(out, f.u.Object)
	}
	if len(all) > limit {
		out = append(out, map[string]any{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": TruncatedKind,
			"metadata": map[string]any{"name": "truncated"}, "omitted": int64(len(all) - limit)})
	}
	return out, true
}
