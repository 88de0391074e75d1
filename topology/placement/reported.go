package placement

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
	"github.com/canopy-dev/canopy/topology/status"
	"github.com/canopy-dev/canopy/topology/summary"
)

var combinedRes = store.Resource{Group: v1alpha1.GroupName, Resource: "combinedstatuses"}

// reportedState is the root's summary.Sink: it writes what the root's
// children reported, merged, into the workload description spaces, as
// a CombinedStatus per (object, placement) with collectors, the
// singleton status of objects placed on one destination by a placement
// that wants it, the objects upsync clauses bring back (upsynced.go) and
// every placement's status, in one Txn per flush. It reads the
// controller's state (the spaces, the last outcome) and is called from
// its loop only, at each report flush (Controller.flush).
type reportedState struct {
	c *Controller
	// combined remembers, per CombinedStatus written, the result it was
	// last found equal to (writeCombined).
	combined map[store.Key]combinedMemo
	// upsynced says, per placement with upsync clauses, what became of
	// its upsync at the last report flush (writeUpsynced).
	upsynced map[scheduler.PlacementRef]*upsyncReport
	// candidates are, by key in a workload description space, every
	// destination's version of an object its placements upsync, as the
	// last report flush found them (writeUpsynced): what Views gather.
	candidates map[store.Key][]*upsyncCandidate
	// placedCopies are the live copies of placed objects that Views of
	// their spaces gather, as the last report flush found them
	// (writeUpsynced).
	placedCopies []gathered
	// views holds, per object of the views spaces, what it was last
	// written or found equal from (writeViews); nil until listed.
	views map[store.Key]viewMemo
}

// Write implements summary.Sink.
func (r *reportedState) Write(ctx context.Context, m reports.Merged) error {
	c := r.c
	b := &batch{st: c.st, redo: &c.redo, keys: map[store.Key]bool{}}
	syncs := map[scheduler.PlacementRef]reports.PlacementSync{}
	for _, s := range m.Syncs {
		syncs[scheduler.PlacementRef{Space: s.Placement.Space, Name: s.Placement.Name}] = s
	}
	if err := r.writeCombined(ctx, m, b); err != nil {
		return err
	}
	if err := r.writeSingletons(ctx, c.last, m, b); err != nil {
		return err
	}
	if err := r.writeUpsynced(ctx, c.last, m, b); err != nil {
		return err
	}
	if err := r.writeViews(ctx, b); err != nil {
		return err
	}
	if err := r.writeStatuses(ctx, c.last, syncs, b); err != nil {
		return err
	}
	return b.flush(ctx)
}

// reportChildren lists the root's children for its summarizer, by name:
// one per reports-<child> space the store names, its reports in the store
// Config.Reports gives (Store without it), left out while it still
// claims a destination that re-homed below another child
// (Config.Claims): its reports may count the destination, which the
// other child's reports count too.
func (c *Controller) reportChildren() ([]summary.Child, func(), error) {
	spaces, err := c.st.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return nil, nil, err
	}
	var superseded map[string]map[string]int64
	if c.cfg.Claims != nil {
		if superseded, err = c.cfg.Claims.Superseded(nil); err != nil {
			return nil, nil, err
		}
	}
	children := make([]summary.Child, 0, len(spaces.Items))
	for _, sp := range spaces.Items { // sorted by name
		child, ok := layout.ReportsChild(sp.Key.Name)
		if !ok {
			continue
		}
		rs := c.st
		if c.cfg.Reports != nil {
			rs = c.cfg.Reports(sp.Key.Name) // nil: not at hand, counted once they are
		}
		children = append(children, summary.Child{Space: sp.Key.Name, Reports: rs, Out: len(superseded[child]) > 0})
	}
	return children, nil, nil
}

// combinedKey groups partials by (placement, object).
type combinedKey struct {
	placement reports.PlacementRef
	object    v1alpha1.ObjectReference
}

