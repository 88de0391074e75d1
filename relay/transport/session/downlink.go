// Package session runs relay links end to end: the downlink that a parent
// serves to the children dialing it, and the uplink with which a child
// keeps a link to its parent. It owns the order of a link's life: join
// (for a child without a certificate), Hello/Welcome on the control
// stream, then the downsync and upsync streams, each served by relay/transport/tree,
// and reconnection.
//
// It also has the root register every relay that joins or links below
// this one, and checks each child's announcement against what the root
// granted it (register.go): who a relay is and which destinations it may
// claim are decided at the root (relay/transport/registry), never by a child.
//
// A child renews its certificate over its link before it expires, and its
// parent signs the renewal once the root confirms the child's key
// (renew.go): a relay's certificate never lapses while it can reach its
// parent, and the link stays up meanwhile.
//
// It must not decide what goes into a mailbox (placement writes the
// objects, relay/transport/mailbox indexes them per child: the downlink
// records each child's announcements there and tells the child what its
// mailboxes say has moved away) nor what a child reports (the syncer): it
// moves whatever the mailbox and outbox spaces hold.
//
// Streams: the child opens control, downsync and upsync; the parent opens
// one proxy stream per request it passes toward a destination below the
// child (proxy.go, relay/transport/proxy), on links of protocol version 5.
package session

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// Listener is where a Downlink accepts its children's links:
// *link.Listener, or a wrapper of one.
type Listener interface {
	Accept(ctx context.Context) (link.Conn, error)
}

// DownlinkConfig configures the parent side.
type DownlinkConfig struct {
	// Name is this relay's name, Path its path from the root. Replica
	// names this relay among the replicas of a root (default: Name).
	Name    string
	Replica string
	Path    []string
	// Store holds the mailboxes, the records of the children's links and,
	// unless ReportStore is set, the collected reports.
	Store *store.Store
	// ReportStore, when set, holds the collected reports (and the
	// Collectors' cursors) instead of Store: the root keeps them in memory,
	// out of its log, and its children report everything again after a
	// restart (DESIGN.md section 2).
	ReportStore *store.Store
	// Mailboxes are this relay's children's mailboxes over its shared
	// space (in Store): a child's mailbox is the index of the objects
	// targeting a destination it announced (mailbox.Mailboxes.Routing).
	// The Downlink records each child's announced destinations there (its
	// route record), and reloads them on start, so that a restarted
	// parent routes as before its children reconnect.
	Mailboxes *mailbox.Mailboxes
	// Listener accepts the children's links (a *link.Listener).
	Listener Listener
	// Authority certifies joining children.
	Authority *join.Authority
	// Registrar records, at the root, the relays that join or link below
	// this relay (register.go): the root's registry, or a region's Uplink,
	// which forwards to its parent. Nil registers nothing, and children's
	// claims are checked for their shape only.
	Registrar join.Registrar
	// Mailbox, when set, is called when a child is first seen (the root
	// makes the child's mailbox visible); Reports returns (creating it if
	// needed) the space where the child's reports are kept.
	Mailbox func(ctx context.Context, child pki.Identity) error
	Reports func(ctx context.Context, child pki.Identity) (string, error)
	// Siblings, when set, returns the link addresses of this relay's
	// siblings (Siblings.Addrs, without this relay's own) and a channel
	// closed when they change; each child is told them (wire.Siblings).
	// Nil: no siblings.
	Siblings func() ([]string, <-chan struct{})
	// Ready, when set, returns once this relay holds, from its own parent,
	// everything routed to the destinations named (Uplink.WaitRouted): a
	// child that re-homed here is resynced only then. Nil: this relay's
	// space is the source (the root).
	Ready func(ctx context.Context, dests []string) error
	// MaxProxyStreams bounds the proxy streams open at once on one
	// child's link (OpenProxy); 0 is DefaultMaxProxyStreams.
	MaxProxyStreams int
	Logger          *slog.Logger
}

