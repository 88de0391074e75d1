package syncer

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/status"
)

// The reporter turns what the syncer knows into the reports of
// topology/reports: one Partial per (placed object, placement holding it,
// collector the placement names), and one PlacementSync per placement. It
// is one goroutine (Syncer.report) that wakes on changes, paced by a
// reports.Pacer of Config.StatusWindow: an isolated change is evaluated at
// once, and a stream of them at most once per window. What it
// computes goes into reportState; the report flusher writes it into the
// outbox.

// reportState is the reporter's, under Syncer.mu.
type reportState struct {
	wake chan struct{}

	// model is the inbox's view of reporting, set by the worker at the
	// start of each pass; results what the passes made of each object.
	model    *model
	results  map[store.Key]applyResult
	changed  bool // model or results changed since the reporter looked
	passDone bool // a pass has finished since Start: results are known
	// ready: the reporter has taken over the outbox's report keys (its
	// first round after passDone). Until then the flusher leaves them.
	ready bool
	// evaluating: a round has taken changed and evalDirty and not yet
	// marked what it computed dirty.
	evaluating bool

	sigs      map[store.Key]string // model.signature per object, as last evaluated
	evalDirty map[store.Key]struct{}

	partials   map[store.Key][]byte      // outbox key → encoded Partial report
	partialsOf map[store.Key][]store.Key // inbox key → its partials' keys
	syncs      map[store.Key][]byte      // outbox key → encoded PlacementSync report

	assoc     map[assocWatch]*informer
	upsync    map[upsyncWatch]*informer
	upsyncSig string // the upsync clauses the informers were last matched against
	// upsyncUnresolved: some upsync clause could not be resolved
	// (discovery failed, or does not know a resource it names).
	upsyncUnresolved bool

	evalErrors int64
}

// applyResult is what the last pass that reached an object made of it:
// applied (reason empty) or failed, at inbox revision rev.
type applyResult struct {
	rev    int64
	reason string
}

func newReportState() reportState {
	return reportState{
		wake:       make(chan struct{}, 1),
		results:    map[store.Key]applyResult{},
		sigs:       map[store.Key]string{},
		evalDirty:  map[store.Key]struct{}{},
		partials:   map[store.Key][]byte{},
		partialsOf: map[store.Key][]store.Key{},
		syncs:      map[store.Key][]byte{},
		assoc:      map[assocWatch]*informer{},
		upsync:     map[upsyncWatch]*informer{},
	}
}

func (s *Syncer) wakeReporterLocked() {
	select {
	case s.rep.wake <- struct{}{}:
	default:
	}
}

// markEvalLocked asks for k's partials to be evaluated again; mu held.
func (s *Syncer) markEvalLocked(k store.Key) {
	s.rep.evalDirty[k] = struct{}{}
	s.wakeReporterLocked()
}

// setModel is called by the worker with the inbox it is about to apply.
func (s *Syncer) setModel(items []*store.Object) {
	s.mu.Lock()
	prev := s.rep.model
	s.mu.Unlock()
	m := buildModel(prev, items, s.cfg.Name)
	s.mu.Lock()
	s.rep.model, s.rep.changed = m, true
	s.wakeReporterLocked()
	// Copies that Views start or stop gathering are written or deleted.
	var was map[store.Key]bool
	if prev != nil {
		was = prev.viewed
	}
	changed := false
	for _, pair := range [2][2]map[store.Key]bool{{m.viewed, was}, {was, m.viewed}} {
		for k := range pair[0] {
			if !pair[1][k] {
				s.dirty[s.viewedCopyKey(k)], changed = struct{}{}, true
			}
		}
	}
	if changed {
		s.wakeLocked()
	}
	s.mu.Unlock()
}

// viewedCopyKey is where the live copy of managed object k is reported
// when Views gather it.
func (s *Syncer) viewedCopyKey(k store.Key) store.Key {
	k.Name = reports.ForwardedName(s.cfg.Name, k.Name)
	return k
}

