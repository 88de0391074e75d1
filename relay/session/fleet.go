package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/canopy-dev/canopy/relay/internal/wire"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/tree"
)

// LinkResource holds, in the system space, whether each child's link is up
// and which replica serves it (one record per space and child, named like
// its route record). With the route records, it lets any replica of a
// root see the whole fleet (Fleet), whichever replica each child dialed.
var LinkResource = store.Resource{Group: "tree.canopy.dev", Resource: "links"}

func linkKey(space, child string) store.Key {
	return store.Key{Resource: LinkResource, Name: space + "." + child}
}

type linkRecord struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Replica   string `json:"replica"`
	Connected bool   `json:"connected"`
}

func readLink(r store.Reader, k store.Key) (linkRecord, *store.Object, error) {
	var rec linkRecord
	o, err := r.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		return rec, nil, nil
	}
	if err != nil {
		return rec, nil, err
	}
	if err := json.Unmarshal(o.Data, &rec); err != nil {
		return rec, nil, fmt.Errorf("session: link record %s: %w", k.Name, err)
	}
	return rec, o, nil
}

// saveLink records that this replica's link to child is up or down. A
// link going down is recorded only if this replica still holds the
// record: the child may already be linked to another one.
func (d *Downlink) saveLink(ctx context.Context, child string, connected bool) error {
	k := linkKey(d.cfg.Space, child)
	for {
		cur, o, err := readLink(d.cfg.Store, k)
		if err != nil {
			return err
		}
		if o == nil && !connected || o != nil && !connected && cur.Replica != d.replica() ||
			o != nil && cur.Replica == d.replica() && cur.Connected == connected {
			return nil
		}
		rec := linkRecord{Replica: d.replica(), Connected: connected}
		rec.Metadata.Name = k.Name
		data, _ := json.Marshal(rec)
		if o == nil {
			_, err = d.cfg.Store.Create(ctx, k, data)
		} else {
			_, err = d.cfg.Store.Update(ctx, k, data, o.Revision)
		}
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrConflict) {
			continue
		}
		return err
	}
}

// replica names this relay among the replicas of its tier.
func (d *Downlink) replica() string {
	if d.cfg.Replica != "" {
		return d.cfg.Replica
	}
	return d.cfg.Name
}

// clearLinks marks down the links this replica recorded as up before it
// (re)started.
func (d *Downlink) clearLinks(ctx context.Context) error {
	lr, err := d.cfg.Store.List(store.ListOptions{Resource: LinkResource})
	if err != nil {
		return err
	}
	prefix := d.cfg.Space + "."
	for _, o := range lr.Items {
		child, ok := strings.CutPrefix(o.Key.Name, prefix)
		if !ok {
			continue
		}
		if err := d.saveLink(ctx, child, false); err != nil {
			return err
		}
	}
	return nil
}

// Fleet returns the destinations below every child of space, as the
// replicated route and link records show them: what Subtree gives, but
// for the children of every replica. A destination that re-homed is
// given by its newest claim (tree.Superseded).
func Fleet(r store.Reader, space string) ([]wire.Destination, error) {
	routes, err := tree.Routes(r, space)
	if err != nil {
		return nil, err
	}
	sup := routes.Superseded(nil)
	var claims []claim
	for _, child := range slices.Sorted(maps.Keys(routes)) { // ties go to the first child by name
		dests := routes[child]
		link, _, err := readLink(r, linkKey(space, child))
		if err != nil {
			return nil, err
		}
		for _, rd := range dests {
			if _, gone := sup[child][rd.Name]; gone {
				continue
			}
			claims = append(claims, claim{linked: link.Connected, dest: wire.Destination{Name: rd.Name, Labels: rd.Labels,
				Path: rd.Path, Connected: rd.Connected, LastSeen: rd.LastSeen, Since: rd.Since}})
		}
	}
	return mergeClaims(claims), nil
}
