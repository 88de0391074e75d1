package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Watch starts a watcher. Events with a revision after opts.Since (after the
// current revision when Since is 0) that match opts arrive in revision order,
// those still in history first. Since older than history fails with
// ErrExpired. The watcher ends when ctx is done, on Stop, when its consumer
// falls more than Options.WatcherQueue events behind (ErrTooSlow), on
// Restore (ErrExpired) and on Close (ErrClosed).
func (s *Store) Watch(ctx context.Context, opts WatchOptions) (Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if a := opts.Addressed; a != nil {
		switch {
		case s.opts.Addresses == nil:
			return nil, fmt.Errorf("%w: watch: Addressed needs the store's Options.Addresses", ErrInvalid)
		case a.Names == nil:
			return nil, fmt.Errorf("%w: watch: Addressed has no Names", ErrInvalid)
		}
		if !slices.Contains(opts.Also, a.Set) {
			opts.Also = append(slices.Clip(opts.Also), a.Set)
		}
	}
	f := newFilter(opts)
	for _, k := range opts.Also {
		if k.Resource.Resource == "" || k.Name == "" {
			return nil, fmt.Errorf("%w: watch: Also key %s names no object", ErrInvalid, k)
		}
	}
	w := &watcher{
		s:         s,
		filter:    f,
		bookmarks: opts.Bookmarks,
		revEnds:   opts.RevisionEnds,
		max:       s.opts.WatcherQueue,
		fn:        opts.Func,
		endFn:     opts.Ended,
		ch:        make(chan Event),
		done:      make(chan struct{}),
	}

	// Holding mu (read) keeps Apply from committing while the history is
	// replayed and fanMu is awaited, so the watcher misses nothing and
	// gets nothing twice.
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	if opts.Since > 0 {
		if floor := s.hist.floor; opts.Since < floor {
			s.mu.RUnlock()
			return nil, fmt.Errorf("%w: revision %d is older than %d", ErrExpired, opts.Since, floor)
		}
		s.hist.since(opts.Since, func(ev Event) {
			if ev, ok := w.filter.translate(ev); ok {
				w.backlog = append(w.backlog, ev)
			}
		})
	}
	w.floor = max(opts.Since, s.rev)
	if opts.RevisionEnds && opts.Since > 0 {
		w.backlog = append(w.backlog, Event{Type: Bookmark, Revision: w.floor})
	}
	if a := opts.Addressed; a != nil {
		w.addr = a
		if o := lookup(s.tables, a.Set); o != nil {
			w.names = a.Names(o)
		}
	}
	// The backlog goes first: events fanned out meanwhile queue behind it.
	backlogged := len(w.backlog) > 0
	w.pumping = backlogged
	s.fanMu.Lock()
	s.register(w)
	s.fanMu.Unlock()
	s.mu.RUnlock()

	if backlogged {
		go w.pump()
	}
	stop := context.AfterFunc(ctx, func() { w.end(nil) })
	w.mu.Lock()
	if w.ended { // overflowed already
		stop()
	}
	w.stopAfter = stop
	w.mu.Unlock()
	return w, nil
}

// watchKey indexes watchers by what they watch, so that fan-out visits only
// the watchers of an event's (space, resource) and the wildcard ones.
type watchKey struct {
	allSpaces bool
	space     string
	allRes    bool
	res       Resource
}

// filter is a watcher's selection.
type filter struct {
	watchKey
	since int64 // only events after since
	ns    string
	label labels.Selector // nil: everything
	field fields.Selector // nil: everything
	match func(*Object) bool
	also  []Key // single keys selected besides (WatchOptions.Also)
}

// viaAlso reports whether an event of k reaches this watcher through its
// Also keys (the exact-key registry) rather than its own selection: a
// watcher takes each event from one registration only.
func (f *filter) viaAlso(k Key) bool {
	return len(f.also) > 0 && slices.Contains(f.also, k)
}

func newFilter(o WatchOptions) filter {
	f := filter{
		watchKey: watchKey{
			allSpaces: o.Space == "",
			space:     o.Space,
			allRes:    o.Resource.Resource == "",
		},
		since: o.Since,
		ns:    o.Namespace,
		also:  slices.Clone(o.Also),
		match: o.Match,
	}
	if !f.allRes {
		f.res = o.Resource
	}
	if o.Label != nil && !o.Label.Empty() {
		f.label = o.Label
	}
	if o.Field != nil && !o.Field.Empty() {
		f.field = o.Field
	}
	return f
}

func (f *filter) matches(o *Object) bool {
	k := o.Key
	if len(f.also) > 0 && slices.Contains(f.also, k) {
		return true
	}
	switch {
	case !f.allSpaces && k.Space != f.space,
		!f.allRes && k.Resource != f.res,
		f.ns != "" && k.Namespace != f.ns,
		f.label != nil && !f.label.Matches(o.Labels),
		f.field != nil && !f.field.Matches(o.Fields),
		f.match != nil && !f.match(o):
		return false
	}
	return true
}

// translate returns the event a watcher with this filter sees for ev, if
// any: a change into the selection is Added, one out of it Deleted.
func (f *filter) translate(ev Event) (Event, bool) {
	if ev.Revision <= f.since {
		return Event{}, false
	}
	if ev.Type != Modified {
		return ev, f.matches(ev.Object)
	}
	now, was := f.matches(ev.Object), f.matches(ev.Prev)
	switch {
	case now && was:
		return ev, true
	case now:
		return Event{Type: Added, Revision: ev.Revision, Object: ev.Object}, true
	case was:
		return Event{Type: Deleted, Revision: ev.Revision, Object: ev.Object, Prev: ev.Prev}, true
	}
	return Event{}, false
}

// watcher implements Watcher. When nothing is pending and its receiver
// waits on ch, fan-out hands an event over itself: that is the common case
// of a fan-out to many idle watchers. Otherwise fan-out queues the event
// without blocking, and a goroutine of the watcher's (pump), running only
// while events are pending, moves the backlog, then the queue, to ch, or
// passes them to fn (WatchOptions.Func), which fan-out never calls. A
// watcher that waits holds no goroutine: thousands of stores in a process
// each have several.
type watcher struct {
	s         *Store
	filter    filter
	bookmarks bool
	revEnds   bool  // WatchOptions.RevisionEnds
	floor     int64 // bookmarks never report less: max(Since, revision at start)

	// Guarded by s.fanMu: whether it is in the registry; for an Addressed
	// watch, its Addressing and the names it is registered under; the
	// fan-out visit (Store.fanSeq) that last found it; the fan-out
	// (Store.fanOuts) that last queued it an event, for RevisionEnds.
	registered bool
	addr       *Addressing
	names      []string
	stamp      uint64
	fanned     uint64
	max        int // queue bound

	fn    func(Event)   // WatchOptions.Func
	endFn func(error)   // WatchOptions.Ended
	ch    chan Event    // closed once the watch ended and no pump sends on it
	done  chan struct{} // closed when the watch ends

	backlog []Event // history replayed at start; owned by pump

	mu sync.Mutex
	// pumping: a pump runs, and delivers everything pending, and what it
	// took, before push may hand events over again.
	pumping bool
	// stopAfter releases the watch's hold on its ctx (context.AfterFunc).
	stopAfter func() bool
	// testPopped, if set (by tests), runs after pump took an event from
	// the queue and before it sends it.
	testPopped func()
	queue      []Event // pending events are queue[head:]
	head       int
	busy       bool // an event was queued since the last bookmark tick
	ended      bool
	err        error
}

func (w *watcher) Events() <-chan Event { return w.ch }

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *watcher) Stop() { w.end(nil) }

