package placement

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
)

// maxOps bounds the ops of one Txn.
const maxOps = 256

// batch collects store ops and applies them maxOps at a time.
type batch struct {
	st  *store.Store
	ops []store.Op
	// then holds, per op, what to do once it is committed (nil: nothing),
	// with the revision it was committed at.
	then []func(rev int64)
	// redo is set when a Txn lost a race with another writer and was
	// dropped: the controller flushes again (Controller.redo).
	redo *bool
	// keys, when not nil, holds the keys of the ops since the last flush
	// (for holds; the batches of reported state have it).
	keys map[store.Key]bool
}

// holds reports whether an op on k waits in b: a second would fail the
// Txn, whose ops read the same revision of k.
func (b *batch) holds(k store.Key) bool { return b.keys[k] }

func (b *batch) add(ctx context.Context, op store.Op) error {
	return b.addThen(ctx, op, nil)
}

// addThen adds op, and then, which is called once op is committed.
func (b *batch) addThen(ctx context.Context, op store.Op, then func(rev int64)) error {
	b.ops = append(b.ops, op)
	b.then = append(b.then, then)
	if b.keys != nil {
		b.keys[op.Key] = true
	}
	if len(b.ops) >= maxOps {
		return b.flush(ctx)
	}
	return nil
}

func (b *batch) flush(ctx context.Context) error {
	if len(b.ops) == 0 {
		return nil
	}
	res, err := b.st.Txn(ctx, b.ops...)
	then := b.then
	b.ops, b.then = b.ops[:0], nil
	clear(b.keys)
	if err == nil {
		for _, f := range then {
			if f != nil {
				f(res.Revision)
			}
		}
	}
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrNotFound) {
		// Someone wrote meanwhile (an admin by hand): the next flush
		// redoes it from what is stored then.
		if b.redo != nil {
			*b.redo = true
		}
		return nil
	}
	return err
}

// metadata fields of a workload object that stay in its space: the
// destination assigns its own (the downsync version has its own creation
// time, set by writeEntry).
var droppedMetadata = []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
	"ownerReferences", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers"}

// render returns the downsync version of an entry: the source object
// without status and server-set metadata, annotated with its destinations,
// the Customizers chosen for them and whether Views gather its copies.
func render(k store.Key, e *entry) ([]byte, error) {
	return json.Marshal(renderMap(k, e))
}

// renderMap is render before encoding.
func renderMap(k store.Key, e *entry) map[string]any {
	m := jsonMap(e.source)
	delete(m, "status")
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	for _, f := range droppedMetadata {
		delete(md, f)
	}
	if e.rename != "" {
		md["name"] = e.rename
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
	dests := e.destinationList()
	ann[v1alpha1.DestinationsAnnotation] = strings.Join(dests, ",")
	ann[v1alpha1.SourceAnnotation] = e.space
	if e.space == "" {
		ann[v1alpha1.SourceAnnotation] = layout.InventorySpace
	}
	if e.location != "" {
		ann[v1alpha1.LocationAnnotation] = e.location
	}
	delete(ann, v1alpha1.ViewedAnnotation)
	if e.viewed {
		ann[v1alpha1.ViewedAnnotation] = "true"
	}
	// The Customizer most destinations use goes in the object's own
	// annotation; the others are listed per destination.
	counts := map[string]int{}
	for _, ch := range e.dests {
		counts[ch.customizer]++
	}
	def := ""
	for _, c := range sortedKeys(counts) {
		if counts[c] > counts[def] || (def == "" && counts[c] == counts[def] && c != "" && counts[""] == 0) {
			def = c
		}
	}
	delete(ann, v1alpha1.CustomizerAnnotation)
	if def != "" {
		ns, name, _ := strings.Cut(def, "/")
		if k.Namespace == ns {
			ann[v1alpha1.CustomizerAnnotation] = name
		} else {
			ann[v1alpha1.CustomizerAnnotation] = def
		}
	}
	var over []string
	for _, d := range dests {
		if c := e.dests[d].customizer; c != def {
			over = append(over, d+"="+c)
		}
	}
	delete(ann, v1alpha1.CustomizerOverridesAnnotation)
	if len(over) > 0 {
		ann[v1alpha1.CustomizerOverridesAnnotation] = strings.Join(over, ",")
	}
	delete(ann, v1alpha1.LocationOverridesAnnotation)
	if e.locOver != "" {
		ann[v1alpha1.LocationOverridesAnnotation] = e.locOver
	}
	md["annotations"] = ann
	return m
}

// canonical re-encodes a stored version without its resourceVersion,
// creation time and source revision, as render produces it; it also
// returns the source revision and the creation time ("" when none).
func canonical(o *store.Object) (data []byte, rev, created string) {
	m := jsonMap(o)
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		created, _ = md["creationTimestamp"].(string)
		delete(md, "creationTimestamp")
		if ann, ok := md["annotations"].(map[string]any); ok {
			rev, _ = ann[v1alpha1.SourceRevisionAnnotation].(string)
			delete(ann, v1alpha1.SourceRevisionAnnotation)
		}
	}
	b, _ := json.Marshal(m)
	return b, rev, created
}

