package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/fields"
)

// Options configures a Store. The zero value of every field selects its
// default.
type Options struct {
	// HistorySize is the number of events kept for watch resumption;
	// default 100 000.
	HistorySize int
	// HistoryBytes, when positive, also bounds the events kept for watch
	// resumption by the data of their objects (Object.Data; the newest
	// event is kept whatever its size). Every kept event pins its object
	// version: where versions are large or many stores share a process,
	// this bounds what history holds, and a watch resuming from further
	// back gets ErrExpired and resyncs from a list. Zero: no such bound.
	HistoryBytes int
	// BookmarkInterval is how often an idle watcher that asked for
	// bookmarks gets one (the first one to two intervals after its last
	// event: one ticker serves all watchers); default 5s.
	BookmarkInterval time.Duration
	// WatcherQueue bounds the events queued for one watcher; a watcher that
	// would exceed it is closed with ErrTooSlow. Default 10 000.
	WatcherQueue int
	// Fields returns extra field-selector fields of an object of resource
	// r, read from v: the object as stored, decoded only as far as Fields
	// asks (most kinds need its annotations at most, and a write then
	// does not decode the whole object again). metadata.name and
	// metadata.namespace are always set and cannot be overridden. Fields
	// runs inside Apply, on every replica, so it must be deterministic and
	// fast, and must not panic. Nil: only the metadata fields.
	Fields func(r Resource, v *FieldSource) fields.Set
	// PagingRetention is how long the state a paged list is consistent at
	// is kept after the last first page listed from it: a continue token
	// older than that fails with ErrExpired. Default 5 minutes (kube's etcd
	// compaction interval).
	PagingRetention time.Duration
	// PagingStates bounds the states kept for paged lists, one per
	// revision at which a first page was listed; beyond it, the oldest is
	// dropped. Default 128.
	//
	// A kept state costs O(1) to take and shares everything with the
	// current state; it pins only what later writes replace: the versions
	// they updated or deleted and the B-tree nodes they copied (a path per
	// table written, once per node and kept state). The worst case, every
	// object rewritten between first pages at PagingStates revisions
	// within PagingRetention, is PagingStates whole copies of the state.
	PagingStates int
	// Addresses, when set, returns the names an object is addressed to
	// (a relay's destinations): it makes WatchOptions.Addressed possible.
	// It is called at most once per stored version, during fan-out, so it
	// must depend on the version alone, and be fast.
	Addresses func(*Object) []string
}

func (o Options) withDefaults() Options {
	if o.HistorySize <= 0 {
		o.HistorySize = 100_000
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = 5 * time.Second
	}
	if o.WatcherQueue <= 0 {
		o.WatcherQueue = 10_000
	}
	if o.PagingRetention <= 0 {
		o.PagingRetention = 5 * time.Minute
	}
	if o.PagingStates <= 0 {
		o.PagingStates = 128
	}
	return o
}

// Stats describes a store at one revision.
type Stats struct {
	Objects int
	// Bytes is the sum of the objects' len(Data).
	Bytes    int64
	Watchers int
	Revision int64
	// OldestRevision is the oldest revision a watch may resume from: any
	// WatchOptions.Since >= OldestRevision is served from history.
	OldestRevision int64
}

// state is what Apply changes and Restore replaces.
type state struct {
	rev     int64
	tables  *btree.BTreeG[tableRef]
	objects int
	bytes   int64
}

