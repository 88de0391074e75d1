package syncer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// op is a kind of work for the worker.
type op int

const (
	// opSync: bring the cluster in line with the whole inbox.
	opSync op = iota + 1
	// opCursor: the inbox cursor moved.
	opCursor
	// opCheck: a managed object changed in the cluster; restore it if
	// someone changed a field the syncer set, or deleted it.
	opCheck
	// opProbe: read the cluster's /version (every ProbeInterval).
	opProbe
)

// item is one unit of work. The queue holds each item once, so a burst of
// inbox changes is one pending pass, and a burst of changes to one object
// one pending check.
type item struct {
	op  op
	key store.Key // opCheck: the inbox key
}

// MaxReportedFailures bounds DestinationState.Failed.
const MaxReportedFailures = 100

var (
	crdGK = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	nsGK  = schema.GroupKind{Kind: "Namespace"}
	nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

	errPartial     = errors.New("syncer: some objects failed")
	errTerminating = errors.New("syncer: object is being deleted")
)

// work is the worker: it alone changes the cluster and the records.
func (s *Syncer) work(ctx context.Context) {
	for {
		it, quit := s.queue.Get()
		if quit {
			return
		}
		var err error
		switch it.op {
		case opSync:
			err = s.sync(ctx)
		case opCursor:
			s.observeCursor()
		case opCheck:
			err = s.check(ctx, it.key)
		case opProbe:
			s.probe(ctx)
			s.queue.Forget(it)
			s.queue.AddAfter(it, s.cfg.ProbeInterval)
			s.queue.Done(it)
			s.workerIdle()
			continue
		}
		switch {
		case err == nil:
			s.queue.Forget(it)
		case ctx.Err() != nil || isStoreClosed(err):
		default:
			if isUnreachable(err) {
				s.setReachable(err)
			} else if !errors.Is(err, errPartial) && !errors.Is(err, errTerminating) {
				s.log.Warn("syncer work failed", "op", it.op, "key", KeyString(it.key), "error", err)
				s.setLastError(err)
			}
			s.queue.AddRateLimited(it)
		}
		s.queue.Done(it)
		s.workerIdle()
	}
}

// pass is the bookkeeping of one sync.
type pass struct {
	failed      map[store.Key]string
	applied     map[store.Key]int64 // found or made current: its inbox revision
	keep        map[store.Key]bool  // in the inbox: never pruned
	inSync      int
	contacted   bool // a request to the cluster succeeded
	mapperReset bool
	firstErr    error
}

func (p *pass) fail(k store.Key, err error) {
	p.failed[k] = err.Error()
	if p.firstErr == nil {
		p.firstErr = fmt.Errorf("%s: %w", KeyString(k), err)
	}
}

// sync is one pass over the whole inbox: expand it, apply CRDs (and wait
// for them), then namespaces, then the rest, then delete what left.
func (s *Syncer) sync(ctx context.Context) error {
	s.passes.Add(1)
	// The cursor is read before the list: it is written in the Txn of the
	// objects it covers, so the list holds at least what it says.
	cursor, err := s.readCursor()
	if err != nil {
		return err
	}
	lr, err := s.cfg.Store.List(store.ListOptions{Space: s.cfg.Inbox})
	if err != nil {
		return err
	}
	s.setModel(lr.Items)
	desired, expErrs := s.memo.desired(lr.Items, s.cfg.Name)
	p := &pass{failed: map[store.Key]string{}, applied: map[store.Key]int64{}, keep: map[store.Key]bool{}}
	revs := make(map[store.Key]int64, len(lr.Items))
	for _, o := range lr.Items {
		k := o.Key
		k.Space = ""
		revs[k] = o.Revision
	}
	complete := false
	defer func() { s.passResults(p.applied, p.failed, revs, complete) }()
	for _, e := range expErrs {
		p.failed[e.Key], p.keep[e.Key] = e.Err.Error(), true
	}
	var crds, nss, others []DesiredObject
	for _, d := range desired {
		p.keep[d.Key] = true
		switch d.Object.GroupVersionKind().GroupKind() {
		case crdGK:
			crds = append(crds, d)
		case nsGK:
			nss = append(nss, d)
		default:
			others = append(others, d)
		}
	}

	applied, err := s.applyPhase(ctx, p, crds)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		if err := s.waitEstablished(ctx, p, applied); err != nil {
			return err
		}
		s.mapper.Reset()
		p.mapperReset = true
	}
	if _, err := s.applyPhase(ctx, p, nss); err != nil {
		return err
	}
	if _, err := s.applyPhase(ctx, p, others); err != nil {
		return err
	}
	if err := s.prune(ctx, p); err != nil {
		return err
	}
	s.ensureInformers()

	failed := make([]FailedObject, 0, len(p.failed))
	for k, why := range p.failed {
		failed = append(failed, FailedObject{Key: KeyString(k), Reason: why})
	}
	slices.SortFunc(failed, func(a, b FailedObject) int { return strings.Compare(a.Key, b.Key) })
	s.mu.Lock()
	s.logFailedLocked(failed)
	s.st.failed, s.st.inSync, s.st.observed = failed, p.inSync, int64(cursor)
	s.passListRev = lr.Revision
	if p.firstErr == nil {
		s.st.lastError = ""
	} else {
		s.st.lastError = p.firstErr.Error()
	}
	s.statusDirty = true
	s.mu.Unlock()
	if p.contacted {
		s.setReachable(nil)
	}
	s.wakeFlusher()
	complete = true
	if p.firstErr != nil {
		return fmt.Errorf("%w: %v", errPartial, p.firstErr)
	}
	return nil
}