// passResults is called by the worker at the end of a pass, complete or
// not (the cluster stopped answering): applied maps the inbox keys found
// or made current to their inbox revision, failed those that failed to
// their reason, revs every inbox key to its revision. Keys the pass did
// not reach keep their last result. Until a pass completes, the reporter
// leaves the outbox's reports as they are (after a restart, those of the
// previous run).
func (s *Syncer) passResults(applied map[store.Key]int64, failed map[store.Key]string, revs map[store.Key]int64, complete bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.rep.results {
		if _, ok := revs[k]; !ok {
			delete(s.rep.results, k)
		}
	}
	for k, rev := range applied {
		s.rep.results[k] = applyResult{rev: rev}
	}
	for k, why := range failed {
		if rev, ok := revs[k]; ok {
			s.rep.results[k] = applyResult{rev: rev, reason: why}
		}
	}
	s.rep.passDone = s.rep.passDone || complete
	s.rep.changed = true
	s.wakeReporterLocked()
}

// failureLocked is why k's current version failed ("" if it did not, or
// is not known yet); mu held.
func (s *Syncer) failureLocked(m *model, k store.Key) string {
	po := m.objects[k]
	if r, ok := s.rep.results[k]; ok && po != nil && r.rev == po.rev {
		return r.reason
	}
	return ""
}

// report is the reporter goroutine.
func (s *Syncer) report(ctx context.Context) {
	var retry <-chan time.Time
	pace := reports.NewPacer(s.cfg.StatusWindow)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.rep.wake:
		case <-retry:
			// An upsync clause named what discovery did not know.
			retry = nil
			s.discoCache.Invalidate()
			s.mu.Lock()
			s.rep.changed = true
			s.mu.Unlock()
		}
		if d := pace.Wait(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		// Wait for the pass, and the informers' view of what it applied,
		// to be evaluated once (settle.go).
		if !s.settle(ctx, s.rep.wake, s.quietLocked, s.cfg.StatusWindow) {
			return
		}
		if unresolved := s.reportRound(); unresolved && retry == nil {
			retry = time.After(s.cfg.ProbeInterval)
		}
		pace.Done()
	}
}