// writeCombined writes one CombinedStatus per (object, placement) that has
// partials, in the object's namespace of the placement's space ("default"
// for cluster-scoped objects), and deletes those it wrote that no longer
// have any.
func (r *reportedState) writeCombined(ctx context.Context, m reports.Merged, b *batch) error {
	c := r.c
	groups := map[combinedKey]map[string]status.Partial{}
	for _, p := range m.Partials {
		k := combinedKey{p.Placement, p.Object}
		if c.spaces[p.Placement.Space] == nil || c.spaces[p.Placement.Space].placements[p.Placement.Name] == nil {
			continue // a placement gone since: its reports are on their way out
		}
		if groups[k] == nil {
			groups[k] = map[string]status.Partial{}
		}
		groups[k][p.Collector] = p.Partial
	}
	want := map[store.Key][]byte{}
	for k, parts := range groups {
		ps := c.spaces[k.placement.Space].placements[k.placement.Name]
		cs := &v1alpha1.CombinedStatus{Object: k.object, Placement: k.placement.Name}
		cs.APIVersion, cs.Kind = v1alpha1.SchemeGroupVersion.String(), "CombinedStatus"
		ns := k.object.Namespace
		if ns == "" {
			ns = "default"
		}
		cs.Name, cs.Namespace = combinedName(k), ns
		cs.Labels = map[string]string{combinedByLabel: "true"}
		for l, v := range map[string]string{
			v1alpha1.PlacementLabel:      k.placement.Name,
			v1alpha1.ObjectResourceLabel: qualified(k.object),
			v1alpha1.ObjectNameLabel:     k.object.Name,
		} {
			if len(validation.IsValidLabelValue(v)) == 0 {
				cs.Labels[l] = v
			}
		}
		t := true
		cs.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindEdgePlacement,
			Name: ps.obj.Name, UID: ps.obj.UID, BlockOwnerDeletion: &t}}
		src := c.spaces[k.placement.Space].objects[store.Key{Resource: store.Resource{Group: k.object.Group, Resource: k.object.Resource},
			Namespace: k.object.Namespace, Name: k.object.Name}]
		if src != nil {
			cs.ObservedRevision = strconv.FormatInt(src.Revision, 10)
		}
		status.Fill(cs, parts)
		data, err := json.Marshal(cs)
		if err != nil {
			return err
		}
		want[store.Key{Space: k.placement.Space, Resource: combinedRes, Namespace: ns, Name: cs.Name}] = data
	}
	if r.combined == nil {
		r.combined = map[store.Key]combinedMemo{}
	}
	listed := map[store.Key]bool{}
	defer func() {
		for k := range r.combined {
			if !listed[k] {
				delete(r.combined, k) // gone, or about to be replaced
			}
		}
	}()
	for sname := range c.spaces {
		lr, err := c.st.List(store.ListOptions{Space: sname, Resource: combinedRes,
			Label: labels.SelectorFromSet(labels.Set{combinedByLabel: "true"})})
		if err != nil {
			return err
		}
		for _, o := range lr.Items {
			data, ok := want[o.Key]
			if !ok {
				if err := b.add(ctx, store.Op{Type: store.OpDelete, Key: o.Key, ExpectRevision: o.Revision}); err != nil {
					return err
				}
				continue
			}
			delete(want, o.Key)
			listed[o.Key] = true
			if m, ok := r.combined[o.Key]; ok && m.rev == o.Revision && bytes.Equal(m.want, data) {
				continue // found equal to the same result at this revision before
			}
			var cur v1alpha1.CombinedStatus
			_ = json.Unmarshal(o.Data, &cur)
			var next v1alpha1.CombinedStatus
			_ = json.Unmarshal(data, &next)
			next.UID, next.CreationTimestamp, next.ResourceVersion = cur.UID, cur.CreationTimestamp, ""
			cur.ResourceVersion = ""
			if bytes.Equal(mustJSON(cur), mustJSON(next)) {
				r.combined[o.Key] = combinedMemo{rev: o.Revision, want: data}
				continue
			}
			if data, err = json.Marshal(next); err != nil {
				return err
			}
			if err := b.add(ctx, store.Op{Type: store.OpUpdate, Key: o.Key, Data: data, ExpectRevision: o.Revision}); err != nil {
				return err
			}
		}
	}
	for k, data := range want {
		var cs v1alpha1.CombinedStatus
		_ = json.Unmarshal(data, &cs)
		cs.UID, cs.CreationTimestamp = types.UID(uuid.NewString()), now()
		if err := b.add(ctx, store.Op{Type: store.OpCreate, Key: k, Data: mustJSON(cs)}); err != nil {
			return err
		}
	}
	return nil
}