// logFailedLocked logs, once, each object that failed this pass and had
// not failed the previous one, or for another reason: a cluster that
// refuses it (403 from RBAC, admission) is in the edge's log, not only in
// its reports. Retries that fail alike say nothing more. mu held.
func (s *Syncer) logFailedLocked(failed []FailedObject) {
	for _, f := range failed {
		i, found := slices.BinarySearchFunc(s.st.failed, f.Key, func(o FailedObject, k string) int { return strings.Compare(o.Key, k) })
		if !found || s.st.failed[i].Reason != f.Reason {
			s.log.Warn("object not applied", "object", f.Key, "error", f.Reason)
		}
	}
}

// newApplyForm makes the form in which the worker applies desired as gvr
// in namespace ns: a copy with the managed label, encoded, and its hash.
func newApplyForm(desired *unstructured.Unstructured, gvr schema.GroupVersionResource, ns string) (*applyForm, error) {
	obj := desired.DeepCopy()
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedLabel] = "true"
	obj.SetLabels(labels)
	obj.SetNamespace(ns)
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte(gvr.String()+"\n"), data...))
	return &applyForm{gvr: gvr, ns: ns, obj: obj, data: data, hash: hex.EncodeToString(sum[:16])}, nil
}

// plan is one object a phase applies.
type plan struct {
	rev  int64 // inbox revision
	rec  *record
	obj  *unstructured.Unstructured
	gvr  schema.GroupVersionResource
	data []byte
	hash string
}

// applyPhase applies the objects of one phase that are not already at
// their desired version, and returns their records. Object failures go
// to p; the error is for what ends the pass (an unreachable cluster, the
// store).
func (s *Syncer) applyPhase(ctx context.Context, p *pass, objs []DesiredObject) ([]*record, error) {
	var (
		plans []plan
		fresh []*record
	)
	for _, d := range objs {
		gvr, namespaced, err := s.mapping(p, d.Object)
		if err != nil {
			if isUnreachable(err) {
				return nil, err
			}
			p.fail(d.Key, err)
			continue
		}
		ns := ""
		if namespaced {
			ns = d.Key.Namespace
		}
		f, err := s.memo.form(d, gvr, ns)
		if err != nil {
			p.fail(d.Key, err)
			continue
		}
		obj, data, hash := f.obj, f.data, f.hash

		rec := s.records[d.Key]
		if rec != nil && rec.applied() && rec.Hash == hash && rec.gvr() == gvr {
			p.inSync++
			p.applied[d.Key] = d.Revision
			continue
		}
		if rec == nil {
			if gvr.GroupResource() == nsGVR.GroupResource() {
				foreign, err := s.foreignNamespace(ctx, obj.GetName())
				if err != nil {
					if isUnreachable(err) {
						return nil, err
					}
					p.fail(d.Key, err)
					continue
				}
				p.contacted = true
				if foreign {
					p.applied[d.Key] = d.Revision // there already, as wanted
					continue                      // someone else's: never applied, never deleted
				}
			}
			rec = &record{Key: d.Key, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
				Namespace: ns, Name: obj.GetName(), dirty: true}
			fresh = append(fresh, rec)
		}
		plans = append(plans, plan{rev: d.Revision, rec: rec, obj: obj, gvr: gvr, data: data, hash: hash})
	}
	if len(fresh) > 0 {
		// Write-ahead: the records exist before the objects do.
		s.mu.Lock()
		for _, r := range fresh {
			s.records[r.Key], s.byRef[r.ref()] = r, r
		}
		s.mu.Unlock()
		if err := s.saveRecords(ctx, fresh, nil); err != nil {
			return nil, err
		}
	}
	var done []*record
	var abort error
	for _, pl := range plans {
		res, err := s.apply(ctx, pl.gvr, pl.rec.Namespace, pl.rec.Name, pl.data)
		if err != nil {
			if isUnreachable(err) {
				abort = err
				break
			}
			p.fail(pl.rec.Key, err)
			continue
		}
		p.contacted = true
		p.inSync++
		p.applied[pl.rec.Key] = pl.rev
		s.mu.Lock()
		pl.rec.Version = pl.gvr.Version
		pl.rec.Hash, pl.rec.Object, pl.rec.Applied = pl.hash, pl.obj.Object, projectMap(pl.obj.Object, res.Object)
		pl.rec.dirty = true
		s.awaitLocked(pl.rec, res)
		s.dirty[pl.rec.Key] = struct{}{}
		// The informer may have seen the object before its record had a
		// hash, and the reporter then set it aside: evaluate it now.
		s.markEvalLocked(pl.rec.Key)
		s.mu.Unlock()
		done = append(done, pl.rec)
		s.ensureInformer(pl.gvr)
	}
	if err := s.saveRecords(ctx, done, nil); err != nil {
		return nil, err
	}
	if len(done) > 0 {
		s.wakeFlusher()
	}
	return done, abort
}

