package tree

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// source is the sending half shared by Sender (downsync) and Reporter
// (upsync): it watches one space, coalesces changes into a dirty set and
// sends the current state of each dirty key.
//
// Locking: mu guards dirty and seen; it is held only for map operations,
// never across I/O or store calls.
type source struct {
	st        *store.Store
	space     string
	up        bool // Reporter: Report frames and ReportAck; else Put/Delete and Ack
	cfg       *wire.Config
	bookmarks bool
	log       *slog.Logger
	// route is set when the space is shared by several children's
	// mailboxes (Routing); it is owned by the sending loop.
	route *router

	serving atomic.Bool
	c       counters

	mu sync.Mutex
	// dirty maps each key changed but not yet taken by the send loop to
	// the revision of its newest change seen.
	dirty map[store.Key]int64
	// seen is the revision up to which every event of the watch is in
	// dirty or already sent; noted is the newest revision of an event
	// taken into dirty. A revision may change many keys: it is seen only
	// at the store's Bookmark that ends it (WatchOptions.RevisionEnds),
	// so noted > seen while the rest of a revision is on its way.
	seen, noted int64
	// pending lists, oldest first, revisions seen but not yet acknowledged
	// with when they were seen: the lag in seconds is the age of the
	// first. Bounded: past maxPending entries the newest absorbs the next.
	pending []pendingRev
	wake    chan struct{} // capacity 1: a watch has news (note)

	// With routing: maybe lists dirty keys the child may hold although
	// the sender does not know it (history replayed after a resume, keys
	// a route change touched), which are deleted at the child if not
	// wanted; rerouted collects the destinations route changes moved in
	// or out of the subtree, until the loop re-evaluates their objects,
	// each mapped to whether a replayed change moved it (the child may
	// then hold its objects or not, whatever held says); catchup is the
	// revision up to which noted events are replay.
	maybe    map[store.Key]bool
	rerouted map[string]bool
	catchup  int64
}

type pendingRev struct {
	rev int64
	at  time.Time
}

const maxPending = 1024

// notePending records that rev was seen at now; s.mu must be held.
func (s *source) notePending(rev int64, now time.Time) {
	if uint64(max(rev, 0)) <= s.c.acked.Load() {
		return
	}
	if n := len(s.pending); n > 0 && (n >= maxPending || s.pending[n-1].rev >= rev) {
		s.pending[n-1].rev = max(s.pending[n-1].rev, rev)
		return
	}
	s.pending = append(s.pending, pendingRev{rev, now})
}

// ackedUpTo drops pending revisions the peer has acknowledged.
func (s *source) ackedUpTo(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for i < len(s.pending) && uint64(max(s.pending[i].rev, 0)) <= rev {
		i++
	}
	s.pending = s.pending[i:]
}

func newSource(st *store.Store, space string, up bool, cfg *wire.Config, bookmarks bool, log *slog.Logger, routing *Routing) *source {
	s := &source{
		st: st, space: space, up: up, cfg: cfg, bookmarks: bookmarks, log: logger(log),
		dirty:    make(map[store.Key]int64),
		wake:     make(chan struct{}, 1),
		maybe:    make(map[store.Key]bool),
		rerouted: make(map[string]bool),
	}
	if routing != nil {
		s.route = &router{Routing: *routing, held: make(map[store.Key]bool)}
	}
	return s
}

func (s *source) stats() Stats {
	st := s.c.stats()
	s.mu.Lock()
	st.DirtyKeys = len(s.dirty)
	seen := s.seen
	s.mu.Unlock()
	if uint64(max(seen, 0)) > st.AckedRevision {
		st.LagRevisions = uint64(seen) - st.AckedRevision
	}
	s.mu.Lock()
	if len(s.pending) > 0 {
		st.BehindSince = s.pending[0].at
		st.LagSeconds = time.Since(st.BehindSince).Seconds()
	}
	s.mu.Unlock()
	return st
}