// written is what writeDownsync knows of a downsync key: the stored
// revision it found equal to (or wrote from) the entry rendered from the
// source revision source with signature sig, the digest of that
// rendering, and the source revision and creation time stored there.
type written struct {
	stored, source int64
	sig            string
	digest         [sha256.Size]byte
	sourceRev      int64
	created        string
}

// signature is everything render reads of an entry besides its source
// version and key.
func (e *entry) signature() string {
	if e.sig != "" {
		return e.sig
	}
	var b strings.Builder
	b.WriteString(e.space + "|" + e.rename + "|" + e.location + "|" + e.locOver + "|" + strconv.FormatBool(e.viewed))
	for _, d := range e.destinationList() {
		b.WriteString("|" + d + "=" + e.dests[d].customizer)
	}
	e.sig = b.String()
	return e.sig
}

// writeDownsync brings the downsync space in line with out: it writes
// what differs and deletes what it placed before and no longer does.
func (c *Controller) writeDownsync(ctx context.Context, out *outcome) error {
	lr, err := c.st.List(store.ListOptions{Space: c.cfg.Downsync})
	if err != nil {
		return err
	}
	cur := make(map[store.Key]*store.Object, len(lr.Items))
	for _, o := range lr.Items {
		k := o.Key
		k.Space = ""
		cur[k] = o
	}
	b := &batch{st: c.st, redo: &c.redo}
	out.sourceRev = map[store.Key]int64{}
	for k := range c.wrote {
		if out.entries[k] == nil {
			delete(c.wrote, k)
		}
	}
	for _, k := range slicesSorted(out.entries) {
		if err := c.writeEntry(ctx, b, out, k, cur[k]); err != nil {
			return err
		}
	}
	for k, o := range cur {
		if _, want := out.entries[k]; want || !placedByUs(o) {
			continue
		}
		if err := b.add(ctx, store.Op{Type: store.OpDelete, Key: o.Key, ExpectRevision: o.Revision}); err != nil {
			return err
		}
	}
	return b.flush(ctx)
}

// writeDownsyncKeys writes the entries of keys where they differ from
// the downsync space (patch: out's other entries are unchanged).
func (c *Controller) writeDownsyncKeys(ctx context.Context, out *outcome, keys []store.Key) error {
	b := &batch{st: c.st, redo: &c.redo}
	for _, k := range keys {
		dk := k
		dk.Space = c.cfg.Downsync
		o, err := c.st.Get(dk)
		if errors.Is(err, store.ErrNotFound) {
			o = nil
		} else if err != nil {
			return err
		}
		if err := c.writeEntry(ctx, b, out, k, o); err != nil {
			return err
		}
	}
	return b.flush(ctx)
}

