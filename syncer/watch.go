package syncer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// followInbox turns inbox changes into work: a pass for object changes (one
// pending pass however many changes), a cursor item for cursor moves. It
// resumes a broken watch from the last revision seen, and asks for a pass
// when it could not (history compacted). It runs no goroutine of its own:
// the store's watcher hands it the events (store.WatchOptions.Func) and
// starts it again when the watch ends (Ended), until ctx is done or the
// store is closed.
func (s *Syncer) followInbox(ctx context.Context) {
	s.queue.Add(item{op: opSync})
	s.watchInbox(ctx, s.cfg.Store.Revision())
}

// watchInbox watches the inbox from since.
func (s *Syncer) watchInbox(ctx context.Context, since int64) {
	st := s.cfg.Store
	cursor := layout.DownsyncCursor(s.cfg.Inbox)
	var last atomic.Int64 // the revision of the last event, once Func returned
	last.Store(since)
	opts := store.WatchOptions{Space: s.cfg.Inbox, Since: since, Also: []store.Key{cursor},
		Func: func(ev store.Event) {
			if ev.Type == store.Bookmark {
				return
			}
			last.Store(ev.Revision)
			if ev.Object.Key == cursor {
				s.queue.Add(item{op: opCursor})
				return
			}
			s.mu.Lock()
			s.lastObjectEvent, s.observePending = ev.Revision, true
			s.mu.Unlock()
			s.queue.Add(item{op: opSync})
		},
		Ended: func(err error) {
			if ctx.Err() != nil || isStoreClosed(err) {
				return
			}
			// A watch that fell behind may have stopped inside one Txn's
			// events: a pass makes up for it.
			since := last.Load()
			if errors.Is(err, store.ErrExpired) {
				since = st.Revision()
			}
			s.queue.Add(item{op: opSync})
			s.watchInbox(ctx, since)
		},
	}
	_, err := st.Watch(ctx, opts)
	switch {
	case err == nil, ctx.Err() != nil, isStoreClosed(err):
	case errors.Is(err, store.ErrExpired):
		s.queue.Add(item{op: opSync})
		s.watchInbox(ctx, st.Revision())
	default:
		s.log.Warn("watching the inbox", "error", err)
		time.AfterFunc(time.Second, func() { s.watchInbox(ctx, since) })
	}
}

// ensureInformer starts watching gvr's managed objects (label
// ManagedLabel=true, all namespaces), unless an informer of that version
// already does. Worker only.
func (s *Syncer) ensureInformer(gvr schema.GroupVersionResource) {
	gr := gvr.GroupResource()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.informers[gr]; cur != nil {
		if cur.gvr == gvr {
			return
		}
		cur.stop()
	}
	s.informers[gr] = s.startInformer(gvr, informerConfig{
		selector: ManagedLabel + "=true",
		on:       func(u *unstructured.Unstructured) { s.observe(gr, u) },
		synced:   func() { s.informerSynced(gr) },
	})
}

// informerOfLocked is the informer of r's resource (nil if none); mu held.
func (s *Syncer) informerOfLocked(r *record) *informer {
	return s.informers[r.gvr().GroupResource()]
}

// ensureInformers makes the informers match the applied records: one per
// resource, at the records' version; none for a resource no longer used.
// Worker only.
func (s *Syncer) ensureInformers() {
	want := map[schema.GroupResource]schema.GroupVersionResource{}
	for _, r := range s.records {
		if r.applied() {
			want[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = r.gvr()
		}
	}
	s.mu.Lock()
	for gr, inf := range s.informers {
		if _, ok := want[gr]; !ok {
			inf.stop()
			delete(s.informers, gr)
		}
	}
	s.mu.Unlock()
	for _, gvr := range want {
		s.ensureInformer(gvr)
	}
}

// informerSynced checks every managed object of gr once its informer has
// listed them: those deleted or changed while nobody watched (the syncer
// was down, or the cluster unreachable) are restored.
func (s *Syncer) informerSynced(gr schema.GroupResource) {
	var keys []store.Key
	s.mu.Lock()
	for k, r := range s.records {
		if r.Group == gr.Group && r.Resource == gr.Resource {
			keys = append(keys, k)
			s.dirty[k] = struct{}{}
			s.markEvalLocked(k)
		}
	}
	s.wakeLocked()
	s.mu.Unlock()
	for _, k := range keys {
		s.queue.Add(item{op: opCheck, key: k})
	}
}

// observe handles an informer event: the object's report is refreshed,
// its partials and placement syncs are evaluated again and, if the syncer
// manages it, it is checked for drift (unless it is the cluster's answer
// to the syncer's own apply).
func (s *Syncer) observe(gr schema.GroupResource, m *unstructured.Unstructured) {
	s.mu.Lock()
	r := s.byRef[ref{Group: gr.Group, Resource: gr.Resource, Namespace: m.GetNamespace(), Name: m.GetName()}]
	own := false
	if r != nil {
		own = s.seenLocked(r.Key, m)
		s.dirty[r.Key] = struct{}{}
		s.wakeLocked()
		s.markEvalLocked(r.Key)
	}
	s.mu.Unlock()
	if r != nil && !own {
		s.queue.Add(item{op: opCheck, key: r.Key})
	}
}

// probe reads the cluster's /version, so that an unreachable cluster is
// reported even when nothing changes, and its return starts a pass. The
// worker runs it now and every ProbeInterval.
func (s *Syncer) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err := s.disco.RESTClient().Get().AbsPath("/version").Do(pctx).Error()
	cancel()
	if ctx.Err() != nil {
		return
	}
	if isUnreachable(err) {
		s.setReachable(err)
		return
	}
	s.mu.Lock()
	was := s.st.reachable
	s.mu.Unlock()
	s.setReachable(nil)
	if !was {
		s.queue.Add(item{op: opSync})
	}
}
