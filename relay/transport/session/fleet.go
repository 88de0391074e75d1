package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
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

// LinkKey is the key of child's link record (of space).
func LinkKey(space, child string) store.Key { return linkKey(space, child) }

// LinkReplicaOf returns the replica a link record names: the one the child
// was last linked to.
func LinkReplicaOf(o *store.Object) (string, error) {
	var rec linkRecord
	if err := json.Unmarshal(o.Data, &rec); err != nil {
		return "", fmt.Errorf("session: link record %s: %w", o.Key.Name, err)
	}
	return rec.Replica, nil
}

// saveLink records that this replica's link to child is up or down. A
// link going down is recorded only if this replica still holds the
// record: the child may already be linked to another one.
//
// Records of children that connect or leave together are written in one
// Txn (linkWrites): a flat fleet of thousands of children reconnecting at
// once would otherwise queue one consensus command each, and a root whose
// queue is full refuses the links it cannot record.
func (d *Downlink) saveLink(ctx context.Context, child string, connected bool) error {
	done := d.links.add(child, connected, d.writeLinks)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// maxLinkBatch bounds the link records written in one Txn.
const maxLinkBatch = 256

// linkWrites gathers link records to write; one goroutine at a time
// writes what has gathered, and whatever gathers meanwhile goes into its
// next Txn.
type linkWrites struct {
	mu      sync.Mutex
	pending map[string]*linkWrite // by child
	writing bool
}

// linkWrite is the newest state asked for a child's link, and who waits
// for it to be written.
type linkWrite struct {
	connected bool
	waiters   []chan error
}

// add asks for child's link record to say connected, and returns where
// the outcome will be sent. A newer state for the same child replaces an
// older one not yet written; the waiters of both learn the outcome.
func (w *linkWrites) add(child string, connected bool, write func(map[string]bool) error) <-chan error {
	done := make(chan error, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = map[string]*linkWrite{}
	}
	lw := w.pending[child]
	if lw == nil {
		lw = &linkWrite{}
		w.pending[child] = lw
	}
	lw.connected = connected
	lw.waiters = append(lw.waiters, done)
	if !w.writing {
		w.writing = true
		go w.drain(write)
	}
	return done
}

// drain writes batches until nothing is pending.
func (w *linkWrites) drain(write func(map[string]bool) error) {
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		batch := map[string]bool{}
		var waiters []chan error
		for child, lw := range w.pending {
			if len(batch) == maxLinkBatch {
				break
			}
			batch[child] = lw.connected
			waiters = append(waiters, lw.waiters...)
			delete(w.pending, child)
		}
		w.mu.Unlock()
		err := write(batch)
		for _, c := range waiters {
			c <- err
		}
	}
}

// linkWriteTimeout bounds one Txn of link records.
const linkWriteTimeout = time.Minute

// writeLinks writes the link records of batch (child → connected) in one
// Txn, leaving out those that need no write, and tries again when
// another replica wrote one of them meanwhile.
func (d *Downlink) writeLinks(batch map[string]bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), linkWriteTimeout)
	defer cancel()
	for {
		var ops []store.Op
		for _, child := range slices.Sorted(maps.Keys(batch)) {
			connected := batch[child]
			k := linkKey(d.space(), child)
			cur, o, err := readLink(d.cfg.Store, k)
			if err != nil {
				return err
			}
			if o == nil && !connected || o != nil && !connected && cur.Replica != d.replica() ||
				o != nil && cur.Replica == d.replica() && cur.Connected == connected {
				continue
			}
			rec := linkRecord{Replica: d.replica(), Connected: connected}
			rec.Metadata.Name = k.Name
			data, _ := json.Marshal(rec)
			if o == nil {
				ops = append(ops, store.Op{Type: store.OpCreate, Key: k, Data: data})
			} else {
				ops = append(ops, store.Op{Type: store.OpUpdate, Key: k, Data: data, ExpectRevision: o.Revision})
			}
		}
		if len(ops) == 0 {
			return nil
		}
		_, err := d.cfg.Store.Txn(ctx, ops...)
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
// (re)started, and those children's destinations disconnected.
func (d *Downlink) clearLinks(ctx context.Context) error {
	lr, err := d.cfg.Store.List(store.ListOptions{Resource: LinkResource})
	if err != nil {
		return err
	}
	prefix := d.space() + "."
	for _, o := range lr.Items {
		child, ok := strings.CutPrefix(o.Key.Name, prefix)
		if !ok {
			continue
		}
		rec, _, err := readLink(d.cfg.Store, o.Key)
		if err != nil {
			return err
		}
		if err := d.saveLink(ctx, child, false); err != nil {
			return err
		}
		d.mu.Lock()
		c := d.children[child]
		d.mu.Unlock()
		if c != nil && rec.Replica == d.replica() {
			if err := d.markDisconnected(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Fleet returns the destinations below every child of space, as the
// replicated route and link records show them: what Subtree gives, but
// for the children of every replica. A destination that re-homed is
// given by its newest claim (mailbox.Claims.Superseded).
func Fleet(r store.Reader, space string) ([]wire.Destination, error) {
	routes, err := mailbox.Routes(r, space)
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