// writeEntry adds to b the write that brings the downsync version o of
// key k (nil: none) in line with out's entry, if any is needed, and
// records the source revision the downsync space holds for it.
func (c *Controller) writeEntry(ctx context.Context, b *batch, out *outcome, k store.Key, o *store.Object) error {
	e := out.entries[k]
	sig := e.signature()
	w, known := c.wrote[k]
	known = known && o != nil && w.stored == o.Revision
	// An entry whose source version and destinations are those the
	// stored version was found equal to (or written from) is unchanged:
	// with a SyncTarget copy per destination, this keeps a flush from
	// rendering the whole fleet's copies again.
	if known && w.source == e.source.Revision && w.sig == sig {
		out.sourceRev[k] = w.sourceRev
		return nil
	}
	m := renderMap(k, e)
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(data)
	// The source revision changes only with the content placed, so that
	// status writes to the source do not travel down the tree. A stored
	// version known by its digest is not decoded again.
	same := known && w.digest == digest
	created, sourceRev := "", e.source.Revision
	if known {
		created = w.created
	}
	if !known && o != nil {
		var old []byte
		var rev string
		old, rev, created = canonical(o)
		if bytes.Equal(old, data) {
			w.sourceRev, _ = strconv.ParseInt(rev, 10, 64)
			// A version stored without a creation time is written
			// once more to get one, with the source revision it has.
			if same = created != ""; !same && w.sourceRev > 0 {
				sourceRev = w.sourceRev
			}
		}
	}
	if same {
		out.sourceRev[k] = w.sourceRev
		c.wrote[k] = written{stored: o.Revision, source: e.source.Revision, sig: sig, digest: digest, sourceRev: w.sourceRev, created: created}
		return nil
	}
	delete(c.wrote, k) // known again once the write is committed
	// The downsync version is created when first placed, and keeps that
	// time while placed (kubectl shows it as AGE, in the mailboxes too);
	// it is not part of the content compared above.
	if created == "" {
		created = now().UTC().Format(time.RFC3339)
	}
	md := m["metadata"].(map[string]any)
	md["creationTimestamp"] = created
	md["annotations"].(map[string]any)[v1alpha1.SourceRevisionAnnotation] = strconv.FormatInt(sourceRev, 10)
	if data, err = json.Marshal(m); err != nil {
		return err
	}
	dk := k
	dk.Space = c.cfg.Downsync
	op := store.Op{Type: store.OpCreate, Key: dk, Data: data}
	if o != nil {
		op.Type, op.ExpectRevision = store.OpUpdate, o.Revision
	}
	next := written{source: e.source.Revision, sig: sig, digest: digest, sourceRev: sourceRev, created: created}
	committed := func(rev int64) {
		next.stored = rev
		c.wrote[k] = next
	}
	if err := b.addThen(ctx, op, committed); err != nil {
		return err
	}
	out.sourceRev[k] = sourceRev
	return nil
}