// Store is the object store. It implements Reader and FSM.
//
// Concurrency: Apply, Snapshot and Restore are the FSM side and must be
// called from one goroutine at a time (the Log's); Snapshot's WriteTo may
// run concurrently with later Applies. Every other method is safe for
// concurrent use, with each other and with the FSM side, except SetLog,
// which must be called before the first write. Reads (Get, List, Revision,
// Stats) wait only for an Apply's commit, never for watch delivery.
type Store struct {
	opts Options
	now  func() time.Time // the clock of paging retention; tests fake it

	// mu guards the fields down to fanMu. Lock order: mu, fanMu, then a
	// watcher's mu.
	mu     sync.RWMutex
	log    Log
	closed bool
	state
	// revision is state.rev, readable without mu (Revision).
	revision atomic.Int64
	// commits queues Txns for group commit (group.go).
	commits committer
	// gen is the current snapshot generation, see table. It is written
	// holding mu for writing (Snapshot), or mu for reading and pagesMu
	// (retain); read it holding mu for writing, or mu and pagesMu.
	gen  uint64
	hist history
	// waitMu guards revChanged, which is closed when the revision moves
	// and is nil while nobody waits. Waiters take it under mu.RLock.
	waitMu     sync.Mutex
	revChanged chan struct{}

	// fanMu guards the watcher registry and fanRev, and serializes
	// fan-out, so that events reach each watcher in revision order.
	fanMu    sync.Mutex
	fanRev   int64 // every event up to fanRev has been fanned out
	watchers map[watchKey]map[*watcher]struct{}
	keyed    map[Key]map[*watcher]struct{} // by WatchOptions.Also keys
	// addressed holds the watchers of WatchOptions.Addressed by the names
	// of their sets; fanSeq numbers fan-out visits, so that a watcher found
	// under several names takes an event once.
	addressed map[string]map[*watcher]struct{}
	fanSeq    uint64
	// fanOuts numbers fan-outs; revEnding lists the RevisionEnds watchers
	// the current one queued an event.
	fanOuts   uint64
	revEnding []*watcher
	// addresses is Options.Addresses as Object.Memo takes it (nil
	// without), made once.
	addresses  func(*Object) any
	nwatchers  int
	bookmarked map[*watcher]struct{} // watchers that asked for bookmarks
	ticking    bool                  // the bookmark timer is armed
	bookmarks  *time.Timer           // fires tickBookmarks while ticking

	done chan struct{} // closed by Close

	// pagesMu guards pages, the states retained for paged lists, ordered
	// by revision (see paging.go). It is taken after mu, or alone.
	pagesMu sync.Mutex
	pages   []pagedState
}

var (
	_ Reader = (*Store)(nil)
	_ FSM    = (*Store)(nil)
)

// New returns an empty store at revision 0. Until SetLog replaces it, writes
// go through NewMemLog.
func New(opts Options) *Store {
	opts = opts.withDefaults()
	s := &Store{
		opts:       opts,
		now:        time.Now,
		state:      state{tables: newTables()},
		hist:       history{size: opts.HistorySize, bytes: opts.HistoryBytes},
		watchers:   make(map[watchKey]map[*watcher]struct{}),
		keyed:      make(map[Key]map[*watcher]struct{}),
		addressed:  make(map[string]map[*watcher]struct{}),
		bookmarked: make(map[*watcher]struct{}),
		done:       make(chan struct{}),
	}
	if f := opts.Addresses; f != nil {
		s.addresses = func(o *Object) any { return f(o) }
	}
	s.log = NewMemLog(s)
	return s
}

// SetLog makes Txn propose through l, which must apply committed commands
// with s.Apply. Call it before the first write.
func (s *Store) SetLog(l Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = l
}