// mapping finds the resource of obj's kind and whether it is namespaced;
// a kind the mapper does not know makes it rediscover once per pass (a
// CRD applied by someone else meanwhile).
func (s *Syncer) mapping(p *pass, obj *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	gvk := obj.GroupVersionKind()
	gvr, namespaced, err := s.mapper.mapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) && !p.mapperReset {
		p.mapperReset = true
		s.mapper.Reset()
		gvr, namespaced, err = s.mapper.mapping(gvk.GroupKind(), gvk.Version)
	}
	return gvr, namespaced, err
}

// apply server-side applies data.
func (s *Syncer) apply(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, data []byte) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
	if err != nil {
		return nil, err
	}
	s.applies.Add(1)
	return res, nil
}

func (s *Syncer) get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return s.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// foreignNamespace reports whether namespace name exists without the
// managed label: it was there before Canopy, and stays the owner's.
func (s *Syncer) foreignNamespace(ctx context.Context, name string) (bool, error) {
	ns, err := s.get(ctx, nsGVR, "", name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.GetLabels()[ManagedLabel] != "true", nil
}

// waitEstablished waits until each CRD of recs is Established.
func (s *Syncer) waitEstablished(ctx context.Context, p *pass, recs []*record) error {
	deadline := time.Now().Add(s.cfg.EstablishTimeout)
	for _, r := range recs {
		for {
			crd, err := s.get(ctx, r.gvr(), "", r.Name)
			if err != nil && isUnreachable(err) {
				return err
			}
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New("not Established in time")
				}
				p.fail(r.Key, err)
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// phaseOf orders deletions: others (0), then namespaces (1), then CRDs (2).
func phaseOf(r *record) int {
	switch {
	case r.Group == "apiextensions.k8s.io" && r.Resource == "customresourcedefinitions":
		return 2
	case r.Group == "" && r.Resource == "namespaces":
		return 1
	}
	return 0
}

// prune deletes from the cluster what the syncer manages and the inbox
// no longer holds: others first, then namespaces, then CRDs.
func (s *Syncer) prune(ctx context.Context, p *pass) error {
	var gone []*record
	for k, r := range s.records {
		if !p.keep[k] {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	slices.SortFunc(gone, func(a, b *record) int {
		if c := phaseOf(a) - phaseOf(b); c != 0 {
			return c
		}
		return strings.Compare(KeyString(a.Key), KeyString(b.Key))
	})
	var removed []*record
	var abort error
	crds := false
	for _, r := range gone {
		if err := s.deleteManaged(ctx, r); err != nil {
			if isUnreachable(err) {
				abort = err
				break
			}
			p.fail(r.Key, fmt.Errorf("deleting: %w", err))
			continue
		}
		p.contacted = true
		removed = append(removed, r)
		crds = crds || phaseOf(r) == 2
	}
	s.mu.Lock()
	for _, r := range removed {
		delete(s.records, r.Key)
		delete(s.byRef, r.ref())
		delete(s.awaits, r.Key)
		s.dirty[r.Key] = struct{}{}
	}
	s.mu.Unlock()
	if crds {
		s.mapper.Reset()
	}
	if err := s.saveRecords(ctx, nil, removed); err != nil {
		return err
	}
	s.wakeFlusher()
	return abort
}

// deleteManaged deletes the object of r if it still carries the managed
// label (and is the same object: its UID is a precondition).
func (s *Syncer) deleteManaged(ctx context.Context, r *record) error {
	live, err := s.get(ctx, r.gvr(), r.Namespace, r.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live.GetLabels()[ManagedLabel] != "true" {
		s.log.Info("not deleting an object that no longer carries the managed label", "object", KeyString(r.Key))
		return nil
	}
	if live.GetDeletionTimestamp() != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	uid := live.GetUID()
	err = s.dyn.Resource(r.gvr()).Namespace(r.Namespace).Delete(dctx, r.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.deletes.Add(1)
	s.log.Debug("deleted", "object", KeyString(r.Key))
	return nil
}

// check restores one managed object if someone deleted it or changed a
// field the syncer set. The informer's copy answers when it shows no
// drift; otherwise a GET confirms (the copy may predate the syncer's own
// last apply).
func (s *Syncer) check(ctx context.Context, k store.Key) error {
	r := s.records[k]
	if r == nil || !r.applied() || r.Object == nil {
		return nil
	}
	if live, ok := s.cached(r); ok && live.GetDeletionTimestamp() == nil && !drifted(r, live) {
		return nil
	}
	live, err := s.get(ctx, r.gvr(), r.Namespace, r.Name)
	deleted := apierrors.IsNotFound(err)
	switch {
	case deleted:
	case err != nil:
		return err
	case live.GetDeletionTimestamp() != nil:
		return errTerminating // recreate once it is gone
	case !drifted(r, live):
		return nil
	}
	data, err := json.Marshal(r.Object)
	if err != nil {
		return err
	}
	res, err := s.apply(ctx, r.gvr(), r.Namespace, r.Name, data)
	if err != nil {
		return err
	}
	s.drift.Add(1)
	s.mu.Lock()
	r.Applied, r.dirty = projectMap(r.Object, res.Object), true
	s.awaitLocked(r, res)
	s.dirty[k] = struct{}{}
	s.statusDirty = true
	s.mu.Unlock()
	s.wakeFlusher()
	s.setReachable(nil)
	s.log.Info("drift corrected", "object", KeyString(k), "deleted", deleted)
	return s.saveRecords(ctx, []*record{r}, nil)
}

// cached returns the informer's copy of r's object.
func (s *Syncer) cached(r *record) (*unstructured.Unstructured, bool) {
	s.mu.Lock()
	inf := s.informerOfLocked(r)
	s.mu.Unlock()
	if inf == nil || !inf.synced.Load() {
		return nil, false
	}
	return inf.get(r.Namespace, r.Name)
}

// drifted reports whether live differs from what the syncer last applied,
// on the fields it set.
func drifted(r *record, live *unstructured.Unstructured) bool {
	if r.Applied == nil {
		return false
	}
	return !jsonEqual(project(r.Applied, live.Object), r.Applied)
}

// readCursor reads the inbox cursor, where relay/transport/tree's Receiver
// keeps the last parent revision applied (layout.DownsyncCursor), decoded
// once per version. Worker only.
func (s *Syncer) readCursor() (uint64, error) {
	o, err := s.cfg.Store.Get(layout.DownsyncCursor(s.cfg.Inbox))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if s.cursorAt.rev == o.Revision {
		return s.cursorAt.val, nil
	}
	var c layout.Cursor
	if err := json.Unmarshal(o.Data, &c); err != nil {
		return 0, fmt.Errorf("syncer: inbox cursor: %w", err)
	}
	s.cursorAt.rev, s.cursorAt.val = o.Revision, c.Revision
	return c.Revision, nil
}

// observeCursor follows a cursor move that came without inbox changes (a
// Progress frame after the objects): it becomes the observed revision
// once, after the pass that applied those changes, and not for every
// later move, so that an idle tree does not report forever.
func (s *Syncer) observeCursor() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.observePending || s.lastObjectEvent > s.passListRev || s.passListRev == 0 {
		return
	}
	c, err := s.readCursor()
	if err != nil {
		return
	}
	s.observePending = false
	if int64(c) != s.st.observed {
		s.st.observed = int64(c)
		s.statusDirty = true
		s.wakeLocked()
	}
}

// isUnreachable tells an error of transport (no answer from the cluster)
// from an answer.
func isUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) || meta.IsNoMatchError(err) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// setReachable records whether the cluster answered (err nil) or not.
func (s *Syncer) setReachable(err error) {
	s.mu.Lock()
	was, known := s.st.reachable, s.st.reachableSet
	s.st.reachable, s.st.reachableSet = err == nil, true
	if err != nil {
		s.st.lastError = err.Error()
	}
	changed := !known || was != (err == nil) || err != nil
	if changed {
		s.statusDirty = true
		s.wakeLocked()
	}
	s.mu.Unlock()
	switch {
	case err != nil && (was || !known):
		s.log.Warn("cluster unreachable", "error", err)
	case err == nil && known && !was:
		s.log.Info("cluster reachable again")
	}
}

func (s *Syncer) setLastError(err error) {
	s.mu.Lock()
	s.st.lastError = err.Error()
	s.statusDirty = true
	s.wakeLocked()
	s.mu.Unlock()
}
