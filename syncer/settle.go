package syncer

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/store"
)

// One change of the inbox moves several reports: the DestinationStatus
// at the end of the pass, the live state when the informer sees the
// cluster's new version, the partials and placement syncs when the
// reporter has evaluated that version. Written as they come, they would
// be as many outbox Txns, each a report frame, a Txn and an
// acknowledgement at the parent. So the reporter waits, at most
// Config.StatusWindow, until the syncer is quiet: the worker has nothing
// queued or in progress, and every object it applied has come back
// through its informer at the version the cluster answered. The flusher
// waits for that and for the reporter's next round, at most two windows
// (the reporter may be waiting out its Pacer's gap, then settling). A
// change then costs one evaluation and one outbox Txn; what waits is
// bounded however busy the syncer stays.

// awaited is an apply whose answer the informer has not shown yet: the
// cluster's resourceVersion, and when it answered.
type awaited struct {
	rv string
	at time.Time
}

// awaitLocked notes that the cluster answered an apply of rec with res:
// its reports wait until the informer shows that version, unless it
// already does. mu held.
func (s *Syncer) awaitLocked(rec *record, res *unstructured.Unstructured) {
	rv := res.GetResourceVersion()
	if rv == "" {
		return
	}
	if inf := s.informerOfLocked(rec); inf != nil {
		if live, ok := inf.get(rec.Namespace, rec.Name); ok && atLeast(live.GetResourceVersion(), rv) {
			return
		}
	}
	s.awaits[rec.Key] = awaited{rv: rv, at: time.Now()}
}

// seenLocked notes that the informer shows managed object k at version
// m; own is true when m is the cluster's answer to the syncer's last
// apply of it, which cannot have drifted. mu held.
func (s *Syncer) seenLocked(k store.Key, m *unstructured.Unstructured) (own bool) {
	a, ok := s.awaits[k]
	if !ok || !atLeast(m.GetResourceVersion(), a.rv) {
		return false
	}
	delete(s.awaits, k)
	s.settledLocked()
	return m.GetResourceVersion() == a.rv
}

// atLeast tells whether resourceVersion rv is want or, both being
// numbers (as an etcd-backed server's are), a later one.
func atLeast(rv, want string) bool {
	if rv == want {
		return true
	}
	a, err1 := strconv.ParseUint(rv, 10, 64)
	b, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && a >= b
}

// quietLocked reports whether the syncer is quiet (above); awaited
// applies older than the window no longer count. mu held.
func (s *Syncer) quietLocked() bool {
	if s.queue.busy() {
		return false
	}
	now := time.Now()
	for k, a := range s.awaits {
		if now.Sub(a.at) < s.cfg.StatusWindow {
			return false
		}
		delete(s.awaits, k)
	}
	return true
}

// reporterPendingLocked reports whether the reporter has a round to run,
// or runs one; mu held.
func (s *Syncer) reporterPendingLocked() bool {
	r := &s.rep
	return r.evaluating || (r.passDone && r.model != nil && (r.changed || len(r.evalDirty) > 0))
}

// settledLocked wakes whoever waits for the syncer to be quiet; mu held.
func (s *Syncer) settledLocked() {
	if s.reporterPendingLocked() {
		s.wakeReporterLocked()
	}
	if len(s.dirty) > 0 || s.statusDirty {
		s.wakeLocked()
	}
}

// workerIdle is called by the worker after each item.
func (s *Syncer) workerIdle() {
	if s.queue.busy() {
		return
	}
	s.mu.Lock()
	s.settledLocked()
	s.mu.Unlock()
}

// settle waits until ready (called with mu held) holds, wake being the
// channel its goroutine is woken on, or for at most limit; false when ctx
// is done.
func (s *Syncer) settle(ctx context.Context, wake <-chan struct{}, ready func() bool, limit time.Duration) bool {
	var deadline <-chan time.Time
	for {
		s.mu.Lock()
		ok := ready()
		s.mu.Unlock()
		if ok {
			return true
		}
		if deadline == nil {
			t := time.NewTimer(limit)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-wake:
		}
	}
}