// Downlink serves the children of one relay. Its methods are safe for
// concurrent use.
type Downlink struct {
	cfg DownlinkConfig
	log *slog.Logger

	// recordLocks serializes the recording of each child's announcements
	// (record), checks and write together.
	recordLocks sync.Map
	// epoch identifies this parent's store (Welcome.Epoch); set by Start.
	epoch string

	mu       sync.Mutex
	children map[string]*childState
	// changed is closed (and replaced) whenever the subtree changes: a
	// child announced, connected or disconnected, or a claim was
	// superseded.
	changed chan struct{}
	// above is what this relay's parent said had moved away from it
	// (SetMoved); superseded is, per child, its claims that are now
	// reached elsewhere (mailbox.Claims.Superseded over the route records
	// and above), kept current by followClaims.
	above      map[string]int64
	superseded map[string]map[string]int64
	// claimsGen counts changes of superseded; hidden is superseded as of
	// the last summary written without those claims (Summarized): only
	// then does Subtree leave them out, so that this relay's parent sees
	// its summary drop a moved destination before its announcement does.
	claimsGen uint64
	hidden    map[string]map[string]int64
	// claimsChanged wakes followClaims when above changes.
	claimsChanged chan struct{}
	// links gathers link records to write (saveLink).
	links linkWrites
	// registrationsRefused counts the joins and links the root refused
	// and the registrations refused here (register.go).
	registrationsRefused atomic.Uint64
	// renewed and renewalsRefused count the children's certificate
	// renewals (renew.go).
	renewed, renewalsRefused atomic.Uint64
}

// childState is what the parent keeps for one child across reconnects.
type childState struct {
	id        pki.Identity
	sender    *tree.Sender
	collector *tree.Collector
	conn      link.Conn         // the live link, nil when disconnected
	cert      *x509.Certificate // the certificate conn's peer presented
	connected time.Time
	lastSeen  time.Time
	links     uint64
	// announced is the child's last announcement: the destinations below
	// it, those it may claim (checkClaims); raw is that announcement as the
	// child sent it.
	announced    []wire.Destination
	announcedGen uint64
	raw          *wire.Announce
	// version is the protocol version of the child's link; unverified is
	// set while this relay cannot have the child's claims checked (its
	// parent does not register relays); claimsRefused counts the claims
	// refused (checkClaims).
	version       uint32
	unverified    bool
	claimsRefused uint64
	// moved is signalled when the child's superseded claims change, so
	// that its link tells it (wire.Moved).
	moved chan struct{}
	// proxyStreams counts the proxy streams open on the child's links
	// (OpenProxy).
	proxyStreams atomic.Int32
	proxyRefused atomic.Uint64
	// served is closed once every goroutine serving the child's last link
	// has returned: the next link starts its streams after that, since
	// the Sender and Collector serve one stream at a time (tree.ErrBusy).
	served chan struct{}
}

// ChildStatus describes one child for status pages and metrics.
type ChildStatus struct {
	Identity  pki.Identity
	Connected bool
	Transport string
	LastSeen  time.Time
	Links     uint64
	Down, Up  tree.Stats
	// Superseded is set while the child claims a destination that is now
	// reached elsewhere (it re-homed): the child's reports may still count
	// it, so summaries leave the child out until it drops the claim.
	Superseded bool
	// ClaimsRefused counts the destinations it announced and may not
	// claim (register.go).
	ClaimsRefused uint64
	// ProxyStreams are the proxy streams open on its links; ProxyRefused
	// counts those refused at the limit (proxy.go).
	ProxyStreams int
	ProxyRefused uint64
	// Certificate is the certificate the child presented on its live link
	// (nil when disconnected): one renewed over the link (renew.go) is
	// presented from its next link on.
	Certificate *x509.Certificate
}

// RegistrationsRefused counts the joins and links at or below this relay
// that were refused (register.go).
func (d *Downlink) RegistrationsRefused() uint64 { return d.registrationsRefused.Load() }

