package session

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// Re-homing without a gap (docs/tree-protocol.md, "Re-homing"): a child
// that comes from another parent holds that parent's share, and a new
// parent resyncs it (another epoch). The resync deletes at the child
// whatever it does not contain, so it must wait until the new parent
// holds the child's mailbox:
//
//   - its route record must name the child's destinations (the child's
//     first announcement on the link is recorded), and
//   - a region must have fetched their objects from above: it announced
//     the destinations upward, its parent recorded that announcement at
//     revision R (wire.AnnounceAck), and its own downsync cursor reached R
//     (Uplink.WaitRouted).
//
// Otherwise the child would delete, and its syncer remove from its
// cluster, objects that come back a moment later.

// onAnnounce records a child's announcement, acknowledges it (protocol
// version 2) and hands the first one's destinations to routed.
func (d *Downlink) onAnnounce(ctx context.Context, c *childState, a *wire.Announce, version uint32, send func(wire.Message) error,
	routed chan<- []string) error {
	rev, err := d.announced(ctx, c, a)
	if err != nil || rev == 0 {
		return err
	}
	if version >= 2 {
		if err := send(&wire.AnnounceAck{Generation: a.Generation, Revision: rev}); err != nil {
			return err
		}
	}
	names := make([]string, len(a.Destinations))
	for i, dest := range a.Destinations {
		names[i] = dest.Name
	}
	select {
	case routed <- names:
	default: // only the first counts
	}
	return nil
}

// awaitMailbox waits until a re-homed child's mailbox is complete here:
// its announcement recorded, and (a region) its objects fetched from
// above.
func (d *Downlink) awaitMailbox(ctx context.Context, id pki.Identity, routed <-chan []string, log *slog.Logger) error {
	var names []string
	select {
	case <-ctx.Done():
		return ctx.Err()
	case names = <-routed:
	}
	if d.cfg.Ready == nil {
		return nil
	}
	start := time.Now()
	if err := d.cfg.Ready(ctx, names); err != nil {
		return fmt.Errorf("session: fetching the mailbox of re-homed %s: %w", id.Name, err)
	}
	log.Info("re-homed child's mailbox fetched from above", "destinations", len(names), "waited", time.Since(start).Round(time.Millisecond))
	return nil
}

// routes is what an uplink knows of its parent's record of its
// announcements. Its methods are safe for concurrent use.
type routes struct {
	mu sync.Mutex
	// version is the link's protocol version (0: no link yet).
	version uint32
	// sent maps the generations announced on this link to their
	// destinations, until acknowledged.
	sent map[uint64][]string
	// acked are the destinations of the last acknowledged announcement,
	// recorded at the parent's revision rev.
	acked []string
	rev   uint64
	// changed is closed (and replaced) on every change.
	changed chan struct{}
}

func (r *routes) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// reset starts a link of protocol version: generations start again, and
// what another link's parent acknowledged means nothing here.
func (r *routes) reset(version uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version, r.sent, r.acked, r.rev = version, map[uint64][]string{}, nil, 0
	r.notifyLocked()
}

// announcing records that gen announces dests.
func (r *routes) announcing(gen uint64, dests []wire.Destination) {
	names := make([]string, len(dests))
	for i, d := range dests {
		names[i] = d.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent != nil {
		r.sent[gen] = names
	}
}

// ack records the parent's acknowledgement of gen.
func (r *routes) ack(m *wire.AnnounceAck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names, ok := r.sent[m.Generation]
	if !ok {
		return
	}
	for g := range r.sent {
		if g <= m.Generation {
			delete(r.sent, g)
		}
	}
	r.acked, r.rev = names, m.Revision
	r.notifyLocked()
}

// fromParent handles the parent's Siblings, AnnounceAck and Registered.
func (u *Uplink) fromParent(ctx context.Context, m wire.Message) error {
	switch m := m.(type) {
	case *wire.Siblings:
		return u.learnSiblings(ctx, m)
	case *wire.AnnounceAck:
		u.routes.ack(m)
	case *wire.Registered:
		u.registrations.answer(m)
	case *wire.Renewed:
		u.renewal.answer(m)
	}
	return nil
}

// WaitRouted returns once this relay holds everything its parent routes
// to the destinations named: an announcement including them was
// acknowledged at a revision its inbox has reached. With a parent of
// protocol version 1 (no acknowledgements) it returns at once. It is
// DownlinkConfig.Ready for a region.
func (u *Uplink) WaitRouted(ctx context.Context, names []string) error {
	for {
		u.routes.mu.Lock()
		version, acked, rev, changed := u.routes.version, u.routes.acked, u.routes.rev, u.routes.changed
		u.routes.mu.Unlock()
		if version == 1 {
			return nil
		}
		var moved <-chan struct{} // nil until the announcement is acknowledged
		if version >= 2 && acked != nil && !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(acked, n) }) {
			moved = u.receiver.CursorChanged() // before reading the cursor: no move is missed
			cursor, err := u.receiver.Cursor()
			if err != nil {
				return err
			}
			if cursor >= rev {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-moved:
		}
	}
}