func (s *source) serve(ctx context.Context, rw io.ReadWriter, cursor uint64) error {
	if !s.serving.CompareAndSwap(false, true) {
		return ErrBusy
	}
	defer s.serving.Store(false)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := newLink(rw, s.cfg, &s.c)
	stop := context.AfterFunc(ctx, l.close) // unblocks a write to a stalled peer
	defer stop()

	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		cancel(s.readAcks(l))
	}()

	err := s.run(ctx, l, cursor)
	if cause := context.Cause(ctx); cause != nil {
		err = cause // the reader's error, or the caller's cancellation
	}
	l.close()
	if l.closable() {
		<-readDone
	}
	return err
}

// readAcks reads the peer's acknowledgements until the stream fails; it
// always returns a non-nil error.
func (s *source) readAcks(l *link) error {
	for {
		m, err := l.read()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *wire.Ack:
			if s.up {
				return s.protocol(l, m)
			}
			storeMax(&s.c.acked, m.Revision)
			s.ackedUpTo(m.Revision)
		case *wire.ReportAck:
			if !s.up {
				return s.protocol(l, m)
			}
			storeMax(&s.c.acked, m.Seq)
			s.ackedUpTo(m.Seq)
		case *wire.Error:
			return remoteError(m)
		default:
			return s.protocol(l, m)
		}
	}
}

func (s *source) protocol(l *link, m wire.Message) error {
	return fmt.Errorf("%w: unexpected %v from the peer", ErrProtocol, m.Type())
}

// run sends until ctx is done or the stream fails.
func (s *source) run(ctx context.Context, l *link, cursor uint64) error {
	s.mu.Lock()
	clear(s.dirty)
	s.seen = int64(min(cursor, uint64(1<<63-1)))
	s.noted = s.seen
	s.mu.Unlock()

	// sent maps each key sent on this stream to the revision of the
	// version sent, so a key re-marked dirty by an older event (history
	// replay) is not sent twice. Bounded by the number of keys.
	sent := make(map[store.Key]int64)
	progressed := s.seen // last Progress or ResyncEnd sent (or the cursor)

	var w *watched
	if cursor != 0 && cursor <= uint64(s.st.Revision()) {
		// What the child holds is judged on a list taken before the watch
		// starts. The watch replays the history up to its start whole;
		// after it, an Addressed watch delivers only what is addressed to
		// the subtree (s.watch). So no change escapes both: a held object
		// deleted after a list taken later, outside the subtree of then,
		// would (TestRoutedRandomized, under load).
		var lr store.ListResult
		var err error
		if s.route != nil {
			if lr, err = s.st.List(store.ListOptions{Space: s.space}); err != nil {
				return err
			}
		}
		w, err = s.watch(ctx, s.seen)
		if err != nil && !errors.Is(err, store.ErrExpired) {
			return err
		}
		if w != nil && s.route != nil {
			switch err := s.resumeRoute(s.seen, lr); {
			case errors.Is(err, store.ErrExpired):
				w.stop() // the record's history is gone: resync
				w = nil
			case err != nil:
				w.stop()
				return err
			}
		}
	}
	for {
		if w == nil {
			var err error
			var rev int64
			if w, rev, err = s.resync(ctx, l, sent); err != nil {
				return err
			}
			progressed = rev
		} else {
			w.start()
		}
		err := s.drain(ctx, l, sent, &progressed, w)
		w.stop()
		w = nil
		switch {
		case errors.Is(err, store.ErrTooSlow):
			// Every event up to seen is in dirty or sent: resume there.
			s.log.Info("watch fell behind, resuming", logSpace, s.space, logRevision, s.seenRev())
			if w, err = s.watch(ctx, s.seenRev()); err != nil && !errors.Is(err, store.ErrExpired) {
				return err
			}
		case errors.Is(err, store.ErrExpired):
			// The store was restored under the watch: start over.
		default:
			return err
		}
	}
}

func (s *source) seenRev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

func (s *source) watch(ctx context.Context, since int64) (*watched, error) {
	w := &watched{started: make(chan struct{}), stopped: make(chan struct{})}
	opts := store.WatchOptions{Space: s.space, Since: since, Bookmarks: s.bookmarks, RevisionEnds: true,
		Func: func(ev store.Event) {
			select {
			case <-w.started:
				s.note(ev)
			case <-w.stopped:
			}
		}}
	if s.route != nil {
		opts.Also = []store.Key{s.route.Record}
		if s.st.Addressable() {
			// Only the events of objects addressed to the subtree, as the
			// route record gives it at each revision: a parent with
			// thousands of children visits, per write, the Senders of its
			// destinations, not all of them.
			opts.Addressed = &store.Addressing{Set: s.route.Record, Names: routeNames}
		}
	}
	var err error
	if w.Watcher, err = s.st.Watch(ctx, opts); err != nil {
		return nil, err
	}
	return w, nil
}

