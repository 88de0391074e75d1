package syncer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// DestinationStatus is the destination's own report, in the outbox under
// DestinationStatusResource with the destination's name.
type DestinationStatus struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   DestinationMeta  `json:"metadata"`
	Status     DestinationState `json:"status"`
}

// DestinationMeta is DestinationStatus's metadata.
type DestinationMeta struct {
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// DestinationState is what the syncer knows of its cluster.
type DestinationState struct {
	// Reachable is whether the cluster's API answered last time.
	Reachable bool `json:"reachable"`
	// LastError is the last error met, cleared by a pass without any.
	LastError string `json:"lastError,omitempty"`
	// Applied counts the inbox objects the cluster holds at their desired
	// version.
	Applied int `json:"applied"`
	// Failed lists the inbox objects not applied, first
	// MaxReportedFailures by key; FailedCount counts them all.
	Failed      []FailedObject `json:"failed,omitempty"`
	FailedCount int            `json:"failedCount,omitempty"`
	// DriftCorrections counts the applies that restored a managed object
	// since the syncer started.
	DriftCorrections int64 `json:"driftCorrections"`
	// ObservedInboxRevision is the parent revision (inbox cursor) the
	// last pass brought the cluster in line with (0 before any parent
	// sent anything).
	ObservedInboxRevision int64 `json:"observedInboxRevision"`
}

// FailedObject is one inbox object not applied, and why.
type FailedObject struct {
	Key    string `json:"key"` // KeyString of the inbox key
	Reason string `json:"reason"`
}

// KindDestinationStatus is DestinationStatus's kind.
const KindDestinationStatus = "DestinationStatus"

func (s *Syncer) wakeFlusher() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wakeLocked is wakeFlusher for callers holding mu (it takes no lock).
func (s *Syncer) wakeLocked() { s.wakeFlusher() }

// flushReports keeps the outbox in line: the live state of each managed
// object (the cluster's object without managedFields) under its inbox
// key, the DestinationStatus, and what the reporter computed (partials,
// placement syncs) and the upsynced objects (reportLocked decides each
// key). Keys are coalesced: however often an object changes while a write
// is in flight, it is written once more with its latest state. Reports
// that no longer apply are deleted, including those left from before a
// restart.
func (s *Syncer) flushReports(ctx context.Context) {
	if lr, err := s.cfg.Store.List(store.ListOptions{Space: s.cfg.Outbox}); err == nil {
		s.mu.Lock()
		for _, o := range lr.Items {
			k := o.Key
			k.Space = ""
			if k.Resource != DestinationStatusResource {
				s.dirty[k] = struct{}{}
			}
		}
		s.statusDirty = true
		s.mu.Unlock()
	}
	for {
		if err := s.flushOnce(ctx); err != nil {
			if ctx.Err() != nil || isStoreClosed(err) {
				return
			}
			s.log.Warn("writing reports", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			s.wakeFlusher()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		// One Txn for what a change moves, once the reporter is done
		// with it (settle.go).
		if !s.settle(ctx, s.wake, func() bool { return s.quietLocked() && !s.reporterPendingLocked() }, 2*s.cfg.StatusWindow) {
			return
		}
	}
}

// report is one outbox write: encoded data, or live state to encode
// (renamed to rename when set; marked v1alpha1.ViewedAnnotation when
// viewed), or a deletion.
type report struct {
	key    store.Key // Space empty
	data   []byte
	live   *unstructured.Unstructured
	rename string
	viewed bool
	del    bool
}

func (s *Syncer) flushOnce(ctx context.Context) error {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = map[store.Key]struct{}{}
	statusDirty := s.statusDirty
	s.statusDirty = false
	var status *DestinationStatus
	if statusDirty {
		status = s.statusLocked()
	}
	if m := s.rep.model; m != nil && len(m.viewed) > 0 {
		// A managed object's live copy that Views gather changes with it.
		var copies []store.Key
		for k := range dirty {
			if m.viewed[k] {
				copies = append(copies, s.viewedCopyKey(k))
			}
		}
		for _, k := range copies {
			dirty[k] = struct{}{}
		}
	}
	reports := make([]report, 0, len(dirty))
	for k := range dirty {
		if r, skip := s.reportLocked(k); !skip {
			reports = append(reports, r)
		}
	}
	s.mu.Unlock()

	var (
		ops  []store.Op
		sums [][sha256.Size]byte // of each op's data
	)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		res, err := s.cfg.Store.Txn(ctx, ops...)
		for i, op := range ops {
			delete(s.written, op.Key)
			if err == nil && op.Type != store.OpDelete && i < len(res.Objects) && res.Objects[i] != nil {
				s.written[op.Key] = writtenReport{rev: res.Objects[i].Revision, sum: sums[i]}
			}
		}
		ops, sums = ops[:0], sums[:0]
		return err
	}
	fail := func(err error) error {
		s.mu.Lock()
		for _, r := range reports {
			s.dirty[r.key] = struct{}{}
		}
		s.statusDirty = s.statusDirty || statusDirty
		s.mu.Unlock()
		return err
	}
	add := func(k store.Key, data []byte, del bool) error {
		k.Space = s.cfg.Outbox
		cur, err := s.cfg.Store.Get(k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var sum [sha256.Size]byte
		if !del {
			sum = sha256.Sum256(data)
		}
		switch {
		case del && cur == nil:
			return nil
		case del:
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k})
		case cur == nil:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: k, Data: data})
		case s.unchanged(cur, data, sum):
			return nil
		default:
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: k, Data: data})
		}
		sums = append(sums, sum)
		if len(ops) >= maxOps {
			return flush()
		}
		return nil
	}
	for _, r := range reports {
		data := r.data
		if !r.del && r.live != nil {
			var err error
			if data, err = liveState(r.live, s.cfg.Name, r.rename, r.viewed); err != nil {
				s.log.Warn("encoding a report", "object", KeyString(r.key), "error", err)
				continue
			}
		}
		if err := add(r.key, data, r.del); err != nil {
			return fail(err)
		}
	}
	if status != nil {
		data, err := json.Marshal(status)
		if err != nil {
			return err
		}
		if err := add(store.Key{Resource: DestinationStatusResource, Name: s.cfg.Name}, data, false); err != nil {
			return fail(err)
		}
	}
	if err := flush(); err != nil {
		return fail(fmt.Errorf("syncer: writing the outbox: %w", err))
	}
	return nil
}

