package session

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// claimsSettle is how long followClaims collects route record changes
// before it recomputes which claims are superseded.
const claimsSettle = 20 * time.Millisecond

// SetMoved records what this relay's parent said had moved away from it
// (wire.Moved): those destinations are left out of this relay's
// announcements and summaries, and the children still claiming them are
// told in turn.
//
// What the parent said stays known after a later Moved leaves it out:
// the parent leaves a destination out once this relay stopped claiming
// it, and a claim older than the one that won stays stale (a destination
// only wins back a path by linking along it again, with a newer Since).
// Forgetting it would make this relay claim the destination, and count
// its old reports, again, until told again. refreshClaims forgets what no
// child claims any more.
func (d *Downlink) SetMoved(m *wire.Moved) {
	d.mu.Lock()
	above := maps.Clone(d.above)
	if above == nil {
		above = map[string]int64{}
	}
	for _, md := range m.Destinations {
		above[md.Name] = max(above[md.Name], md.Since)
	}
	d.above = above
	d.mu.Unlock()
	select {
	case d.claimsChanged <- struct{}{}:
	default:
	}
}

// Changed returns a channel closed at the next change of the children:
// an announcement, a link up or down, a claim superseded or no longer.
func (d *Downlink) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// followClaims keeps d.superseded current as route records change (here,
// or on another replica of a root) and as SetMoved is called.
func (d *Downlink) followClaims(ctx context.Context) error {
	for ctx.Err() == nil {
		// From the current revision, under the store's lock: it needs no history.
		w, err := d.cfg.Store.Watch(ctx, store.WatchOptions{Resource: layout.RouteResource})
		if err != nil {
			return err
		}
		err = d.watchClaims(ctx, w)
		w.Stop()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d.log.Debug("route records: watch restarted", "reason", err)
		}
		if err := d.refreshClaims(); err != nil {
			return err
		}
	}
	return nil
}

func (d *Downlink) watchClaims(ctx context.Context, w store.Watcher) error {
	prefix := d.space() + "."
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			o := ev.Object
			if o == nil {
				o = ev.Prev
			}
			if o == nil || !strings.HasPrefix(o.Key.Name, prefix) || pending {
				continue
			}
			pending = true
			timer.Reset(claimsSettle)
		case <-d.claimsChanged:
			if !pending {
				pending = true
				timer.Reset(0)
			}
		case <-timer.C:
			pending = false
			if err := d.refreshClaims(); err != nil {
				return err
			}
		}
	}
}

// refreshClaims recomputes the superseded claims; when they changed, it
// signals the subtree change and the links of the children concerned.
func (d *Downlink) refreshClaims() error {
	d.mu.Lock()
	above := d.above
	d.mu.Unlock()
	routes, err := d.cfg.Mailboxes.Routes()
	if err != nil {
		return err
	}
	sup := routes.Superseded(above)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.above) > 0 {
		claimed := map[string]bool{}
		for _, dests := range routes {
			for _, rd := range dests {
				claimed[rd.Name] = true
			}
		}
		kept := maps.Clone(d.above) // SetMoved and readers share the old map
		maps.DeleteFunc(kept, func(name string, _ int64) bool { return !claimed[name] })
		d.above = kept
	}
	if maps.EqualFunc(sup, d.superseded, maps.Equal) {
		return nil
	}
	for name, c := range d.children {
		if !maps.Equal(sup[name], d.superseded[name]) {
			select {
			case c.moved <- struct{}{}:
			default:
			}
		}
	}
	d.superseded = sup
	d.claimsGen++
	d.notifyLocked()
	return nil
}

// ClaimsGeneration identifies the current set of superseded claims, for
// Summarized.
func (d *Downlink) ClaimsGeneration() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.claimsGen
}

// Summarized tells the downlink that a summary leaving out the children
// that were superseded at generation gen (Children) has been written:
// from then on Subtree leaves their superseded claims out too.
func (d *Downlink) Summarized(gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.claimsGen || maps.EqualFunc(d.hidden, d.superseded, maps.Equal) {
		return
	}
	d.hidden = d.superseded
	d.notifyLocked()
}

// tell sends the child, on the control stream (send), its superseded
// claims (wire.Moved) after Welcome when there are any and whenever they
// change, and, with siblings (links of protocol version 2 or later), this
// relay's siblings (wire.Siblings) after Welcome, even none, so that a
// child forgets those of a previous parent, and whenever they change;
// until ctx ends. One loop serves both: a region waits on one goroutine
// per child for them.
func (d *Downlink) tell(ctx context.Context, c *childState, siblings bool, send func(wire.Message) error) error {
	var (
		movedSent map[string]int64
		addrsSent []string
	)
	for first := true; ; first = false {
		d.mu.Lock()
		cur := d.superseded[c.id.Name]
		d.mu.Unlock()
		if !maps.Equal(cur, movedSent) || first && len(cur) > 0 {
			m := &wire.Moved{}
			for _, name := range slices.Sorted(maps.Keys(cur)) {
				m.Destinations = append(m.Destinations, wire.MovedDestination{Name: name, Since: cur[name]})
			}
			if err := send(m); err != nil {
				return err
			}
			movedSent = cur
		}
		var changed <-chan struct{} // nil: never
		if siblings {
			var addrs []string
			if d.cfg.Siblings != nil {
				addrs, changed = d.cfg.Siblings()
				addrs = slices.Clone(addrs)
				slices.Sort(addrs)
			}
			if first || !slices.Equal(addrs, addrsSent) {
				if err := send(&wire.Siblings{Addrs: addrs}); err != nil {
					return err
				}
				addrsSent = addrs
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.moved:
		case <-changed:
		}
	}
}