// watched is a watch of the source's space whose events note takes into
// the dirty set, in the watcher's goroutine that runs only while events
// are pending (WatchOptions.Func), from the moment start is called: what
// the watch delivers before (the history it replays) waits until the
// stream's state is set. No goroutine waits for the events of an idle
// stream.
type watched struct {
	store.Watcher
	started, stopped chan struct{}
	stopOnce         sync.Once
}

// start lets note take the watch's events; once per watch.
func (w *watched) start() { close(w.started) }

// stop ends the watch and returns once its last event has been taken:
// Events is closed after Func returned for the last time.
func (w *watched) stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	w.Stop()
	for range w.Events() {
	}
}

// resumeRoute prepares a routed stream that resumes from the child's
// cursor, with the watch already replaying from it. The child holds, of
// the keys untouched since the cursor, what its subtree of then (the
// route record at the cursor) wanted; the keys touched since are replayed
// as maybe. A link that ended after the cursor may also have sent the
// child what a later subtree wanted (frames past the last Progress are
// applied): those keys are maybe too, judged by their targets now (a
// later change of theirs could hide them from the replayed route changes).
// lr is the space listed before the watch started: a key touched after it
// is in the watch's replay, or addressed to the subtree.
func (s *source) resumeRoute(cursor int64, lr store.ListResult) error {
	r := s.route
	at, later, err := s.st.Versions(r.Record, cursor)
	if err != nil {
		return err
	}
	then, since := &router{Routing: r.Routing}, &router{Routing: r.Routing, subtree: map[string]bool{}}
	for i, o := range append([]*store.Object{at}, later...) {
		rt, err := DecodeRoute(o)
		if err != nil {
			return err
		}
		if i == 0 {
			then.subtree = rt.names()
		} else {
			maps.Copy(since.subtree, rt.names())
		}
	}
	if err := r.load(s.st); err != nil {
		return err
	}
	clear(r.held)
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.maybe)
	clear(s.rerouted)
	s.catchup = lr.Revision
	for _, o := range lr.Items {
		switch {
		case o.Revision > cursor: // replayed
		case then.wants(o):
			r.held[o.Key] = true
		case since.wants(o):
			s.maybe[o.Key] = true
			// One wanted now goes again with the replayed route change
			// that brought it in, or its own later change.
			if _, ok := s.dirty[o.Key]; !ok && !r.wants(o) {
				s.dirty[o.Key] = lr.Revision
			}
		}
	}
	return nil
}

// resync sends a full snapshot of the space and returns the watch that
// continues after it, already started.
func (s *source) resync(ctx context.Context, l *link, sent map[store.Key]int64) (*watched, int64, error) {
	var (
		lr  store.ListResult
		w   *watched
		err error
	)
	for attempt := 0; ; attempt++ {
		if lr, err = s.st.List(store.ListOptions{Space: s.space}); err != nil {
			return nil, 0, err
		}
		w, err = s.watch(ctx, lr.Revision)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrExpired) || attempt == 10 {
			return nil, 0, err
		}
	}
	rev := lr.Revision
	items := lr.Items
	if r := s.route; r != nil {
		// The record read now is at least as new as the list: a newer
		// change is in the watch and re-evaluates what it touched.
		if err := r.load(s.st); err != nil {
			w.stop()
			return nil, 0, err
		}
		clear(r.held)
		items = slices.DeleteFunc(slices.Clone(items), func(o *store.Object) bool { return !r.wants(o) })
	}
	s.mu.Lock()
	for k, r := range s.dirty {
		if r <= rev {
			delete(s.dirty, k) // the snapshot carries it
		}
	}
	clear(s.maybe)
	clear(s.rerouted)
	s.catchup = 0
	s.seen, s.noted = rev, rev
	s.notePending(rev, time.Now())
	s.mu.Unlock()
	w.start()

	s.log.Debug("resync", logSpace, s.space, logRevision, rev, "objects", len(items))
	s.c.resyncs.Add(1)
	clear(sent)
	fail := func(err error) (*watched, int64, error) {
		w.stop()
		return nil, 0, err
	}
	if err := l.write(&wire.ResyncBegin{Revision: uint64(rev)}); err != nil {
		return fail(err)
	}
	for _, o := range items {
		if err := l.write(s.put(o)); err != nil {
			return fail(err)
		}
		sent[o.Key] = o.Revision
		if s.route != nil {
			s.route.held[o.Key] = true
		}
	}
	if err := l.write(&wire.ResyncEnd{Revision: uint64(rev)}); err != nil {
		return fail(err)
	}
	if err := l.flush(); err != nil {
		return fail(err)
	}
	return w, rev, nil
}