// Txn applies ops atomically at one revision: it proposes them to the Log as
// one command and returns what Apply made of it. When an op fails, nothing is
// applied and the error is an *OpError wrapping ErrNotFound, ErrExists,
// ErrConflict or ErrInvalid. Txn without ops is a barrier: it returns the
// revision at which it went through the Log.
func (s *Store) Txn(ctx context.Context, ops ...Op) (Result, error) {
	if err := validateOps(ops); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var o txnOutcome
	if !isBulk(ctx) {
		// Proposed alone and at once: the Log batches concurrent proposals
		// into shared fsyncs, and this write keeps a revision of its own.
		l, err := s.openLog()
		if err != nil {
			return Result{}, err
		}
		o.out, o.err = l.Propose(ctx, encodeCommand(ops))
		return txnResult(o)
	}
	c := &txnCall{ctx: ctx, ops: ops, size: commandSize(ops), done: make(chan txnOutcome, 1)}
	s.submit(c)
	select {
	case o = <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callWithdrawn) {
			return Result{}, ctx.Err() // never proposed
		}
		select {
		case o = <-c.done:
		default:
			return Result{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
	return txnResult(o)
}

// txnResult is what Txn returns for what the Log answered.
func txnResult(o txnOutcome) (Result, error) {
	if o.err != nil {
		return Result{}, o.err
	}
	switch out := o.out.(type) {
	case Result:
		return out, nil
	case error:
		return Result{}, out
	}
	return Result{}, fmt.Errorf("store: unexpected apply result %T", o.out)
}

// openLog returns the Log writes go through, or ErrClosed.
func (s *Store) openLog() (Log, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.log, nil
}

// Create stores a new object at k. data is copied.
func (s *Store) Create(ctx context.Context, k Key, data []byte) (*Object, error) {
	return s.one(ctx, Op{Type: OpCreate, Key: k, Data: data})
}

// Update replaces the object at k; expectRevision, when non-zero, must be
// its current revision. data is copied.
func (s *Store) Update(ctx context.Context, k Key, data []byte, expectRevision int64) (*Object, error) {
	return s.one(ctx, Op{Type: OpUpdate, Key: k, Data: data, ExpectRevision: expectRevision})
}

// Delete removes the object at k and returns its last version;
// expectRevision and expectUID, when set, must match it.
func (s *Store) Delete(ctx context.Context, k Key, expectRevision int64, expectUID string) (*Object, error) {
	return s.one(ctx, Op{Type: OpDelete, Key: k, ExpectRevision: expectRevision, ExpectUID: expectUID})
}

func (s *Store) one(ctx context.Context, op Op) (*Object, error) {
	res, err := s.Txn(ctx, op)
	if err != nil {
		return nil, err
	}
	return res.Objects[0], nil
}

// Revision returns the index of the last applied command.
func (s *Store) Revision() int64 {
	return s.revision.Load()
}

// Addressable reports whether the store has Options.Addresses, which
// WatchOptions.Addressed needs.
func (s *Store) Addressable() bool { return s.opts.Addresses != nil }

// Addresses returns the names o is addressed to (Options.Addresses),
// computed once per version and shared: fan-out reads the same list. Nil
// without Options.Addresses.
func (s *Store) Addresses(o *Object) []string {
	if s.addresses == nil {
		return nil
	}
	names, _ := o.Memo(addressesMemo{}, s.addresses).([]string)
	return names
}

// addressesMemo is the Object.Memo key of Options.Addresses.
type addressesMemo struct{}

// Get returns the current version of k. The object is shared: do not modify
// it.
func (s *Store) Get(k Key) (*Object, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if o := lookup(s.tables, k); o != nil {
		return o, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, k)
}

// Versions returns, from the history, the version of k that was current
// at revision rev (nil if k did not exist then) and every version written
// since, oldest first (a deletion adds none); ErrExpired if the history no
// longer reaches back to rev.
func (s *Store) Versions(k Key, rev int64) (at *Object, later []*Object, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if rev < s.hist.floor {
		return nil, nil, fmt.Errorf("%w: revision %d is older than the history (%d)", ErrExpired, rev, s.hist.floor)
	}
	first := true
	s.hist.since(rev, func(ev Event) {
		if ev.Object == nil || ev.Object.Key != k {
			return
		}
		if first && ev.Type != Added {
			at = ev.Prev
		}
		first = false
		if ev.Type != Deleted {
			later = append(later, ev.Object)
		}
	})
	if first {
		at = lookup(s.tables, k) // unchanged since rev
	}
	return at, later, nil
}

// WaitForRevision blocks until Revision() >= rev, ctx is done (returning
// its error) or the store is closed (ErrClosed).
func (s *Store) WaitForRevision(ctx context.Context, rev int64) error {
	for {
		s.mu.RLock()
		if s.closed {
			s.mu.RUnlock()
			return ErrClosed
		}
		if s.rev >= rev {
			s.mu.RUnlock()
			return nil
		}
		s.waitMu.Lock()
		if s.revChanged == nil {
			s.revChanged = make(chan struct{})
		}
		ch := s.revChanged
		s.waitMu.Unlock()
		s.mu.RUnlock()

		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wakeWaiters wakes WaitForRevision callers; s.mu must be held for writing.
func (s *Store) wakeWaiters() {
	s.waitMu.Lock()
	if s.revChanged != nil {
		close(s.revChanged)
		s.revChanged = nil
	}
	s.waitMu.Unlock()
}

// Stats returns counters of the current state.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.fanMu.Lock()
	n := s.nwatchers
	s.fanMu.Unlock()
	return Stats{
		Objects:        s.objects,
		Bytes:          s.bytes,
		Watchers:       n,
		Revision:       s.rev,
		OldestRevision: s.hist.floor,
	}
}

// Close ends every watcher with ErrClosed, drops the states retained for
// paged lists and makes further calls fail with ErrClosed. It is idempotent.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.done)
	s.wakeWaiters()
	s.fanMu.Lock()
	s.endWatchers(ErrClosed)
	s.fanMu.Unlock()
	s.dropPages()
}