// NewDownlink returns a Downlink for cfg.
func NewDownlink(cfg DownlinkConfig) *Downlink {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Downlink{cfg: cfg, log: cfg.Logger, children: map[string]*childState{}, changed: make(chan struct{}),
		claimsChanged: make(chan struct{}, 1)}
}

// Start reloads the children's routes, then accepts links until ctx is
// done.
func (d *Downlink) Start(ctx context.Context) error {
	var err error
	if d.epoch, err = loadEpoch(ctx, d.cfg.Store, d.space()); err != nil {
		return err
	}
	if err := d.load(ctx); err != nil {
		return err
	}
	if err := d.clearLinks(ctx); err != nil {
		return err
	}
	if err := d.refreshClaims(); err != nil {
		return err
	}
	go func() {
		if err := d.followClaims(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("following route records stopped", "error", err)
		}
	}()
	for {
		conn, err := d.cfg.Listener.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go d.serve(ctx, conn)
	}
}

// Children reports the children seen so far, by name.
func (d *Downlink) Children() []ChildStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ChildStatus, 0, len(d.children))
	for _, c := range d.children {
		st := ChildStatus{Identity: c.id, Connected: c.conn != nil, LastSeen: c.lastSeen, Links: c.links,
			Down: c.sender.Stats(), Up: c.collector.Stats(), Superseded: len(d.superseded[c.id.Name]) > 0, ClaimsRefused: c.claimsRefused,
			ProxyStreams: int(c.proxyStreams.Load()), ProxyRefused: c.proxyRefused.Load()}
		if c.conn != nil {
			st.Transport, st.Certificate = c.conn.Transport(), c.cert
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ChildStatus) int {
		if a.Identity.Name < b.Identity.Name {
			return -1
		}
		return 1
	})
	return out
}

// Subtree returns the destinations below this relay, as its children
// announced them (Path starts with the child's name), with Connected false
// for children whose link is down; and a channel closed at the next
// change. It is UplinkConfig.Subtree for a region.
func (d *Downlink) Subtree() ([]wire.Destination, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var claims []claim
	for _, c := range d.children {
		for _, dest := range c.announced {
			if _, gone := d.hidden[c.id.Name][dest.Name]; gone {
				continue // reached elsewhere: not through this relay
			}
			claims = append(claims, claim{dest: dest, linked: c.conn != nil})
		}
	}
	return mergeClaims(claims), d.changed
}

// claim is one child's announcement of one destination; linked reports
// whether the child's own link is up.
type claim struct {
	dest   wire.Destination
	linked bool
}

// mergeClaims returns one destination per name, sorted by name, Connected
// only if its child's link is up too. A destination that moved from one
// child to another is claimed by both until the old one forgets it: the
// connected, most recently seen claim is where it is.
func mergeClaims(claims []claim) []wire.Destination {
	byName := map[string]wire.Destination{}
	for _, cl := range claims {
		dest := cl.dest
		dest.Path = slices.Clone(dest.Path)
		if !cl.linked {
			dest.Connected = false
		}
		if prev, ok := byName[dest.Name]; ok && (prev.Connected && !dest.Connected ||
			prev.Connected == dest.Connected && prev.LastSeen >= dest.LastSeen) {
			continue
		}
		byName[dest.Name] = dest
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b wire.Destination) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// load recreates, from their route records, the children known before a
// restart, disconnected, with the destinations they last announced.
func (d *Downlink) load(ctx context.Context) error {
	routes, err := d.cfg.Mailboxes.Routes()
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(routes)) {
		id := pki.Identity{Name: name, Path: append(slices.Clone(d.cfg.Path), name)}
		c, err := d.newChild(ctx, id)
		if err != nil {
			return err
		}
		for _, rd := range routes[name] {
			c.announced = append(c.announced, wire.Destination{Name: rd.Name, Labels: rd.Labels, Path: rd.Path, Since: rd.Since,
				Connected: rd.Connected, LastSeen: rd.LastSeen})
		}
		c.lastSeen = time.Now() // as far as this process knows: since it started
		d.mu.Lock()
		if d.children[name] == nil {
			d.children[name] = c
		}
		d.notifyLocked()
		d.mu.Unlock()
	}
	return nil
}