// end unregisters the watcher and ends it with err.
func (w *watcher) end(err error) {
	w.s.fanMu.Lock()
	w.s.unregister(w)
	w.s.fanMu.Unlock()
	w.finish(err)
}

// finishLocked ends the watch with err unless it already ended. w.mu must be
// held.
func (w *watcher) finishLocked(err error) {
	if w.ended {
		return
	}
	w.ended, w.err = true, err
	w.queue, w.head = nil, 0
	close(w.done)
	if w.stopAfter != nil {
		w.stopAfter()
	}
	if !w.pumping {
		w.closeLocked() // else the pump does
	}
}

// finish is finishLocked for callers that do not hold w.mu.
func (w *watcher) finish(err error) {
	w.mu.Lock()
	w.finishLocked(err)
	w.mu.Unlock()
}

// push queues ev. It returns false when the watcher has ended, possibly
// because ev overflowed its queue, and must be unregistered.
func (w *watcher) push(ev Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fn == nil && !w.pumping && !w.ended && w.head == len(w.queue) {
		select {
		case w.ch <- ev: // ch is not closed before ended is set, under mu
			w.busy = true
			return true
		default:
		}
	}
	w.busy = true
	return w.enqueueLocked(ev)
}

// bookmark queues a Bookmark at rev when no event was queued since the last
// call and none is pending.
func (w *watcher) bookmark(rev int64) {
	w.mu.Lock()
	if !w.busy && w.head == len(w.queue) {
		w.enqueueLocked(Event{Type: Bookmark, Revision: max(rev, w.floor)})
	}
	w.busy = false
	w.mu.Unlock()
}