// reportRound evaluates what changed and updates the reports; it returns
// whether upsync clauses must be resolved again later.
func (s *Syncer) reportRound() (retryUpsync bool) {
	s.mu.Lock()
	retryUpsync = s.rep.upsyncUnresolved
	if !s.rep.passDone || s.rep.model == nil {
		s.mu.Unlock()
		return retryUpsync
	}
	m := s.rep.model
	first := !s.rep.ready
	changed := s.rep.changed
	s.rep.changed = false
	s.rep.evaluating = true
	s.mu.Unlock()
	if first {
		s.adoptOutbox()
	}
	s.mu.Lock()
	if changed {
		for k := range m.objects {
			if sig := m.signature(k, s.failureLocked(m, k)); s.rep.sigs[k] != sig {
				s.rep.sigs[k] = sig
				s.rep.evalDirty[k] = struct{}{}
			}
		}
		for k := range s.rep.sigs {
			if m.objects[k] == nil {
				delete(s.rep.sigs, k)
				s.rep.evalDirty[k] = struct{}{}
			}
		}
	}
	dirty := s.rep.evalDirty
	s.rep.evalDirty = map[store.Key]struct{}{}
	s.mu.Unlock()

	if changed {
		s.ensureAssociated(m)
		retryUpsync = s.ensureUpsync(m)
		s.mu.Lock()
		s.rep.upsyncUnresolved = retryUpsync
		s.mu.Unlock()
	}

	type outcome struct {
		parts   map[store.Key][]byte
		pending bool
	}
	outcomes := make(map[store.Key]outcome, len(dirty))
	for k := range dirty {
		parts, pending := s.evaluateObject(m, k)
		outcomes[k] = outcome{parts, pending}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.evaluating = false
	for k, o := range outcomes {
		if o.pending {
			continue // its live state (or that of what it owns) is not known yet: keep what is reported
		}
		keep := make([]store.Key, 0, len(o.parts))
		for pk := range o.parts {
			keep = append(keep, pk)
		}
		for _, old := range s.rep.partialsOf[k] {
			if _, ok := o.parts[old]; !ok {
				delete(s.rep.partials, old)
				s.dirty[old] = struct{}{}
			}
		}
		for pk, data := range o.parts {
			if !bytes.Equal(s.rep.partials[pk], data) {
				s.rep.partials[pk] = data
				s.dirty[pk] = struct{}{}
			}
		}
		if len(keep) == 0 {
			delete(s.rep.partialsOf, k)
		} else {
			s.rep.partialsOf[k] = keep
		}
	}
	s.placementSyncsLocked(m)
	s.wakeLocked()
	return retryUpsync
}

// adoptOutbox takes over the reports of the outbox, once, when the first
// pass is done: partials and placement syncs left from before a restart
// are kept as the current ones (so that an object whose live state is
// not known yet keeps its report) and their objects are evaluated again;
// every report is marked dirty, so that what no longer applies is
// deleted.
func (s *Syncer) adoptOutbox() {
	lr, err := s.cfg.Store.List(store.ListOptions{Space: s.cfg.Outbox})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.ready = true
	if err != nil {
		s.log.Warn("reading the outbox", "error", err)
		return
	}
	for _, o := range lr.Items {
		k := o.Key
		k.Space = ""
		switch k.Resource {
		case DestinationStatusResource:
			continue
		case reports.PartialResource:
			if p, err := reports.Decode[reports.Partial](o.Data); err == nil && p.Key() == k {
				obj := store.Key{Resource: store.Resource{Group: p.Object.Group, Resource: p.Object.Resource},
					Namespace: p.Object.Namespace, Name: p.Object.Name}
				s.rep.partials[k] = o.Data
				s.rep.partialsOf[obj] = append(s.rep.partialsOf[obj], k)
				s.rep.evalDirty[obj] = struct{}{}
			}
		case reports.PlacementSyncResource:
			if p, err := reports.Decode[reports.PlacementSync](o.Data); err == nil && p.Key() == k {
				s.rep.syncs[k] = o.Data
			}
		}
		s.dirty[k] = struct{}{}
	}
	s.wakeLocked()
}

// liveOf returns the informer's copy of managed object k. known is false
// while that cannot be told (no record applied, informer not listed).
func (s *Syncer) liveOf(k store.Key) (u *unstructured.Unstructured, known bool) {
	s.mu.Lock()
	r := s.records[k]
	var inf *informer
	var ns, name string
	if r != nil && r.applied() {
		inf = s.informerOfLocked(r)
		ns, name = r.Namespace, r.Name
	}
	s.mu.Unlock()
	if inf == nil || !inf.synced.Load() {
		return nil, false
	}
	u, ok := inf.get(ns, name)
	if !ok {
		return nil, true
	}
	return u, true
}

// evaluateObject computes the partial reports of object k: for each
// placement holding it, EvaluateAll of the collectors it names (the
// destination fails as a whole), or each collector's Failed with the
// apply failure. pending is true when k's live object or its associated
// objects are not known yet (the reports stay as they are).
func (s *Syncer) evaluateObject(m *model, k store.Key) (parts map[store.Key][]byte, pending bool) {
	parts = map[store.Key][]byte{}
	po := m.objects[k]
	if po == nil || !m.evaluated(k) {
		return parts, false
	}
	s.mu.Lock()
	failure := s.failureLocked(m, k)
	s.mu.Unlock()
	var (
		live  *unstructured.Unstructured
		assoc []map[string]any
	)
	if failure == "" {
		u, known := s.liveOf(k)
		if !known || u == nil {
			return nil, true
		}
		var ok bool
		if assoc, ok = s.associated(k.Resource, u); !ok {
			return nil, true
		}
		live = u
	}
	objRef := v1alpha1.ObjectReference{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name}
	for _, ref := range po.placements {
		cols := m.collectorsOf(ref)
		if len(cols) == 0 {
			continue
		}
		var ps []status.Partial
		if failure != "" {
			for _, c := range cols {
				ps = append(ps, c.Failed(m.dest.Name, failure))
			}
		} else {
			var err error
			ps, err = status.EvaluateAll(cols, live.Object, assoc, m.dest)
			if err != nil {
				s.mu.Lock()
				s.rep.evalErrors++
				s.mu.Unlock()
				s.log.Debug("status collector failed", "object", KeyString(k), "placement", ref.String(), "error", err)
			}
		}
		for i, c := range cols {
			rp := reports.Partial{Placement: ref, Object: objRef, Collector: c.Name(), Partial: ps[i]}
			pk := rp.Key()
			data, err := reports.Encode(reports.KindPartial, pk.Name, rp)
			if err != nil {
				s.log.Warn("encoding a partial", "object", KeyString(k), "error", err)
				continue
			}
			parts[pk] = data
		}
	}
	return parts, false
}

// placementSyncsLocked recomputes the PlacementSync of every placement of
// m and deletes those of placements gone; mu held. A placement some of
// whose objects' live state cannot be told yet keeps its last report.
func (s *Syncer) placementSyncsLocked(m *model) {
	want := map[store.Key]bool{}
	for _, ref := range m.refs {
		ps := reports.PlacementSync{Placement: ref}
		k := ps.Key()
		want[k] = true
		ps, known := s.placementSyncLocked(m, ref)
		if !known {
			continue
		}
		data, err := reports.Encode(reports.KindPlacementSync, k.Name, ps)
		if err != nil {
			continue
		}
		if !bytes.Equal(s.rep.syncs[k], data) {
			s.rep.syncs[k] = data
			s.dirty[k] = struct{}{}
		}
	}
	for k := range s.rep.syncs {
		if !want[k] {
			delete(s.rep.syncs, k)
			s.dirty[k] = struct{}{}
		}
	}
}

// placementSyncLocked is this destination's PlacementSync for ref: the
// newest source revision of its objects once every one is applied at its
// current version, Failed when one failed, neither while applying; Ready
// when every one is ready. mu held.
func (s *Syncer) placementSyncLocked(m *model, ref reports.PlacementRef) (reports.PlacementSync, bool) {
	ps := reports.PlacementSync{Placement: ref, Destinations: 1}
	var (
		newest   int64
		applying bool
		failed   []string
		ready    = true
	)
	for _, k := range m.held[ref] {
		po := m.objects[k]
		newest = max(newest, po.srcRev)
		r, ok := s.rep.results[k]
		switch {
		case !ok || r.rev != po.rev:
			applying = true
		case r.reason != "":
			failed = append(failed, KeyString(k)+": "+r.reason)
		}
		rec := s.records[k]
		if rec == nil {
			// Never applied, or a Namespace that existed before Canopy
			// (applied without a record): ready when applied.
			ready = ready && ok && r.rev == po.rev && r.reason == ""
			continue
		}
		inf := s.informerOfLocked(rec)
		if !rec.applied() || inf == nil {
			ready = false
			continue
		}
		if !inf.synced.Load() {
			return ps, false
		}
		live, ok := inf.get(rec.Namespace, rec.Name)
		ready = ready && ok && isReady(k.Resource, live)
	}
	switch {
	case len(failed) > 0:
		reason := failed[0]
		if len(failed) > 1 {
			reason += fmt.Sprintf(" (and %d more)", len(failed)-1)
		}
		ps.Failed, ps.Failing = 1, []reports.FailingDest{{Name: m.dest.Name, Reason: cutString(reason, v1alpha1.MaxFailingReasonLength)}}
	case !applying:
		ps.Revisions = map[string]int64{strconv.FormatInt(newest, 10): 1}
	}
	if ready {
		ps.Ready = 1
	}
	return ps, true
}

// isReady tells whether a live object is ready: Deployments, StatefulSets
// and DaemonSets when their controller observed the current generation
// and every desired replica is updated and ready (available); Jobs when
// Complete; anything else when it exists.
func isReady(res store.Resource, u *unstructured.Unstructured) bool {
	i64 := func(path ...string) int64 {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
		return 0
	}
	replicas := func() int64 {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); ok && v != nil {
			return i64("spec", "replicas")
		}
		return 1
	}
	observed := func() bool { return i64("status", "observedGeneration") >= u.GetGeneration() }
	switch res {
	case store.Resource{Group: "apps", Resource: "deployments"}:
		want := replicas()
		return observed() && i64("status", "updatedReplicas") >= want && i64("status", "availableReplicas") >= want &&
			i64("status", "replicas") <= want
	case store.Resource{Group: "apps", Resource: "statefulsets"}:
		want := replicas()
		return observed() && i64("status", "readyReplicas") >= want && i64("status", "updatedReplicas") >= want
	case store.Resource{Group: "apps", Resource: "daemonsets"}:
		want := i64("status", "desiredNumberScheduled")
		return observed() && i64("status", "numberReady") >= want && i64("status", "updatedNumberScheduled") >= want &&
			i64("status", "numberAvailable") >= want
	case store.Resource{Group: "batch", Resource: "jobs"}:
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return slices.ContainsFunc(conds, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Complete" && m["status"] == "True"
		})
	}
	return true
}