// space is the shared space the children's mailboxes index.
func (d *Downlink) space() string { return d.cfg.Mailboxes.Space() }

// epochResource holds, in the system space, the epoch of each routed space
// (Welcome.Epoch): random, created with the store, so a cursor of another
// parent, or of this one before its data was lost, is never taken for
// ours.
var epochResource = store.Resource{Group: "tree.canopy.dev", Resource: "epochs"}

func loadEpoch(ctx context.Context, st *store.Store, space string) (string, error) {
	k := store.Key{Resource: epochResource, Name: space}
	// Replicas of a root may create the record at once, and a create may
	// end with its outcome unknown (a leader change): whoever loses reads
	// the winner's back, so every replica ends with one epoch. A create
	// that failed with ErrExists was applied to this replica's store after
	// the winning one, so the read-back finds it.
	for {
		var rec struct {
			Epoch string `json:"epoch"`
		}
		o, err := st.Get(k)
		if err == nil {
			if err := json.Unmarshal(o.Data, &rec); err != nil || rec.Epoch == "" {
				return "", fmt.Errorf("session: epoch record %s: %v", space, err)
			}
			return rec.Epoch, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		epoch := uuid.NewString()
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": space}, "epoch": epoch})
		_, err = st.Create(ctx, k, data)
		switch {
		case err == nil:
			return epoch, nil
		case errors.Is(err, store.ErrExists):
			continue // read the winner's back
		case ctx.Err() == nil && (errors.Is(err, consensus.ErrOutcomeUnknown) || errors.Is(err, consensus.ErrNoLeader)):
			// Created or not: try again; if it was, the create fails
			// with ErrExists and the record is read back.
			select {
			case <-ctx.Done():
				return "", err
			case <-time.After(200 * time.Millisecond):
			}
			continue
		default:
			return "", err
		}
	}
}

// newChild prepares the state of a child first seen.
func (d *Downlink) newChild(ctx context.Context, id pki.Identity) (*childState, error) {
	if d.cfg.Mailbox != nil {
		if err := d.cfg.Mailbox(ctx, id); err != nil {
			return nil, err
		}
	}
	reports, err := d.cfg.Reports(ctx, id)
	if err != nil {
		return nil, err
	}
	routing := d.cfg.Mailboxes.Routing(id.Name)
	return &childState{
		moved:     make(chan struct{}, 1),
		id:        id,
		sender:    tree.NewSender(d.cfg.Store, d.space(), tree.SenderOptions{Logger: d.log, Routing: &routing}),
		collector: tree.NewCollector(cmp.Or(d.cfg.ReportStore, d.cfg.Store), reports, tree.CollectorOptions{}),
	}, nil
}

// notifyLocked signals a subtree change; d.mu must be held.
func (d *Downlink) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// announced records a child's announcement: first its route record (so
// that the mailbox follows it, across restarts too), then what Subtree
// reports. It returns the revision of the route record, 0 when it ignored
// the announcement.
func (d *Downlink) announced(ctx context.Context, c *childState, a *wire.Announce) (uint64, error) {
	d.mu.Lock()
	stale := a.Generation <= c.announcedGen && c.announcedGen != 0
	if !stale {
		c.raw = a
	}
	d.mu.Unlock()
	if stale {
		return 0, nil
	}
	return d.record(ctx, c, a)
}

// record records announcement a of child c, reduced to what the child may
// claim (checkClaims).
func (d *Downlink) record(ctx context.Context, c *childState, a *wire.Announce) (uint64, error) {
	mu, _ := d.recordLocks.LoadOrStore(c.id.Name, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	dests, err := d.checkClaims(c, a.Destinations)
	if err != nil {
		return 0, err
	}
	rd := make([]tree.RouteDestination, len(dests))
	for i, dest := range dests {
		rd[i] = tree.RouteDestination{Name: dest.Name, Labels: dest.Labels, Path: dest.Path, Since: dest.Since,
			Connected: dest.Connected, LastSeen: dest.LastSeen}
	}
	rev, err := d.cfg.Mailboxes.SaveRoute(ctx, c.id.Name, rd)
	if err != nil {
		return 0, fmt.Errorf("session: saving the route of %s: %w", c.id.Name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if a.Generation >= c.announcedGen || c.announcedGen == 0 {
		c.announced, c.announcedGen = dests, a.Generation
		d.notifyLocked()
	}
	return rev, nil
}

// markDisconnected records, in the route record of a child whose link is
// down, its destinations as disconnected (mailbox.Mailboxes.MarkDisconnected),
// unless it linked again meanwhile.
func (d *Downlink) markDisconnected(ctx context.Context, c *childState) error {
	mu, _ := d.recordLocks.LoadOrStore(c.id.Name, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	d.mu.Lock()
	linked := c.conn != nil
	d.mu.Unlock()
	if linked {
		return nil
	}
	return d.cfg.Mailboxes.MarkDisconnected(ctx, c.id.Name)
}

func (d *Downlink) serve(ctx context.Context, conn link.Conn) {
	defer conn.Close("session over")
	id, ok := pki.PeerIdentity(conn.ConnectionState())
	if !ok {
		d.serveJoin(ctx, conn)
		return
	}
	log := d.log.With("child", id.Name)
	if !mayServe(d.cfg.Path, id) {
		log.Warn("refusing a relay of another tree, or above this one", "path", id.String())
		return
	}
	err := d.serveChild(ctx, conn, id, log)
	if err != nil && ctx.Err() == nil {
		log.Info("child link ended", "error", err)
	}
}

// mayServe reports whether a relay at path (this one's) may serve the
// authenticated relay id as a child: a relay of the same tree (its
// certificate chains to the root CA, checked by TLS, and names the same
// root), not this relay or one above it. Its certificate names the parent
// it joined under; a child that re-homed to a sibling presents a path
// through its old parent, and is served here all the same (paths in
// announcements are rebuilt by each parent, so the root sees the new one).
func mayServe(path []string, id pki.Identity) bool {
	if len(id.Path) < 2 || len(path) == 0 || id.Path[0] != path[0] || id.Path[len(id.Path)-1] != id.Name {
		return false
	}
	return !slices.Contains(path, id.Name)
}

// serveJoin answers a child without a certificate; it may only join.
func (d *Downlink) serveJoin(ctx context.Context, conn link.Conn) {
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, kind, err := conn.AcceptStream(hctx)
	if err != nil || kind != link.StreamControl {
		return
	}
	defer st.Close()
	id, err := d.cfg.Authority.Serve(hctx, st)
	if err != nil {
		d.registrationsRefused.Add(1)
		d.log.Warn("join refused", "remote", conn.RemoteAddr().String(), "error", err)
	} else {
		d.log.Info("child joined", "child", id.Name, "path", id.String(), "role", id.Role.String())
	}
	// Deliver the answer before the link goes: the child closes it.
	_ = st.CloseWrite()
	select {
	case <-conn.Done():
	case <-hctx.Done():
	}
}

// state returns (creating) the child's state and makes conn its live link,
// closing a previous one (a child that reconnected before the parent saw
// its old link die).
func (d *Downlink) state(ctx context.Context, id pki.Identity, conn link.Conn) (*childState, error) {
	var cert *x509.Certificate
	if certs := conn.ConnectionState().PeerCertificates; len(certs) > 0 {
		cert = certs[0]
	}
	d.mu.Lock()
	c := d.children[id.Name]
	d.mu.Unlock()
	if c == nil {
		var err error
		if c, err = d.newChild(ctx, id); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if existing := d.children[id.Name]; existing != nil {
		c = existing
	}
	if c.id.Role != id.Role || !slices.Equal(c.id.Path, id.Path) {
		c.id = id // a child reloaded from its route learns its role here; c.id changes only then
	}
	d.children[id.Name] = c
	if c.conn != nil {
		_ = c.conn.Close("replaced by a newer link")
	}
	c.conn, c.cert, c.connected, c.lastSeen = conn, cert, time.Now(), time.Now()
	c.links++
	c.announcedGen, c.raw = 0, nil // a new link starts its generations again
	d.notifyLocked()
	return c, nil
}

// release ends conn as the child's link; it reports whether conn was the
// child's live link (not one replaced by a newer).
func (d *Downlink) release(c *childState, conn link.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.lastSeen = time.Now()
	if c.conn != conn {
		return false
	}
	c.conn, c.cert = nil, nil
	d.notifyLocked()
	return true
}

func (d *Downlink) serveChild(ctx context.Context, conn link.Conn, id pki.Identity, log *slog.Logger) error {
	serverCtx := ctx // the link's ends with the link
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer link.AfterClose(conn, cancel)()
	control, err := acceptKind(ctx, conn, link.StreamControl)
	if err != nil {
		return err
	}
	// The control stream is closed when this function returns, unless the
	// link's goroutines started (below): then once they all ended, for
	// quic-go forbids a Close concurrent with a Write.
	closeControl := true
	defer func() {
		if closeControl {
			control.Close()
		}
	}()
	r, w := wire.NewReader(control, nil), wire.NewWriter(control, nil)
	hello, err := readAs[*wire.Hello](r)
	if err != nil {
		return err
	}
	if hello.Name != id.Name {
		defer linger(conn, control)
		return sendError(w, wire.CodePermissionDenied, fmt.Sprintf("certificate names %q, Hello says %q", id.Name, hello.Name))
	}
	version := wire.Negotiate(hello.Versions)
	if version == 0 {
		defer linger(conn, control)
		return sendError(w, wire.CodeUnsupportedVersion, fmt.Sprintf("this parent speaks protocol versions %d to %d", wire.MinProtocolVersion, wire.ProtocolVersion))
	}
	lc, err := d.prepareLink(conn, id, hello)
	if err != nil {
		_ = sendError(w, wire.CodeInternal, "checking the certificate: "+err.Error())
		return err
	}
	var gen int64
	var regErr error
	if lc != nil && lc.wait {
		// A relay linking here first, or with another key than it had:
		// the root decides before it may replace a live link of the name.
		if gen, regErr = d.register(ctx, lc.reg); errors.Is(regErr, join.ErrRefused) {
			d.registrationsRefused.Add(1)
			log.Warn("refusing a child the root does not recognize", "path", id.String(), "error", regErr)
			defer linger(conn, control)
			return sendError(w, wire.CodePermissionDenied, regErr.Error())
		}
	}
	c, err := d.state(ctx, id, conn)
	if err != nil {
		_ = sendError(w, wire.CodeInternal, "preparing the mailbox: "+err.Error())
		return err
	}
	d.mu.Lock()
	c.version = version
	d.mu.Unlock()
	if lc != nil && lc.wait {
		if err := d.linked(ctx, c, lc, gen, regErr, log); err != nil {
			_ = sendError(w, wire.CodeInternal, "registering the child: "+err.Error())
			return err
		}
	} else if lc != nil {
		go func() {
			gen, err := d.register(ctx, lc.reg)
			if err := d.linked(ctx, c, lc, gen, err, log); err != nil && ctx.Err() == nil {
				_ = conn.Close("refused: " + err.Error())
			}
		}()
	}
	defer func() {
		// (A relay that stops records its links down when it starts
		// again: clearLinks.)
		if d.release(c, conn) && serverCtx.Err() == nil {
			if err := d.saveLink(serverCtx, id.Name, false); err != nil && serverCtx.Err() == nil {
				log.Warn("recording the link down", "error", err)
			}
			if err := d.markDisconnected(serverCtx, c); err != nil && serverCtx.Err() == nil {
				log.Warn("recording the child's destinations disconnected", "error", err)
			}
		}
	}()
	if err := d.saveLink(ctx, id.Name, true); err != nil {
		_ = sendError(w, wire.CodeInternal, "recording the link: "+err.Error())
		return err
	}
	acked, err := c.collector.Acked()
	if err != nil {
		return err
	}
	cursor := hello.Cursor.Revision
	if hello.Cursor.Epoch != d.epoch {
		cursor = 0 // a revision of another parent (re-homed) or of an older store
	}
	welcome := &wire.Welcome{Name: d.cfg.Name, Version: version,
		Resync: c.sender.Resync(cursor), ReportAcked: acked, Epoch: d.epoch}
	if err := w.Send(welcome); err != nil {
		return err
	}
	log.Info("child connected", "transport", conn.Transport(), "cursor", hello.Cursor.Revision, "resync", welcome.Resync)

	// The child opens downsync and upsync after Welcome, in either order.
	var down, up link.Stream
	for down == nil || up == nil {
		st, kind, err := conn.AcceptStream(ctx)
		if err != nil {
			return err
		}
		switch {
		case kind == link.StreamDownsync && down == nil:
			down = st
		case kind == link.StreamUpsync && up == nil:
			up = st
		default:
			st.Close()
			return fmt.Errorf("%w: unexpected %s stream", errProtocol, kind)
		}
	}
	// The link this one replaced may still be winding down (its
	// Sender blocked on a slow write, its Collector on a store write):
	// wait for it, or a busy Sender would refuse this link and every
	// reconnect after it until the old one ends.
	var wg sync.WaitGroup
	served := make(chan struct{})
	d.mu.Lock()
	prev := c.served
	c.served = served
	d.mu.Unlock()
	closeControl = false
	defer func() {
		// A link given up while it waited for prev has started nothing,
		// but the next one must still wait for prev's goroutines.
		go func() {
			if prev != nil {
				<-prev
			}
			wg.Wait()
			control.Close()
			close(served)
		}()
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	errc := make(chan error, 5)
	// ended names the part of the session that ended first, which ends
	// the others: the reason a link ended, in the log.
	ended := func(part string, err error) {
		if err == nil {
			err = errors.New("ended")
		}
		errc <- fmt.Errorf("%s: %w", part, err)
	}
	send := lockedSend(w)    // Moved, Siblings and AnnounceAck share the control stream
	var renewing atomic.Bool // one renewal at a time per link
	// A child that comes from another parent (re-homed) holds that
	// parent's share: it is resynced only once its route is recorded and
	// this relay holds its mailbox (rehome.go).
	routed := make(chan []string, 1)
	rehomed := hello.Cursor.Epoch != "" && hello.Cursor.Epoch != d.epoch
	wg.Go(func() {
		if rehomed {
			if err := d.awaitMailbox(ctx, id, routed, log); err != nil {
				ended("awaiting the mailbox", err)
				return
			}
		}
		ended("sending the mailbox", c.sender.Serve(ctx, down, cursor))
	})
	wg.Go(func() { ended("collecting reports", c.collector.Serve(ctx, up)) })
	wg.Go(func() {
		ended("control stream", serveControl(ctx, r, func(m wire.Message) error {
			switch m := m.(type) {
			case *wire.Announce:
				return d.onAnnounce(ctx, c, m, version, send, routed)
			case *wire.Register:
				if version < 3 {
					return fmt.Errorf("%w: Register on a link of protocol version %d", errProtocol, version)
				}
				go d.onRegister(ctx, c, m, send)
			case *wire.Renew:
				if version < 4 {
					return fmt.Errorf("%w: Renew on a link of protocol version %d", errProtocol, version)
				}
				if !renewing.CompareAndSwap(false, true) {
					return send(&wire.Renewed{ID: m.ID, Code: wire.CodeProtocol, Message: "a renewal is under way on this link"})
				}
				wg.Go(func() {
					defer renewing.Store(false)
					// The next renewal may come as soon as the child
					// reads the answer: this one is over before it goes.
					d.onRenew(ctx, c, conn, lc, m, func(msg wire.Message) error {
						renewing.Store(false)
						return send(msg)
					}, log)
				})
			}
			return nil
		}, nil, nil))
	})
	wg.Go(func() { ended("telling moves and siblings", d.tell(ctx, c, version >= 2, send)) })
	err = <-errc
	cancel()
	return err
}

// linger half-closes st and waits (briefly) for the peer to close the
// link, so that a last message (an Error) is delivered before the link
// goes.
func linger(conn link.Conn, st link.Stream) {
	_ = st.CloseWrite()
	select {
	case <-conn.Done():
	case <-time.After(2 * time.Second):
	}
}

// acceptKind accepts the next stream and requires its kind.
func acceptKind(ctx context.Context, conn link.Conn, want link.StreamKind) (link.Stream, error) {
	st, kind, err := conn.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	if kind != want {
		st.Close()
		return nil, fmt.Errorf("%w: stream %s, want %s", errProtocol, kind, want)
	}
	return st, nil
}

// serveControl reads the control stream until it ends, handing a child's
// Announce, Register and Renew to fromChild (nil: this end is the child,
// which receives none), Moved to onMoved (nil: a parent, which receives
// none; or an edge, which has no claims to drop) and Siblings,
// AnnounceAck, Registered and Renewed to onParent (nil: ignored).
// Liveness is the transport's keep-alive.
func serveControl(ctx context.Context, r *wire.Reader, fromChild func(wire.Message) error, onMoved func(*wire.Moved),
	onParent func(wire.Message) error) error {
	for ctx.Err() == nil {
		m, err := r.Read()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *wire.Announce, *wire.Register, *wire.Renew:
			if fromChild == nil {
				return fmt.Errorf("%w: a parent sent %s", errProtocol, m.Type())
			}
			if err := fromChild(m); err != nil {
				return err
			}
		case *wire.Moved:
			if fromChild != nil {
				return fmt.Errorf("%w: a child sent Moved", errProtocol)
			}
			if onMoved != nil {
				onMoved(m)
			}
		case *wire.Siblings, *wire.AnnounceAck, *wire.Registered, *wire.Renewed:
			if fromChild != nil {
				return fmt.Errorf("%w: a child sent %s", errProtocol, m.Type())
			}
			if onParent != nil {
				if err := onParent(m); err != nil {
					return err
				}
			}
		case *wire.Error:
			return fmt.Errorf("%w: %s", errRemote, m.Message)
		default:
			return fmt.Errorf("%w: unexpected %s on the control stream", errProtocol, m.Type())
		}
	}
	return ctx.Err()
}

var (
	errProtocol = errors.New("session: protocol error")
	errRemote   = errors.New("session: peer error")
)

func sendError(w *wire.Writer, code wire.ErrorCode, msg string) error {
	_ = w.Send(&wire.Error{Code: code, Message: msg})
	return fmt.Errorf("%w: %s", errProtocol, msg)
}

// readAs reads the next frame as a T, with this package's errors.
func readAs[T wire.Message](r *wire.Reader) (T, error) {
	t, err := wire.Expect[T](r)
	var remote *wire.RemoteError
	switch {
	case errors.As(err, &remote):
		return t, fmt.Errorf("%w: %s", errRemote, remote.Message)
	case errors.Is(err, wire.ErrUnexpected):
		return t, fmt.Errorf("%w: %v", errProtocol, err)
	}
	return t, err
}