// enqueueLocked appends ev to the queue, starting a pump if none runs, or
// ends the watch with ErrTooSlow when the queue is full; false means the
// watch has ended. w.mu must be held.
func (w *watcher) enqueueLocked(ev Event) bool {
	if w.ended {
		return false
	}
	if len(w.queue)-w.head >= w.max {
		w.finishLocked(ErrTooSlow)
		return false
	}
	if w.head > 0 && len(w.queue) == cap(w.queue) {
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	w.queue = append(w.queue, ev)
	if !w.pumping {
		w.pumping = true
		go w.pump()
	}
	return true
}

// pump delivers the pending events to ch or fn, and returns once there
// are none (push hands events over again) or the watch ended (closing ch).
func (w *watcher) pump() {
	for {
		ev, ok := w.next()
		if !ok {
			return
		}
		if w.fn != nil {
			select {
			case <-w.done:
			default:
				w.fn(ev)
				continue
			}
		} else {
			select {
			case w.ch <- ev:
				continue
			case <-w.done:
			}
		}
		w.mu.Lock()
		w.closeLocked()
		w.mu.Unlock()
		return
	}
}

// closeLocked closes ch, the watch having ended and no pump sending on
// it, and starts WatchOptions.Ended. w.mu must be held.
func (w *watcher) closeLocked() {
	close(w.ch)
	if w.endFn != nil {
		// In a goroutine of its own: the watch may end in a fan-out,
		// under the store's locks, and Ended may watch again.
		go w.endFn(w.err)
	}
}

// next returns the next pending event; false means there is none, and the
// pump has stopped (closing ch if the watch ended).
func (w *watcher) next() (Event, bool) {
	if len(w.backlog) > 0 {
		ev := w.backlog[0]
		w.backlog = w.backlog[1:]
		if len(w.backlog) == 0 {
			w.backlog = nil
		}
		return ev, true
	}
	w.mu.Lock()
	switch {
	case w.ended:
		w.closeLocked()
		w.mu.Unlock()
		return Event{}, false
	case w.head == len(w.queue):
		w.pumping = false
		w.mu.Unlock()
		return Event{}, false
	}
	ev := w.queue[w.head]
	w.queue[w.head] = Event{}
	w.head++
	if w.head == len(w.queue) {
		w.queue, w.head = w.queue[:0], 0
	}
	hook := w.testPopped
	w.mu.Unlock()
	if hook != nil {
		hook()
	}
	return ev, true
}

// register adds w to the registry, starting the bookmark ticker if w is the
// first to want bookmarks. s.fanMu must be held. A watcher is registered
// under its selection's key and under each of its Also keys exactly, so
// that thousands of watchers of one object each (a Sender's route record)
// cost a write of one of those objects one look-up, not one visit each.
func (s *Store) register(w *watcher) {
	w.registered = true
	s.file(w, true)
	s.nwatchers++
	if w.bookmarks {
		s.bookmarked[w] = struct{}{}
		if !s.ticking {
			s.ticking = true
			s.bookmarks = time.AfterFunc(s.opts.BookmarkInterval, s.tickBookmarks)
		}
	}
}

// unregister removes w from the registry, if there. s.fanMu must be held.
func (s *Store) unregister(w *watcher) {
	if !w.registered {
		return
	}
	w.registered = false
	s.file(w, false)
	delete(s.bookmarked, w)
	s.nwatchers--
}

// file adds w to (or removes it from) the registries it belongs in: under
// its selection's key, or, for an Addressed watch, under the names of its
// set; and under its Also keys. s.fanMu must be held.
func (s *Store) file(w *watcher, add bool) {
	if w.addr != nil {
		fileNames(s.addressed, w.names, w, add)
	} else {
		fileNames(s.watchers, []watchKey{w.filter.watchKey}, w, add)
	}
	fileNames(s.keyed, w.filter.also, w, add)
}

func fileNames[K comparable](reg map[K]map[*watcher]struct{}, keys []K, w *watcher, add bool) {
	for _, k := range keys {
		if add {
			addWatcher(reg, k, w)
		} else {
			removeWatcher(reg, k, w)
		}
	}
}

func addWatcher[K comparable](reg map[K]map[*watcher]struct{}, k K, w *watcher) {
	b := reg[k]
	if b == nil {
		b = make(map[*watcher]struct{})
		reg[k] = b
	}
	b[w] = struct{}{}
}

func removeWatcher[K comparable](reg map[K]map[*watcher]struct{}, k K, w *watcher) {
	b := reg[k]
	delete(b, w)
	if len(b) == 0 {
		delete(reg, k)
	}
}

// endWatchers ends every watcher with err. s.fanMu must be held.
func (s *Store) endWatchers(err error) {
	end := func(w *watcher) {
		w.registered = false
		w.finish(err)
	}
	for _, b := range s.watchers {
		for w := range b {
			end(w)
		}
	}
	// An Addressed watcher may be under several names, or under none but
	// its set's key: finish is idempotent.
	for _, b := range s.addressed {
		for w := range b {
			end(w)
		}
	}
	for _, b := range s.keyed {
		for w := range b {
			end(w)
		}
	}
	clear(s.watchers)
	clear(s.keyed)
	clear(s.addressed)
	clear(s.bookmarked)
	s.nwatchers = 0
}

// fanOut queues evs on the watchers that select them, closing those that
// overflow, and then a Bookmark at the last event's revision on those of
// them that asked for RevisionEnds. It never blocks on a consumer.
// s.fanMu must be held.
func (s *Store) fanOut(evs []Event) {
	if s.nwatchers == 0 || len(evs) == 0 {
		return
	}
	s.fanOuts++
	defer s.endRevisions(evs[len(evs)-1].Revision)
	for _, ev := range evs {
		k := ev.Object.Key
		for _, wk := range [...]watchKey{
			{space: k.Space, res: k.Resource},
			{space: k.Space, allRes: true},
			{allSpaces: true, res: k.Resource},
			{allSpaces: true, allRes: true},
		} {
			for w := range s.watchers[wk] {
				if w.filter.viaAlso(k) {
					continue
				}
				s.deliver(w, ev)
			}
		}
		for w := range s.keyed[k] {
			if w.addr != nil && k == w.addr.Set {
				s.readdress(w, ev)
			}
			s.deliver(w, ev)
		}
		if len(s.addressed) > 0 { // only with Options.Addresses (Watch)
			s.fanAddressed(ev)
		}
	}
}

// fanAddressed delivers ev to the Addressed watchers registered under a
// name its object or previous version is addressed to, each once.
// s.fanMu must be held.
func (s *Store) fanAddressed(ev Event) {
	s.fanSeq++
	for _, o := range [...]*Object{ev.Object, ev.Prev} {
		if o == nil {
			continue
		}
		for _, n := range s.Addresses(o) {
			for w := range s.addressed[n] {
				if w.stamp == s.fanSeq {
					continue
				}
				w.stamp = s.fanSeq
				if !w.filter.viaAlso(ev.Object.Key) {
					s.deliver(w, ev)
				}
			}
		}
	}
}

// readdress moves an Addressed watcher to the names of its set's new
// version (none when deleted). s.fanMu must be held.
func (s *Store) readdress(w *watcher, ev Event) {
	var names []string
	if ev.Type != Deleted {
		names = w.addr.Names(ev.Object)
	}
	if w.registered {
		fileNames(s.addressed, w.names, w, false)
		fileNames(s.addressed, names, w, true)
	}
	w.names = names
}

// deliver queues ev on w as w's filter sees it, closing w if it
// overflows. s.fanMu must be held.
func (s *Store) deliver(w *watcher, ev Event) {
	ev, ok := w.filter.translate(ev)
	if !ok {
		return
	}
	if !w.push(ev) {
		s.unregister(w)
		return
	}
	if w.revEnds && w.fanned != s.fanOuts {
		w.fanned = s.fanOuts
		s.revEnding = append(s.revEnding, w)
	}
}

// endRevisions queues a Bookmark at rev, the revision of the last event
// fanned out, on every RevisionEnds watcher the fan-out queued an event.
// s.fanMu must be held.
func (s *Store) endRevisions(rev int64) {
	for _, w := range s.revEnding {
		if !w.push(Event{Type: Bookmark, Revision: rev}) {
			s.unregister(w)
		}
	}
	clear(s.revEnding)
	s.revEnding = s.revEnding[:0]
}

// tickBookmarks queues the bookmarks due, every BookmarkInterval: one
// timer serves every watcher of the store, and no goroutine waits for it.
// It stops when no watcher wants bookmarks any more, or on Close.
func (s *Store) tickBookmarks() {
	select {
	case <-s.done:
		return
	default:
	}
	s.fanMu.Lock()
	defer s.fanMu.Unlock()
	if len(s.bookmarked) == 0 {
		s.ticking = false
		return
	}
	for w := range s.bookmarked {
		w.bookmark(s.fanRev)
	}
	s.bookmarks.Reset(s.opts.BookmarkInterval)
}