func placedByUs(o *store.Object) bool {
	md, _ := jsonMap(o)["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	_, ok := ann[v1alpha1.SourceAnnotation]
	return ok
}

func slicesSorted(m map[store.Key]*entry) []store.Key {
	keys := make([]store.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// writeSlices rewrites the SinglePlacementSlices of the dirty placements,
// slice by slice, only where their destinations changed.
func (c *Controller) writeSlices(ctx context.Context) error {
	b := &batch{st: c.st, redo: &c.redo}
	for ref := range c.dirtyPlacements {
		s := c.spaces[ref.Space]
		var ps *placementState
		if s != nil {
			ps = s.placements[ref.Name]
		}
		existing, err := c.st.List(store.ListOptions{Space: ref.Space, Resource: slicesRes,
			Label: labels.SelectorFromSet(labels.Set{v1alpha1.PlacementLabel: ref.Name})})
		if err != nil {
			return err
		}
		cur := map[string]*store.Object{}
		for _, o := range existing.Items {
			cur[o.Key.Name] = o
		}
		if ps == nil || ps.obj.DeletionTimestamp != nil {
			for _, o := range existing.Items {
				if err := b.add(ctx, store.Op{Type: store.OpDelete, Key: o.Key}); err != nil {
					return err
				}
			}
			delete(c.pagers, ref)
			continue
		}
		pg := c.pagers[ref]
		if pg == nil {
			old := map[string][]v1alpha1.Destination{}
			for name, o := range cur {
				var sl v1alpha1.SinglePlacementSlice
				if json.Unmarshal(o.Data, &sl) == nil {
					old[name] = sl.Destinations
				}
			}
			pg = scheduler.NewPager(ref.Name, v1alpha1.MaxDestinationsPerSlice, old)
			c.pagers[ref] = pg
		}
		ch := pg.Update(c.eng.Destinations(ref))
		writes, deletes := ch.Write, ch.Delete
		for _, name := range sortedKeys(writes) {
			data, err := sliceData(ps.obj, name, writes[name], cur[name])
			if err != nil {
				return err
			}
			op := store.Op{Type: store.OpCreate, Key: store.Key{Space: ref.Space, Resource: slicesRes, Name: name}, Data: data}
			if o := cur[name]; o != nil {
				op.Type, op.ExpectRevision = store.OpUpdate, o.Revision
			}
			if err := b.add(ctx, op); err != nil {
				return err
			}
		}
		for _, name := range deletes {
			if o := cur[name]; o != nil {
				if err := b.add(ctx, store.Op{Type: store.OpDelete, Key: o.Key, ExpectRevision: o.Revision}); err != nil {
					return err
				}
			}
		}
	}
	return b.flush(ctx)
}

func sliceData(p *v1alpha1.EdgePlacement, name string, dests []v1alpha1.Destination, cur *store.Object) ([]byte, error) {
	sl := v1alpha1.SinglePlacementSlice{
		EdgePlacement:    p.Name,
		Destinations:     dests,
		DestinationCount: int32(len(dests)),
	}
	sl.APIVersion, sl.Kind = v1alpha1.SchemeGroupVersion.String(), v1alpha1.KindSinglePlacementSlice
	sl.Name = name
	sl.Labels = map[string]string{v1alpha1.PlacementLabel: p.Name}
	t := true
	sl.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindEdgePlacement,
		Name: p.Name, UID: p.UID, Controller: &t, BlockOwnerDeletion: &t,
	}}
	if cur != nil {
		var old v1alpha1.SinglePlacementSlice
		if err := json.Unmarshal(cur.Data, &old); err == nil {
			sl.UID, sl.CreationTimestamp = old.UID, old.CreationTimestamp
		}
	}
	if sl.UID == "" {
		sl.UID = types.UID(uuid.NewString())
		sl.CreationTimestamp = now()
	}
	return json.Marshal(sl)
}

// writeStatuses writes each placement's status where it changed: observed
// generation, matched destinations and conflicts. (Synced and Ready come
// from reported state.)
func (r *reportedState) writeStatuses(ctx context.Context, out *outcome, syncs map[scheduler.PlacementRef]reports.PlacementSync, b *batch) error {
	c := r.c
	for _, sname := range sortedKeys(c.spaces) {
		s := c.spaces[sname]
		for _, pname := range sortedKeys(s.placements) {
			ps := s.placements[pname]
			ref := scheduler.PlacementRef{Space: sname, Name: pname}
			if ps.obj.DeletionTimestamp != nil {
				continue
			}
			st := ps.obj.Status
			st.ObservedGeneration = ps.obj.Generation
			st.MatchedDestinations = int32(len(out.matched[ref]))
			conf := out.conflicts[ref]
			slices.SortFunc(conf, compareConflicts)
			st.ConflictCount = int32(len(conf))
			st.Conflicts = conf[:min(len(conf), v1alpha1.MaxReportedConflicts)]
			if len(st.Conflicts) == 0 {
				st.Conflicts = nil
			}
			st.Conditions = setCondition(st.Conditions, placementCondition(ps, len(out.matched[ref]), len(conf)))
			st.Conditions = setCondition(st.Conditions, customizedCondition(ps, out.failures[ref], out.failed[ref]))
			syncConditions(&st, ps.obj.Generation, len(out.matched[ref]), out.latest(ref), syncs[ref])
			if len(ps.obj.Spec.Upsync) > 0 {
				st.Conditions = setCondition(st.Conditions, upsyncedCondition(ps, r.upsynced[ref]))
			} else {
				st.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c metav1.Condition) bool { return c.Type == ConditionUpsynced })
			}
			if equality.Semantic.DeepEqual(st, ps.obj.Status) {
				continue
			}
			if err := r.updateStatus(ctx, b, ref, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareConflicts orders conflicts by object, destination, then the
// placements involved: a total order, so that the status does not
// depend on the order desired found them in.
func compareConflicts(a, b v1alpha1.Conflict) int {
	return cmp.Or(
		cmp.Compare(a.Object.Group, b.Object.Group),
		cmp.Compare(a.Object.Resource, b.Object.Resource),
		cmp.Compare(a.Object.Namespace, b.Object.Namespace),
		cmp.Compare(a.Object.Name, b.Object.Name),
		cmp.Compare(a.Destination, b.Destination),
		slices.Compare(a.Placements, b.Placements),
	)
}

// updateStatus adds to b the write of st into the placement's status
// (setStatus).
func (r *reportedState) updateStatus(ctx context.Context, b *batch, ref scheduler.PlacementRef, st v1alpha1.EdgePlacementStatus) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var sm map[string]any
	if err := json.Unmarshal(raw, &sm); err != nil {
		return err
	}
	return r.setStatus(ctx, b, ref.Space, store.Key{Resource: placementsRes, Name: ref.Name}, sm)
}

// placementCondition is the Scheduled condition: whether the placement's
// clauses compiled and it matched destinations.
func placementCondition(ps *placementState, matched, conflicts int) metav1.Condition {
	cond := metav1.Condition{Type: ConditionScheduled, Status: "True", Reason: v1alpha1.ReasonAsExpected,
		Message: "destinations matched", ObservedGeneration: ps.obj.Generation}
	switch {
	case ps.err != nil:
		cond.Status, cond.Reason, cond.Message = "False", ReasonInvalid, ps.err.Error()
	case matched == 0:
		cond.Status, cond.Reason, cond.Message = "False", v1alpha1.ReasonNoDestinations, "no SyncTarget of a selected Location"
	case conflicts > 0:
		cond.Reason, cond.Message = v1alpha1.ReasonConflict, "another placement places some objects differently; see status.conflicts"
	}
	return cond
}

// customizedCondition says whether every object the placement places
// expands at every destination.
func customizedCondition(ps *placementState, failures int, msgs []string) metav1.Condition {
	cond := metav1.Condition{Type: ConditionCustomized, Status: "True", Reason: v1alpha1.ReasonAsExpected,
		Message: "every placed object expands at every destination", ObservedGeneration: ps.obj.Generation}
	if failures > 0 {
		cond.Status, cond.Reason = "False", ReasonCustomizationFailed
		cond.Message = fmt.Sprintf("%d object(s) cannot be customized for their destination and are not applied there: %s",
			failures, strings.Join(msgs, "; "))
	}
	return cond
}

// ConditionCustomized is False when some placed object cannot be expanded
// for some destination (a missing parameter or Customizer).
const (
	ConditionCustomized       = "Customized"
	ReasonCustomizationFailed = "CustomizationFailed"
)

// ConditionScheduled is True when the placement's clauses are valid and
// it matched at least one destination.
const (
	ConditionScheduled = "Scheduled"
	ReasonInvalid      = "Invalid"
)

func setCondition(conds []metav1.Condition, c metav1.Condition) []metav1.Condition {
	out := slices.Clone(conds)
	for i := range out {
		if out[i].Type == c.Type {
			if out[i].Status == c.Status && out[i].Reason == c.Reason && out[i].Message == c.Message && out[i].ObservedGeneration == c.ObservedGeneration {
				return out
			}
			c.LastTransitionTime = out[i].LastTransitionTime
			if out[i].Status != c.Status {
				c.LastTransitionTime = now()
			}
			out[i] = c
			return out
		}
	}
	c.LastTransitionTime = now()
	return append(out, c)
}