// note takes one event of the watch into the dirty set and wakes the
// send loop.
func (s *source) note(ev store.Event) {
	var moved map[string]bool
	if s.route != nil && ev.Object != nil && ev.Object.Key == s.route.Record {
		var err error
		if moved, err = rerouted(ev); err != nil {
			s.log.Error("ignoring a route record", "error", err)
		}
	}
	s.mu.Lock()
	if ev.Object != nil {
		s.dirty[ev.Object.Key] = ev.Revision
		s.notePending(ev.Revision, time.Now())
		if s.route != nil && ev.Revision <= s.catchup {
			s.maybe[ev.Object.Key] = true
		}
		for d := range moved {
			s.rerouted[d] = s.rerouted[d] || ev.Revision <= s.catchup
		}
		// More events of this revision may follow: only the earlier ones
		// are whole.
		s.seen = max(s.seen, ev.Revision-1)
		s.noted = max(s.noted, ev.Revision)
	} else {
		s.seen = max(s.seen, ev.Revision)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drain sends dirty keys and Progress until the watch ends (returning its
// error), ctx is done or the stream fails.
//
// deleted lists keys whose deletion was sent (and no Put since) since the
// stream was last idle after its catch-up, so that a key marked dirty
// twice while history is replayed is not deleted twice; it is cleared when
// idle, so it does not grow with churn.
func (s *source) drain(ctx context.Context, l *link, sent map[store.Key]int64, progressed *int64, w *watched) error {
	deleted := make(map[store.Key]bool)
	type item struct {
		k   store.Key
		rev int64
	}
	var batch []item
	for {
		s.mu.Lock()
		batch = batch[:0]
		for k, r := range s.dirty {
			batch = append(batch, item{k, r})
		}
		clear(s.dirty)
		s.mu.Unlock()

		slices.SortFunc(batch, func(a, b item) int { return cmp.Compare(a.rev, b.rev) })
		for _, it := range batch {
			if s.route != nil && it.k == s.route.Record {
				touched, err := s.reroute(it.rev)
				if err != nil {
					return err
				}
				// What the child holds of them was trimmed to its old
				// subtree (Routing.Trim): the same versions go again.
				for _, k := range touched {
					delete(sent, k)
				}
				continue
			}
			o, err := s.st.Get(it.k)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if err == nil && s.route != nil && !s.route.wants(o) {
				o = nil // not for this child: as if deleted
			}
			if o != nil {
				if sent[it.k] == o.Revision {
					continue
				}
				if err := l.write(s.put(o)); err != nil {
					return err
				}
				sent[it.k] = o.Revision
				delete(deleted, it.k) // the child holds it again
				if s.route != nil {
					s.route.held[it.k] = true
					s.mu.Lock()
					delete(s.maybe, it.k)
					s.mu.Unlock()
				}
				continue
			}
			if s.route != nil {
				s.mu.Lock()
				maybe := s.maybe[it.k]
				delete(s.maybe, it.k)
				s.mu.Unlock()
				if !maybe && !s.route.held[it.k] {
					continue // the child never had it
				}
				delete(s.route.held, it.k)
			}
			if _, ok := sent[it.k]; !ok && deleted[it.k] {
				continue
			}
			delete(sent, it.k)
			deleted[it.k] = true
			if err := l.write(s.del(it.k, it.rev)); err != nil {
				return err
			}
		}

		s.mu.Lock()
		idle, seen, whole := len(s.dirty) == 0, s.seen, s.noted <= s.seen
		s.mu.Unlock()
		if idle && whole && seen > *progressed {
			// Everything up to seen has been written before this frame.
			// (A revision half noted waits for its Bookmark, which
			// wakes this loop, rather than a Progress short of it.)
			if err := l.write(&wire.Progress{Revision: uint64(seen)}); err != nil {
				return err
			}
			*progressed = seen
		}
		// A revision half noted is not flushed: the rest of it, its
		// Bookmark at least, is already queued on the watch, and its
		// Progress then goes in the same write as its objects, which the
		// peer applies in one Txn with its cursor rather than two.
		if !idle || whole {
			if err := l.flush(); err != nil {
				return err
			}
		}
		if !idle {
			continue
		}
		s.mu.Lock()
		replaying := seen < s.catchup
		s.mu.Unlock()
		if !replaying {
			clear(deleted)
		}

		select {
		case <-s.wake:
		case <-w.Events(): // closed: the watch ended
			err := w.Err()
			if err == nil {
				if err = ctx.Err(); err == nil {
					err = errors.New("tree: watch ended")
				}
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reroute applies the changes of the child's route record up to rev: it
// reloads the subtree and marks dirty every object targeting a
// destination the changes moved in or out, as maybe if a replayed change
// moved one of them (what the child holds is then unknown: a live change
// coalesced with replayed ones must not hide them).
func (s *source) reroute(rev int64) ([]store.Key, error) {
	r := s.route
	// The moves are taken before the record is read: a move noted
	// meanwhile is judged at the next reroute, never against a record
	// older than itself (which the next reroute, finding no move left,
	// would not correct).
	s.mu.Lock()
	moved := maps.Clone(s.rerouted)
	clear(s.rerouted)
	s.mu.Unlock()
	if err := r.load(s.st); err != nil {
		return nil, err
	}
	if len(moved) == 0 {
		return nil, nil
	}
	lr, err := s.st.List(store.ListOptions{Space: s.space})
	if err != nil {
		return nil, err
	}
	var touched []store.Key
	// What the child holds is judged again too: an Addressed watch shows
	// changes by the subtree as the record stands, so a held object
	// retargeted out of the old subtree, or deleted, after the record
	// changed (and before this) is in no event, nor, now, in moved.
	listed := make(map[store.Key]bool, len(r.held))
	mark := func(k store.Key) {
		if _, ok := s.dirty[k]; !ok {
			s.dirty[k] = rev
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range lr.Items {
		if r.held[o.Key] {
			listed[o.Key] = true
			if !r.wants(o) {
				mark(o.Key)
			}
		}
		if targets, replayed := r.targetsAny(o, moved); targets {
			touched = append(touched, o.Key)
			if _, ok := s.dirty[o.Key]; !ok {
				s.dirty[o.Key] = rev
			}
			if replayed || rev <= s.catchup {
				s.maybe[o.Key] = true
			}
		}
	}
	for k := range r.held {
		if !listed[k] {
			mark(k)
		}
	}
	return touched, nil
}

// put is the frame carrying object o.
func (s *source) put(o *store.Object) wire.Message {
	if s.up {
		return &wire.Report{Seq: uint64(o.Revision), Key: wireKey(o.Key), Data: o.Data}
	}
	data := o.Data
	if r := s.route; r != nil {
		data = r.trimmed(o, r.subtree)
	}
	return &wire.Put{Revision: uint64(o.Revision), Key: wireKey(o.Key), Data: data}
}

// del is the frame deleting k, deleted at revision rev.
func (s *source) del(k store.Key, rev int64) wire.Message {
	if s.up {
		return &wire.Report{Seq: uint64(rev), Key: wireKey(k), Deleted: true}
	}
	return &wire.Delete{Revision: uint64(rev), Key: wireKey(k)}
}

// needsResync reports whether serve with this cursor would start with a
// full resync.
func (s *source) needsResync(cursor uint64) bool {
	if cursor == 0 || cursor > uint64(s.st.Revision()) {
		return true
	}
	return int64(cursor) < s.st.Stats().OldestRevision
}
