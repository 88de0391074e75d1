package store

import "sort"

// history keeps the last events, oldest first, for watch resumption: at
// most size of them and, when bytes is positive, at most bytes of their
// objects' data (the newest event is kept whatever its size).
type history struct {
	size  int
	bytes int
	// events[head:] are the kept events; the dropped prefix is cleared
	// (it pins no version) and cut off once it is the larger part.
	events []Event
	head   int
	held   int // data bytes of the kept events' objects
	// floor is the revision from which every later event is still kept:
	// the revision of the newest event dropped, or of the state the
	// history started from.
	floor int64
}

// add appends ev, dropping the oldest events beyond the bounds.
func (h *history) add(ev Event) {
	h.events = append(h.events, ev)
	h.held += dataBytes(ev)
	for n := len(h.events) - h.head; n > h.size || (h.bytes > 0 && h.held > h.bytes && n > 1); n-- {
		old := h.events[h.head]
		h.floor = old.Revision
		h.held -= dataBytes(old)
		h.events[h.head] = Event{}
		h.head++
	}
	if h.head > len(h.events)/2 {
		n := copy(h.events, h.events[h.head:])
		clear(h.events[n:])
		h.events, h.head = h.events[:n], 0
	}
}

// dataBytes is what an event counts against history.bytes.
func dataBytes(ev Event) int {
	if ev.Object == nil {
		return 0
	}
	return len(ev.Object.Data)
}

// since calls fn for every kept event with a revision after rev, oldest
// first. It serves every such event only when rev >= h.floor.
func (h *history) since(rev int64, fn func(Event)) {
	kept := h.events[h.head:]
	for i := sort.Search(len(kept), func(i int) bool { return kept[i].Revision > rev }); i < len(kept); i++ {
		fn(kept[i])
	}
}

// reset empties the history of a state at revision floor.
func (h *history) reset(floor int64) {
	h.events, h.head, h.held, h.floor = nil, 0, 0, floor
}