// cutString cuts s to n bytes at most (on a rune boundary), marking the
// cut with "...".
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - 3
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}

// liveLocked is managed object rec as its informer holds it (del: it is
// gone), or skip while the informer has not listed; mu held.
func (s *Syncer) liveLocked(rec *record) (live *unstructured.Unstructured, del, skip bool) {
	inf := s.informerOfLocked(rec)
	if inf == nil || !inf.synced.Load() {
		return nil, false, true // written when the informer has listed
	}
	live, ok := inf.get(rec.Namespace, rec.Name)
	return live, !ok, false
}

// reportLocked decides what the outbox must hold under k: the encoded
// data, or live state to encode, or del; skip when it cannot be told
// yet (the key is marked dirty again when it can). mu held.
func (s *Syncer) reportLocked(k store.Key) (r report, skip bool) {
	r.key = k
	switch k.Resource {
	case reports.PartialResource, reports.PlacementSyncResource:
		if !s.rep.ready {
			return r, true
		}
		src := s.rep.partials
		if k.Resource == reports.PlacementSyncResource {
			src = s.rep.syncs
		}
		r.data, r.del = src[k], src[k] == nil
		return r, false
	}
	if rec := s.records[k]; rec != nil && rec.applied() {
		r.live, r.del, skip = s.liveLocked(rec)
		return r, skip
	}
	if name, ok := strings.CutPrefix(k.Name, reports.ForwardedName(s.cfg.Name, "")); ok {
		if base := (store.Key{Resource: k.Resource, Namespace: k.Namespace, Name: name}); s.rep.model != nil && s.rep.model.viewed[base] {
			// The live copy of a managed object that Views gather.
			r.rename, r.viewed, r.del = k.Name, true, true
			if rec := s.records[base]; rec != nil && rec.applied() {
				r.live, r.del, skip = s.liveLocked(rec)
			}
			return r, skip
		}
		if !s.rep.ready {
			return r, true
		}
		live, del, skip := s.upsyncReportLocked(k)
		if skip {
			return r, true
		}
		r.live, r.del = live, del
		if live != nil {
			r.rename = k.Name
		}
		return r, false
	}
	r.del = true
	return r, false
}
