package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/google/btree"
)

// Paged lists are consistent at the revision of their first page, as kube's
// are (etcd serves every page from the first page's revision): when a List
// returns a continue token, the store retains the state it listed from under
// that revision, and the next pages are served from it.
//
// Retaining a state is what Snapshot does, without the write lock: bump the
// generation and clone the top-level tree, O(1). From then on Apply writes to
// clones of the tables the retained state shares (Store.writable), so it
// keeps seeing its own version. A retained state shares every node and
// object with the current state until a write replaces them; what it pins is
// what later writes replaced: the object versions they updated or deleted,
// and the B-tree nodes on the paths they copied (a path of O(log n) nodes per
// table written, once per node and retained state).
//
// Retention is bounded: a state is dropped Options.PagingRetention after the
// last first page listed from it, and only the Options.PagingStates newest
// are kept. Every first page at one revision shares one retained state. Since
// a retained state costs memory only through later writes, and Apply drops
// expired states, the extra memory is what writes replaced within the last
// PagingRetention; in the worst case (every object rewritten between each of
// PagingStates first pages at distinct revisions) it is PagingStates whole
// copies of the state.

// pagedState is a state retained for paged lists.
type pagedState struct {
	rev    int64
	tables *btree.BTreeG[tableRef] // never modified
	// listed is when the last first page was listed from it.
	listed time.Time
}

// retained returns the tables of the state retained at rev, or nil when
// none is (anymore).
func (s *Store) retained(rev int64) *btree.BTreeG[tableRef] {
	now := s.now()
	s.pagesMu.Lock()
	defer s.pagesMu.Unlock()
	s.expirePages(now)
	i, ok := slices.BinarySearchFunc(s.pages, rev, func(p pagedState, rev int64) int { return cmp.Compare(p.rev, rev) })
	if !ok {
		return nil
	}
	return s.pages[i].tables
}

// retain retains the current state for the next pages of a list. s.mu must
// be held, for reading at least: Apply cannot change the state, and the
// tables cloned are those the caller listed from.
func (s *Store) retain() {
	now := s.now()
	s.pagesMu.Lock()
	defer s.pagesMu.Unlock()
	s.expirePages(now)
	// s.pages is ordered by revision and by listing time: a state is
	// retained, or its time refreshed, only at the current revision, which
	// is the newest (Restore, which can move it back, drops them all).
	if n := len(s.pages); n > 0 && s.pages[n-1].rev == s.rev {
		s.pages[n-1].listed = now
		return
	}
	// As in Snapshot: the tables the clone shares are never modified again.
	// Readers holding mu.RLock do not read gen and Clone writes only the
	// tree's copy-on-write context, which readers do not read either.
	s.gen++
	s.pages = append(s.pages, pagedState{rev: s.rev, tables: s.tables.Clone(), listed: now})
	if over := len(s.pages) - s.opts.PagingStates; over > 0 {
		s.pages = slices.Delete(s.pages, 0, over)
	}
}

// expirePages drops the states retained for longer than
// Options.PagingRetention since their last first page. s.pagesMu must be held.
func (s *Store) expirePages(now time.Time) {
	i := 0
	for i < len(s.pages) && now.Sub(s.pages[i].listed) >= s.opts.PagingRetention {
		i++
	}
	if i > 0 {
		s.pages = slices.Delete(s.pages, 0, i)
	}
}

// dropExpiredPages is expirePages for Apply: the memory a retained state
// pins grows only with writes, so expiring them on writes bounds it in time.
func (s *Store) dropExpiredPages() {
	s.pagesMu.Lock()
	if len(s.pages) > 0 {
		s.expirePages(s.now())
	}
	s.pagesMu.Unlock()
}

// dropPages drops every retained state: their continue tokens expire.
func (s *Store) dropPages() {
	s.pagesMu.Lock()
	s.pages = nil
	s.pagesMu.Unlock()
}
