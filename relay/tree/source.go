package tree

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/internal/wire"
	"github.com/canopy-dev/canopy/relay/store"
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

	serving atomic.Bool
	c       counters

	mu sync.Mutex
	// dirty maps each key changed but not yet taken by the send loop to
	// the revision of its newest change seen.
	dirty map[store.Key]int64
	// seen is the revision up to which every event of the watch is in
	// dirty or already sent.
	seen int64
	// pending lists, oldest first, revisions seen but not yet acknowledged
	// with when they were seen: the lag in seconds is the age of the
	// first. Bounded: past maxPending entries the newest absorbs the next.
	pending []pendingRev
	wake    chan struct{} // capacity 1: the pump has news
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

func newSource(st *store.Store, space string, up bool, cfg *wire.Config, bookmarks bool, log *slog.Logger) *source {
	return &source{
		st: st, space: space, up: up, cfg: cfg, bookmarks: bookmarks, log: logger(log),
		dirty: make(map[store.Key]int64),
		wake:  make(chan struct{}, 1),
	}
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
		st.LagSeconds = time.Since(s.pending[0].at).Seconds()
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
	s.mu.Unlock()

	// sent maps each key sent on this stream to the revision of the
	// version sent, so a key re-marked dirty by an older event (history
	// replay) is not sent twice. Bounded by the number of keys.
	sent := make(map[store.Key]int64)
	progressed := s.seen // last Progress or ResyncEnd sent (or the cursor)

	var w store.Watcher
	if cursor != 0 && cursor <= uint64(s.st.Revision()) {
		var err error
		w, err = s.watch(ctx, s.seen)
		if err != nil && !errors.Is(err, store.ErrExpired) {
			return err
		}
	}
	for {
		var pump chan error
		if w == nil {
			var err error
			var rev int64
			if w, pump, rev, err = s.resync(ctx, l, sent); err != nil {
				return err
			}
			progressed = rev
		} else {
			pump = s.startPump(w)
		}
		err := s.drain(ctx, l, sent, &progressed, pump)
		w.Stop()
		if pump != nil {
			<-pump // Events is closed after Stop: the pump ends
		}
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

func (s *source) watch(ctx context.Context, since int64) (store.Watcher, error) {
	return s.st.Watch(ctx, store.WatchOptions{Space: s.space, Since: since, Bookmarks: s.bookmarks})
}

// resync sends a full snapshot of the space and returns the watch that
// continues after it, already pumping.
func (s *source) resync(ctx context.Context, l *link, sent map[store.Key]int64) (store.Watcher, chan error, int64, error) {
	var (
		lr  store.ListResult
		w   store.Watcher
		err error
	)
	for attempt := 0; ; attempt++ {
		if lr, err = s.st.List(store.ListOptions{Space: s.space}); err != nil {
			return nil, nil, 0, err
		}
		w, err = s.watch(ctx, lr.Revision)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrExpired) || attempt == 10 {
			return nil, nil, 0, err
		}
	}
	rev := lr.Revision
	s.mu.Lock()
	for k, r := range s.dirty {
		if r <= rev {
			delete(s.dirty, k) // the snapshot carries it
		}
	}
	s.seen = rev
	s.notePending(rev, time.Now())
	s.mu.Unlock()
	pump := s.startPump(w)

	s.log.Debug("resync", logSpace, s.space, logRevision, rev, "objects", len(lr.Items))
	s.c.resyncs.Add(1)
	clear(sent)
	fail := func(err error) (store.Watcher, chan error, int64, error) {
		w.Stop()
		<-pump
		return nil, nil, 0, err
	}
	if err := l.write(&wire.ResyncBegin{Revision: uint64(rev)}); err != nil {
		return fail(err)
	}
	for _, o := range lr.Items {
		if err := l.write(s.put(o)); err != nil {
			return fail(err)
		}
		sent[o.Key] = o.Revision
	}
	if err := l.write(&wire.ResyncEnd{Revision: uint64(rev)}); err != nil {
		return fail(err)
	}
	if err := l.flush(); err != nil {
		return fail(err)
	}
	return w, pump, rev, nil
}

// startPump moves w's events into the dirty set until w ends, then sends
// w.Err() on the returned channel.
func (s *source) startPump(w store.Watcher) chan error {
	done := make(chan error, 1)
	go func() {
		for ev := range w.Events() {
			s.mu.Lock()
			if ev.Object != nil {
				s.dirty[ev.Object.Key] = ev.Revision
				s.notePending(ev.Revision, time.Now())
			}
			s.seen = max(s.seen, ev.Revision)
			s.mu.Unlock()
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
		done <- w.Err()
	}()
	return done
}

// drain sends dirty keys and Progress until the watch ends (returning its
// error), ctx is done or the stream fails.
func (s *source) drain(ctx context.Context, l *link, sent map[store.Key]int64, progressed *int64, pump chan error) error {
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
			o, err := s.st.Get(it.k)
			switch {
			case err == nil:
				if sent[it.k] == o.Revision {
					continue
				}
				if err := l.write(s.put(o)); err != nil {
					return err
				}
				sent[it.k] = o.Revision
			case errors.Is(err, store.ErrNotFound):
				delete(sent, it.k)
				if err := l.write(s.del(it.k, it.rev)); err != nil {
					return err
				}
			default:
				return err
			}
		}

		s.mu.Lock()
		idle, seen := len(s.dirty) == 0, s.seen
		s.mu.Unlock()
		if idle && seen > *progressed {
			// Everything up to seen has been written before this frame.
			if err := l.write(&wire.Progress{Revision: uint64(seen)}); err != nil {
				return err
			}
			*progressed = seen
		}
		if err := l.flush(); err != nil {
			return err
		}
		if !idle {
			continue
		}

		select {
		case <-s.wake:
		case err := <-pump:
			pump <- err // for the caller, who waits for the pump to end
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

// put is the frame carrying object o.
func (s *source) put(o *store.Object) wire.Message {
	if s.up {
		return &wire.Report{Seq: uint64(o.Revision), Key: wireKey(o.Key), Data: o.Data}
	}
	return &wire.Put{Revision: uint64(o.Revision), Key: wireKey(o.Key), Data: o.Data}
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
