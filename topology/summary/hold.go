package summary

import (
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
)

// DefaultGrace is how long a Hold waits at most for the children to report
// again, and how long a region still counts a child whose link is down,
// so that a short outage does not empty its summary.
const DefaultGrace = time.Minute

// Hold holds a tier's reported state back from the moment it begins (a
// region opens; a root opens, or a replica becomes leader: Reset) until
// every child the tier lists has reported again, or grace has passed: the
// children's reports are in memory and were lost, while what the tier
// wrote from them is durable, and writing from a partial set would drop
// what the others reported. A child that stays away longer is not waited
// for. A tier with no child to wait for writes at once.
//
// A child has reported again once its store of reports holds a report
// set a Collector made since that store was new: the Collector's cursor
// (layout.UpsyncCursor of its reports space).
//
// Its methods are safe for concurrent use; a nil Hold holds nothing.
type Hold struct {
	grace time.Duration
	mu    sync.Mutex
	since time.Time
	done  bool // latched until Reset
}

// NewHold returns a Hold that begins now.
func NewHold(grace time.Duration) *Hold {
	return &Hold{grace: grace, since: time.Now()}
}

// Reset begins the hold again, now.
func (h *Hold) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.done = time.Now(), false
}

// Holding reports whether reported state is still held back (Ready has
// not been true since the hold began).
func (h *Hold) Holding() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.done
}

// Ready reports whether reported state may be written from children:
// every one of them has reported again, or grace has passed since the
// hold began. Once true it stays true until Reset.
func (h *Hold) Ready(children []Child) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	since, done := h.since, h.done
	h.mu.Unlock()
	if done {
		return true
	}
	if time.Since(since) < h.grace && !reportedAgain(children) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.Equal(since) { // not Reset meanwhile
		h.done = true
	}
	return true
}

// reportedAgain reports whether every child's store of reports holds its
// Collector's cursor (the tier's own reports have none).
func reportedAgain(children []Child) bool {
	for _, c := range children {
		if c.Own {
			continue
		}
		if c.Reports == nil {
			return false
		}
		if _, err := c.Reports.Get(layout.UpsyncCursor(c.Space)); err != nil {
			return false
		}
	}
	return true
}
