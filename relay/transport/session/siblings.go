package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// Siblings of a parent (docs/ha.md, "Sibling regions"): a region that
// finds its siblings by gossip gives its downlink their link addresses
// (DownlinkConfig.Siblings); the downlink tells each child (wire.Siblings,
// protocol version 2); the child keeps the list in its store and, when its
// parent is unreachable, dials its configured parents and then those
// siblings. The sibling that answers fetches the child's mailbox from
// above (the child announces itself there) and serves it.

// siblingsResource holds, in a child's system space, the siblings its
// parent last told it of (record "parent"): kept across restarts, so a
// child started while its parent is down still finds a sibling.
var siblingsResource = store.Resource{Group: "tree.canopy.dev", Resource: "siblings"}

// siblingsRecord is the stored form of the siblings.
type siblingsRecord struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Addrs []string `json:"addrs"`
}

var siblingsKey = store.Key{Resource: siblingsResource, Name: "parent"}

// homes is what an uplink knows of where it may be served. Its methods
// are safe for concurrent use.
type homes struct {
	mu       sync.Mutex
	siblings []string // as the parent last said (wire.Siblings)
	worked   string   // the address of the last link that came up
}

// Siblings returns the parent's siblings as the parent last told this
// relay (kept in its store across restarts).
func (u *Uplink) Siblings() []string {
	u.homes.mu.Lock()
	defer u.homes.mu.Unlock()
	return slices.Clone(u.homes.siblings)
}

// DialOrder returns the addresses the uplink tries, in order: the one
// that last worked (a relay stays where it re-homed rather than moving
// back when its first parent returns), the configured parents, then the
// siblings its parent told it of. Each address appears once.
func (u *Uplink) DialOrder() []string {
	u.homes.mu.Lock()
	defer u.homes.mu.Unlock()
	out := make([]string, 0, 1+len(u.cfg.Parents)+len(u.homes.siblings))
	add := func(a string) {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	add(u.homes.worked)
	for _, a := range u.cfg.Parents {
		add(a)
	}
	for _, a := range u.homes.siblings {
		add(a)
	}
	return out
}

// dial connects to the first address of DialOrder that answers, and
// remembers it.
func (u *Uplink) dial(ctx context.Context, d *link.Dialer) (link.Conn, error) {
	var errs []error
	for _, a := range u.DialOrder() {
		c, err := d.Dial(ctx, []string{a})
		if err == nil {
			u.homes.mu.Lock()
			u.homes.worked = a
			u.homes.mu.Unlock()
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, link.JoinErrors(errs...)
}

// loadSiblings reads the siblings kept in the store.
func (u *Uplink) loadSiblings() error {
	o, err := u.cfg.Store.Get(siblingsKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var rec siblingsRecord
	if err := json.Unmarshal(o.Data, &rec); err != nil {
		return fmt.Errorf("session: siblings record: %w", err)
	}
	u.homes.mu.Lock()
	u.homes.siblings = rec.Addrs
	u.homes.mu.Unlock()
	return nil
}

// learnSiblings keeps what the parent says about its siblings: in the
// store first, so that a restart knows it, then for the next dial.
func (u *Uplink) learnSiblings(ctx context.Context, m *wire.Siblings) error {
	addrs := slices.Clone(m.Addrs)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	if slices.Equal(addrs, u.Siblings()) {
		return nil
	}
	var rec siblingsRecord
	rec.Metadata.Name = siblingsKey.Name
	rec.Addrs = addrs
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	o, err := u.cfg.Store.Get(siblingsKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = u.cfg.Store.Create(ctx, siblingsKey, data)
	case err == nil:
		_, err = u.cfg.Store.Update(ctx, siblingsKey, data, o.Revision)
	}
	if err != nil {
		return fmt.Errorf("session: keeping the parent's siblings: %w", err)
	}
	u.homes.mu.Lock()
	u.homes.siblings = addrs
	u.homes.mu.Unlock()
	u.log.Info("parent's siblings", "siblings", addrs)
	return nil
}

// lockedSend returns a function that sends on w, safe for concurrent use
// (a wire.Writer is not): several loops of a link write its control
// stream.
func lockedSend(w *wire.Writer) func(wire.Message) error {
	var mu sync.Mutex
	return func(m wire.Message) error {
		mu.Lock()
		defer mu.Unlock()
		return w.Send(m)
	}
}
