package placement

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
	"github.com/canopy-dev/canopy/topology/selection"
)

// Upsync into the workload description spaces: an object a destination
// reports as upsynced (reports.ForwardedName) is written into the space of
// every placement that has the destination and an upsync clause matching
// the object, under its own name, labelled v1alpha1.UpsyncedLabel and annotated
// v1alpha1.DestinationAnnotation with the destination. When several
// destinations upsync the same object into one space, the first by name
// is written and the placements involved say so in their Upsynced
// condition. The controller owns the objects it labels: it updates them
// from the reports, and deletes them when no report wants them any more.
// It never writes over an object of the space it did not write, never
// writes a CustomResourceDefinition (the root would serve it), strips the
// labels that would make an RBAC object govern the space, and never
// places an upsynced object (placeable). Objects of a resource that a
// View of source Upsynced of the space serves are not written into the
// space: the View serves every destination's version (views.go). The
// live copies of placed objects that Views gather travel as forwarded
// reports too, marked v1alpha1.ViewedAnnotation: writeUpsynced sets them
// aside for writeViews.

// ConditionUpsynced is, on a placement with upsync clauses, True when
// every object its clauses bring back is in its space; False with
// ReasonConflict when some object came from several destinations (one is
// kept), or ReasonNotUpsynced when some could not be written (an object
// of the same name that is not upsynced, or no such namespace in the
// space).
const (
	ConditionUpsynced = "Upsynced"
	ReasonNotUpsynced = "NotUpsynced"
)

var crdsRes = store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// maxUpsyncMessages bounds the issues an Upsynced condition lists.
const maxUpsyncMessages = 3

// upsyncReport is what became of one placement's upsync.
type upsyncReport struct {
	objects   int // written into its space
	conflicts int // upsynced by several destinations
	blocked   int // not written
	msgs      []string
}

func (r *upsyncReport) note(msg string) {
	if len(r.msgs) < maxUpsyncMessages {
		r.msgs = append(r.msgs, msg)
	}
}

// upsyncCandidate is one destination's version of an object to upsync
// into a space, and the placements of that space that want it.
type upsyncCandidate struct {
	dest string
	obj  *store.Object
	refs []scheduler.PlacementRef
}

// writeUpsynced brings the upsynced objects of every workload description
// space in line with the forwarded reports of m, adding the writes to b,
// and records per placement what became of its upsync in r.upsynced.
func (r *reportedState) writeUpsynced(ctx context.Context, out *outcome, m reports.Merged, b *batch) error {
	c := r.c
	type upsyncing struct {
		ref   scheduler.PlacementRef
		spec  []v1alpha1.UpsyncClause
		dests map[string]bool
	}
	var ups []upsyncing
	r.upsynced = map[scheduler.PlacementRef]*upsyncReport{}
	for _, sname := range sortedKeys(c.spaces) {
		for _, pname := range sortedKeys(c.spaces[sname].placements) {
			ps := c.spaces[sname].placements[pname]
			if len(ps.obj.Spec.Upsync) == 0 || ps.obj.DeletionTimestamp != nil {
				continue
			}
			ref := scheduler.PlacementRef{Space: sname, Name: pname}
			r.upsynced[ref] = &upsyncReport{}
			dests := map[string]bool{}
			for _, d := range out.matched[ref] {
				dests[d.SyncTargetName] = true
			}
			ups = append(ups, upsyncing{ref, ps.obj.Spec.Upsync, dests})
		}
	}
	cands := map[store.Key][]*upsyncCandidate{} // by key in the space
	r.placedCopies = r.placedCopies[:0]
	for _, k := range reports.SortedKeys(m.Forwarded) {
		o := m.Forwarded[k]
		dest, viewed := reports.ForwardedOf(o)
		name, ok := strings.CutPrefix(k.Name, reports.ForwardedName(dest, ""))
		if !ok || name == "" || out.entries[k] != nil || k.Resource.Group == v1alpha1.GroupName {
			continue // the live state of a placed object, or not one to write
		}
		if viewed {
			// A placed object's live copy: kept while the object is
			// placed there by a space one of whose Views gathers it.
			if e := out.entries[store.Key{Resource: k.Resource, Namespace: k.Namespace, Name: name}]; e != nil && c.placedViewed(e, dest, k.Resource) {
				vk := k
				vk.Space = layout.ViewsSpace(e.space)
				r.placedCopies = append(r.placedCopies, gathered{key: vk, space: e.space, dest: dest, obj: o, placed: true})
			}
			continue
		}
		for _, u := range ups {
			if !u.dests[dest] || !slices.ContainsFunc(u.spec, func(cl v1alpha1.UpsyncClause) bool {
				return selection.UpsyncMatches(&cl, k.Resource.Group, k.Resource.Resource, k.Namespace, name)
			}) {
				continue
			}
			tk := store.Key{Space: u.ref.Space, Resource: k.Resource, Namespace: k.Namespace, Name: name}
			cs := cands[tk]
			if n := len(cs); n > 0 && cs[n-1].dest == dest {
				cs[n-1].refs = append(cs[n-1].refs, u.ref)
				continue
			}
			cands[tk] = append(cs, &upsyncCandidate{dest: dest, obj: o, refs: []scheduler.PlacementRef{u.ref}})
		}
	}
	r.candidates = cands
	want := map[store.Key]map[string]any{}
	for _, tk := range reports.SortedKeys(cands) {
		cs := cands[tk]
		slices.SortFunc(cs, func(a, b *upsyncCandidate) int { return cmp.Compare(a.dest, b.dest) })
		what := tk.Resource.String() + " " + tk.Name
		if tk.Namespace != "" {
			what = tk.Resource.String() + " " + tk.Namespace + "/" + tk.Name
		}
		s := c.spaces[tk.Space]
		if s.viewed(tk.Resource, v1alpha1.ViewSourceUpsynced) {
			// A View of the space serves every destination's version:
			// none is written into the space, and none conflicts.
			seen := map[scheduler.PlacementRef]bool{}
			for _, cd := range cs {
				for _, ref := range cd.refs {
					if !seen[ref] {
						seen[ref] = true
						r.upsynced[ref].objects++
					}
				}
			}
			continue
		}
		local := tk
		local.Space = ""
		blocked := ""
		if tk.Resource == crdsRes {
			blocked = "CustomResourceDefinitions are not upsynced into a space (the root would serve them)"
		} else if cur := s.objects[local]; cur != nil && cur.Labels[v1alpha1.UpsyncedLabel] != "true" {
			blocked = "an object of that name that is not upsynced is in the space"
		} else if tk.Namespace != "" && s.objects[store.Key{Resource: namespacesRes, Name: tk.Namespace}] == nil {
			blocked = "no namespace " + tk.Namespace + " in the space"
		}
		var dests []string
		for _, cd := range cs {
			dests = append(dests, cd.dest)
		}
		seen := map[scheduler.PlacementRef]bool{}
		for _, cd := range cs {
			for _, ref := range cd.refs {
				if seen[ref] {
					continue
				}
				seen[ref] = true
				up := r.upsynced[ref]
				switch {
				case blocked != "":
					up.blocked++
					up.note(fmt.Sprintf("%s from %s not written: %s", what, strings.Join(dests, ", "), blocked))
				case len(cs) > 1:
					up.objects++
					up.conflicts++
					up.note(fmt.Sprintf("%s upsynced by %s; %s's is kept", what, strings.Join(dests, ", "), cs[0].dest))
				default:
					up.objects++
				}
			}
		}
		if blocked == "" {
			want[tk] = upsyncedCopy(cs[0].obj, tk.Name, cs[0].dest)
		}
	}
	for _, sname := range sortedKeys(c.spaces) {
		s := c.spaces[sname]
		for _, local := range reports.SortedKeys(s.upsynced) {
			tk := local
			tk.Space = sname
			if _, ok := want[tk]; ok || b.holds(tk) {
				continue
			}
			if cur := s.objects[local]; cur != nil {
				if err := b.add(ctx, store.Op{Type: store.OpDelete, Key: tk, ExpectRevision: cur.Revision}); err != nil {
					return err
				}
			}
		}
	}
	for _, tk := range reports.SortedKeys(want) {
		if b.holds(tk) {
			continue
		}
		next := want[tk]
		local := tk
		local.Space = ""
		cur := c.spaces[tk.Space].objects[local]
		md := next["metadata"].(map[string]any)
		if cur == nil {
			md["uid"], md["creationTimestamp"] = uuid.NewString(), now()
			if err := b.add(ctx, store.Op{Type: store.OpCreate, Key: tk, Data: mustJSON(next)}); err != nil {
				return err
			}
			continue
		}
		have := jsonMap(cur)
		hmd, _ := have["metadata"].(map[string]any)
		md["uid"], md["creationTimestamp"] = hmd["uid"], hmd["creationTimestamp"]
		delete(hmd, "resourceVersion")
		if equality.Semantic.DeepEqual(have, next) {
			continue
		}
		if err := b.add(ctx, store.Op{Type: store.OpUpdate, Key: tk, Data: mustJSON(next), ExpectRevision: cur.Revision}); err != nil {
			return err
		}
	}
	return nil
}