// combinedMemo is what writeCombined found at a CombinedStatus: at
// revision rev, the stored object was equal to the result want. While
// both stay the same, it is not decoded and compared again.
type combinedMemo struct {
	rev  int64
	want []byte
}

// combinedByLabel marks the CombinedStatuses the controller writes.
const combinedByLabel = v1alpha1.GroupName + "/combined"

// combinedName names the CombinedStatus of an object under a placement:
// readable when short, a digest when the parts would be too long.
func combinedName(k combinedKey) string {
	name := strings.ToLower(fmt.Sprintf("%s.%s.%s", k.object.Name, qualified(k.object), k.placement.Name))
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	h := sha256.Sum256([]byte(name))
	return "cs-" + hex.EncodeToString(h[:])[:40]
}

func qualified(o v1alpha1.ObjectReference) string {
	if o.Group == "" {
		return o.Resource
	}
	return o.Resource + "." + o.Group
}

// writeSingletons copies, for every placement that wants singleton
// reported state, the status its single destination reports for each
// object it places there into the object's status in the workload
// description space, exactly.
func (r *reportedState) writeSingletons(ctx context.Context, out *outcome, m reports.Merged, b *batch) error {
	c := r.c
	for ref, keys := range out.placed {
		ps := c.spaces[ref.Space].placements[ref.Name]
		if ps == nil || !ps.obj.Spec.WantSingletonReportedState {
			continue
		}
		for _, k := range keys {
			e := out.entries[k]
			if e == nil || len(e.dests) != 1 || e.space != ref.Space {
				continue
			}
			live := m.Forwarded[k]
			if live == nil || reports.DestinationOf(live) != e.destinationList()[0] {
				continue
			}
			st, ok := jsonMap(live)["status"]
			if !ok {
				continue
			}
			if err := r.setStatus(ctx, b, ref.Space, k, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// setStatus adds to b the write of st as the status of the object at k of
// space, if it differs (a newer version of the object meanwhile fails b's
// Txn, which the next flush redoes).
func (r *reportedState) setStatus(ctx context.Context, b *batch, space string, k store.Key, st any) error {
	k.Space = space
	if b.holds(k) {
		return nil // two placements place the object: the same status
	}
	o, err := r.c.st.Get(k)
	if err != nil {
		return nil
	}
	m := jsonMap(o)
	if equality.Semantic.DeepEqual(m["status"], st) {
		return nil
	}
	m["status"] = st
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.add(ctx, store.Op{Type: store.OpUpdate, Key: k, Data: data, ExpectRevision: o.Revision})
}

// syncConditions sets a placement status's sync fields and its Synced and
// Ready conditions from what its destinations reported.
func syncConditions(st *v1alpha1.EdgePlacementStatus, gen int64, matched int, latest int64, sync reports.PlacementSync) {
	synced := sync.SyncedAt(latest)
	st.SyncedDestinations = int32(min(synced, int64(matched)))
	st.FailedDestinations = int32(sync.Failed)
	st.SyncedRevision = ""
	if latest > 0 {
		st.SyncedRevision = strconv.FormatInt(latest, 10)
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionSynced, ObservedGeneration: gen}
	switch {
	case matched == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonNoDestinations, "no destination matched"
	case sync.Failed > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonFailed
		cond.Message = fmt.Sprintf("%d of %d destinations failed to apply", sync.Failed, matched)
		if len(sync.Failing) > 0 {
			cond.Message += fmt.Sprintf("; %s: %s", sync.Failing[0].Name, sync.Failing[0].Reason)
		}
	case synced >= int64(matched):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonAsExpected,
			fmt.Sprintf("%d destinations applied revision %d", matched, latest)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonPending
		cond.Message = fmt.Sprintf("%d of %d destinations applied revision %d", synced, matched, latest)
	}
	st.Conditions = setCondition(st.Conditions, cond)
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: gen}
	switch {
	case cond.Status == metav1.ConditionTrue && sync.Ready >= int64(matched):
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonAsExpected, "every destination reports its objects ready"
	case cond.Status == metav1.ConditionTrue:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonPending
		ready.Message = fmt.Sprintf("%d of %d destinations report their objects ready", sync.Ready, matched)
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, cond.Reason, "not synced"
	}
	st.Conditions = setCondition(st.Conditions, ready)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
