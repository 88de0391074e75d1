package mailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// Config configures a tier's Mailboxes.
type Config struct {
	// Store holds Space and the route records. Its Options have Fields
	// and Targets (as Addresses), so that each object's destinations are
	// read once per stored version and a child's Sender watches only what
	// is addressed to its subtree.
	Store *store.Store
	// Space is the space every mailbox of the tier is an index over: the
	// root's downsync space, a region's inbox.
	Space string
}

// Mailboxes is a tier's mailboxes; see the package doc.
type Mailboxes struct {
	cfg Config
	// routeLocks serializes the writes of each child's route record (a
	// *sync.Mutex per child name); different children's go to the log
	// together.
	routeLocks sync.Map
	// mu guards cache, shared by the downlink's claims and the root's
	// placement controller.
	mu    sync.Mutex
	cache routeCache
}

// New returns the Mailboxes of cfg.
func New(cfg Config) *Mailboxes { return &Mailboxes{cfg: cfg} }

// Space is the space the mailboxes are indexes over (Config.Space).
func (m *Mailboxes) Space() string { return m.cfg.Space }

// Routing is how child's mailbox is found in Space: the index its Sender
// sends (tree.SenderOptions.Routing) and, with tree.RoutedContentHash,
// what the child should hold.
func (m *Mailboxes) Routing(child string) tree.Routing {
	return tree.Routing{Record: tree.RouteKey(m.cfg.Space, child), Targets: m.cfg.Store.Addresses, Trim: trim}
}

// Matcher returns a function reporting whether an object of Space is in
// child's mailbox, for its route record as of now.
func (m *Mailboxes) Matcher(child string) (func(*store.Object) bool, error) {
	return m.Routing(child).Matcher(m.cfg.Store)
}

// Route reads child's route record (a zero Route when it has none).
func (m *Mailboxes) Route(child string) (tree.Route, error) {
	rt, _, err := tree.ReadRoute(m.cfg.Store, tree.RouteKey(m.cfg.Space, child))
	return rt, err
}

// SaveRoute writes child's route record if its destinations (names,
// labels, paths, claims) differ from the stored ones, and returns the
// revision of the record that holds them.
func (m *Mailboxes) SaveRoute(ctx context.Context, child string, dests []tree.RouteDestination) (uint64, error) {
	k := tree.RouteKey(m.cfg.Space, child)
	data, err := tree.EncodeRoute(k.Name, dests)
	if err != nil {
		return 0, err
	}
	mu, _ := m.routeLocks.LoadOrStore(child, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	_, cur, err := tree.ReadRoute(m.cfg.Store, k)
	switch {
	case err != nil:
		return 0, err
	case cur == nil:
		cur, err = m.cfg.Store.Create(ctx, k, data)
	case !bytes.Equal(withoutResourceVersion(cur.Data), data):
		cur, err = m.cfg.Store.Update(ctx, k, data, cur.Revision)
	}
	if err != nil {
		return 0, err
	}
	return uint64(cur.Revision), nil
}

// withoutResourceVersion re-encodes a route record as EncodeRoute would.
func withoutResourceVersion(data []byte) []byte {
	var rt tree.Route
	if json.Unmarshal(data, &rt) != nil {
		return data
	}
	out, err := tree.EncodeRoute(rt.Metadata.Name, rt.Destinations)
	if err != nil {
		return data
	}
	return out
}

// MarkDisconnected records, in child's route record, the destinations it
// holds as connected as disconnected, last seen now: the child's link is
// down, and its claims then lose to those of a child the destinations are
// connected to (Claims.Superseded).
func (m *Mailboxes) MarkDisconnected(ctx context.Context, child string) error {
	rt, err := m.Route(child)
	if err != nil || !slices.ContainsFunc(rt.Destinations, func(rd tree.RouteDestination) bool { return rd.Connected }) {
		return err
	}
	now := time.Now().UnixNano()
	dests := slices.Clone(rt.Destinations)
	for i := range dests {
		if dests[i].Connected {
			dests[i].Connected, dests[i].LastSeen = false, now
		}
	}
	_, err = m.SaveRoute(ctx, child, dests)
	return err
}

// Routes reads every child's route record, through the tier's cache: the
// Claims share their slices with it, read them, do not change them.
func (m *Mailboxes) Routes() (Claims, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cache.routes(m.cfg.Store, m.cfg.Space)
}

// Superseded is Claims.Superseded over every child's route record,
// through the tier's cache: without above, and while the records stay the
// same, the answer is the one given before, shared (read it, do not change
// it). It is placement.Claims at the root.
func (m *Mailboxes) Superseded(above map[string]int64) (map[string]map[string]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cache.supersededOf(m.cfg.Store, m.cfg.Space, above)
}