// writtenReport is what the flusher last wrote under an outbox key: the
// revision of that version and the SHA-256 of the data it wrote.
type writtenReport struct {
	rev int64
	sum [sha256.Size]byte
}

// unchanged reports whether cur, the outbox's version of a key, holds
// data (whose SHA-256 is sum): by what the flusher wrote when cur is that
// version, else by comparing them without their resourceVersion.
func (s *Syncer) unchanged(cur *store.Object, data []byte, sum [sha256.Size]byte) bool {
	if w, ok := s.written[cur.Key]; ok && w.rev == cur.Revision {
		return w.sum == sum
	}
	return bytes.Equal(store.WithoutResourceVersion(cur.Data), store.WithoutResourceVersion(data))
}

// statusLocked builds the DestinationStatus; mu held.
func (s *Syncer) statusLocked() *DestinationStatus {
	st := DestinationState{
		Reachable: s.st.reachable, LastError: s.st.lastError, Applied: s.st.inSync,
		FailedCount: len(s.st.failed), DriftCorrections: s.drift.Load(), ObservedInboxRevision: s.st.observed,
	}
	st.Failed = s.st.failed[:min(len(s.st.failed), MaxReportedFailures)]
	return &DestinationStatus{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: KindDestinationStatus,
		Metadata: DestinationMeta{Name: s.cfg.Name}, Status: st,
	}
}

// liveState is a live object as reported: without managedFields, without
// the cluster's resourceVersion (the outbox writes its own), annotated
// with the destination it comes from (v1alpha1.DestinationAnnotation),
// renamed when rename is set (upsynced objects, viewed copies), and
// annotated v1alpha1.ViewedAnnotation when viewed.
func liveState(u *unstructured.Unstructured, dest, rename string, viewed bool) ([]byte, error) {
	top := maps.Clone(u.Object)
	md, _ := top["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	delete(md, "managedFields")
	delete(md, "resourceVersion")
	ann, _ := md["annotations"].(map[string]any)
	ann = maps.Clone(ann)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[v1alpha1.DestinationAnnotation] = dest
	if viewed {
		ann[v1alpha1.ViewedAnnotation] = "true"
	}
	md["annotations"] = ann
	if rename != "" {
		md["name"] = rename
	}
	top["metadata"] = md
	return json.Marshal(top)
}
