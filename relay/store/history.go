package store

import "sort"

// history keeps the last size events, oldest first, for watch resumption.
// Events share their objects with the store; nothing is copied.
type history struct {
	size   int
	events []Event // grows to size, then is a ring starting at start
	start  int
	// floor is the revision from which every later event is still kept:
	// the revision of the newest event dropped, or of the state the
	// history started from.
	floor int64
}

// add appends ev, dropping the oldest event when full.
func (h *history) add(ev Event) {
	if len(h.events) < h.size {
		h.events = append(h.events, ev)
		return
	}
	h.floor = h.events[h.start].Revision
	h.events[h.start] = ev
	h.start = (h.start + 1) % h.size
}

// at returns the i-th oldest event.
func (h *history) at(i int) Event { return h.events[(h.start+i)%len(h.events)] }

// since calls fn for every kept event with a revision after rev, oldest
// first. It serves every such event only when rev >= h.floor.
func (h *history) since(rev int64, fn func(Event)) {
	n := len(h.events)
	for i := sort.Search(n, func(i int) bool { return h.at(i).Revision > rev }); i < n; i++ {
		fn(h.at(i))
	}
}

// reset empties the history of a state at revision floor.
func (h *history) reset(floor int64) {
	h.events, h.start, h.floor = nil, 0, floor
}