// upsyncedCopy is a reported upsynced object as its space holds it: under
// its own name, without the metadata its cluster assigned and without the
// labels that would make an RBAC object govern the space, labelled
// v1alpha1.UpsyncedLabel and annotated with the destination it comes from.
func upsyncedCopy(o *store.Object, name, dest string) map[string]any {
	m, lbls := destinationCopy(o, name, dest)
	lbls[v1alpha1.UpsyncedLabel] = "true"
	// What would make an RBAC object govern the space (governsSpace):
	// an upsynced one is inert there, as placed ones are.
	delete(lbls, v1alpha1.SpaceRBACLabel)
	delete(lbls, "kubernetes.io/bootstrapping")
	return m
}

// destinationCopy is an object a destination reported, under name,
// without the metadata its cluster assigned, annotated
// v1alpha1.DestinationAnnotation; it returns the copy and its labels (a
// map of the copy, to add to).
func destinationCopy(o *store.Object, name, dest string) (map[string]any, map[string]any) {
	m := jsonMap(o)
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	for _, f := range droppedMetadata {
		delete(md, f)
	}
	md["name"] = name
	lbls, _ := md["labels"].(map[string]any)
	if lbls == nil {
		lbls = map[string]any{}
	}
	md["labels"] = lbls
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[v1alpha1.DestinationAnnotation] = dest
	md["annotations"] = ann
	return m, lbls
}

// upsyncedCondition is the Upsynced condition of a placement with upsync
// clauses.
func upsyncedCondition(ps *placementState, r *upsyncReport) metav1.Condition {
	cond := metav1.Condition{Type: ConditionUpsynced, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAsExpected,
		ObservedGeneration: ps.obj.Generation}
	if r == nil {
		r = &upsyncReport{}
	}
	cond.Message = fmt.Sprintf("%d object(s) upsynced into the space or its Views", r.objects)
	switch {
	case r.conflicts > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonConflict
	case r.blocked > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNotUpsynced
	}
	if r.conflicts > 0 || r.blocked > 0 {
		cond.Message = fmt.Sprintf("%d object(s) upsynced into the space or its Views, %d of them by several destinations; %d not written: %s",
			r.objects, r.conflicts, r.blocked, strings.Join(r.msgs, "; "))
	}
	return cond
}
