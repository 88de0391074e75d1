package session

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// Registration (relay/transport/registry, docs/security.md). The root decides who
// belongs to the tree; every parent asks it, through its own parent
// (wire.Register, protocol version 3):
//
//   - before it signs a joining child's certificate (join.Authority), so
//     that a name joins once;
//   - when a child with a certificate links, so that its key is checked
//     and the root records where it is; the root answers the relay's
//     generation.
//
// Each parent that passes a link's answer down records a grant: the
// destination, the child it came through and its generation. A child's
// announcement may claim only what it was granted: an edge, itself (its
// Since is set to its generation); a region, the destinations below it
// with the generation each was granted through it. Anything else is
// refused, logged and counted (canopy_claims_refused_total). Claims of one
// destination are then ordered by generations the root gave, never by a
// child's clock.

// ErrParentTooOld: the parent speaks a protocol without registration
// (version < 3). A region under such a parent cannot have joins recorded;
// it serves its children unverified, as before registration existed.
var ErrParentTooOld = errors.New("session: the parent does not register relays (protocol version < 3): upgrade it first")

// registrationError is the root's (or a parent's) refusal of a Register.
type registrationError struct {
	code wire.ErrorCode
	msg  string
}

func (e *registrationError) Error() string { return e.msg }

// Unwrap makes a refusal (as opposed to a transient failure) match
// join.ErrRefused.
func (e *registrationError) Unwrap() error {
	if e.code == wire.CodePermissionDenied {
		return join.ErrRefused
	}
	return nil
}

// registrations are an uplink's Registers waiting for their answers. Its
// methods are safe for concurrent use.
type registrations struct {
	mu sync.Mutex
	// send writes on the live link's control stream (nil: no link), of
	// protocol version.
	send    func(wire.Message) error
	version uint32
	nextID  uint64
	pending map[uint64]chan *wire.Registered
	// changed is closed (and replaced) when a link starts or ends.
	changed chan struct{}
}

// start makes a link's control stream the one Registers go on.
func (r *registrations) start(version uint32, send func(wire.Message) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.send, r.version = send, version
	r.notifyLocked()
}

// stop ends the link: its pending Registers are asked again on the next.
func (r *registrations) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.send = nil
	for id, ch := range r.pending {
		close(ch)
		delete(r.pending, id)
	}
	r.notifyLocked()
}

func (r *registrations) notifyLocked() {
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

// answer delivers the parent's Registered.
func (r *registrations) answer(m *wire.Registered) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.pending[m.ID]; ok {
		ch <- m
		delete(r.pending, m.ID)
	}
}

// Register has the root record reg, through this relay's parent: it is a
// region's join.Registrar. It waits for a link to the parent, and asks
// again on the next link when one ends before the answer (the root's
// registrations are idempotent). A refusal matches join.ErrRefused.
func (u *Uplink) Register(ctx context.Context, reg join.Registration) (int64, error) {
	r := &u.registrations
	m := &wire.Register{Kind: wire.RegisterLink, Name: reg.Name, Role: wireRole(reg.Role), Path: reg.Path, PublicKey: reg.PublicKey,
		Token: reg.Token, Proof: wire.LinkProof{Time: reg.ProofTime, Signature: reg.Proof}}
	if reg.Join {
		m.Kind = wire.RegisterJoin
	}
	for {
		r.mu.Lock()
		if r.changed == nil {
			r.notifyLocked()
		}
		send, version, changed := r.send, r.version, r.changed
		if send == nil {
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("session: no link to the parent to register %s: %w", reg.Name, ctx.Err())
			case <-changed:
				continue
			}
		}
		if version < 3 {
			r.mu.Unlock()
			return 0, ErrParentTooOld
		}
		r.nextID++
		m.ID = r.nextID
		answer := make(chan *wire.Registered, 1)
		if r.pending == nil {
			r.pending = map[uint64]chan *wire.Registered{}
		}
		r.pending[m.ID] = answer
		r.mu.Unlock()
		if err := send(m); err != nil {
			<-changed // the link is ending: ask again on the next
			continue
		}
		select {
		case <-ctx.Done():
			r.mu.Lock()
			delete(r.pending, m.ID)
			r.mu.Unlock()
			return 0, ctx.Err()
		case a, ok := <-answer:
			if !ok {
				continue // the link ended first
			}
			if a.Code != 0 {
				return 0, &registrationError{code: a.Code, msg: a.Message}
			}
			return a.Generation, nil
		}
	}
}

// linkProof signs the path this relay links at on conn (its parent's
// path, then its name) and the time (pki.SignLinkProof). A region parent
// names its path in its certificate; the root's serving certificate names
// no relay, and the root's name starts this relay's own path.
func (u *Uplink) linkProof(conn link.Conn) (wire.LinkProof, error) {
	cert := u.cert.Load()
	leaf := cert.Leaf
	if leaf == nil {
		return wire.LinkProof{}, errors.New("session: no certificate to sign a link proof with")
	}
	own, err := pki.IdentityFromCert(leaf)
	if err != nil {
		return wire.LinkProof{}, err
	}
	parent := own.Path[:1]
	if id, ok := pki.PeerIdentity(conn.ConnectionState()); ok {
		parent = id.Path
	}
	signer, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return wire.LinkProof{}, errors.New("session: the relay's key cannot sign")
	}
	p := wire.LinkProof{Time: time.Now().UnixNano()}
	p.Signature, err = pki.SignLinkProof(signer, append(slices.Clone(parent), u.cfg.Name), p.Time)
	return p, err
}

func wireRole(r pki.ChildRole) wire.Role {
	if r == pki.RoleRegion {
		return wire.RoleRegion
	}
	return wire.RoleEdge
}

func childRole(r wire.Role) (pki.ChildRole, bool) {
	switch r {
	case wire.RoleRegion:
		return pki.RoleRegion, true
	case wire.RoleEdge:
		return pki.RoleEdge, true
	}
	return 0, false
}

// ---- the parent side ----

// grantResource holds, in the system space, what this relay's parent
// registrations granted: for each (child, destination), the generation of
// the destination's link below that child (named
// "<space>.<child>.<destination>").
var grantResource = store.Resource{Group: "tree.canopy.dev", Resource: "grants"}

func grantKey(space, child, dest string) store.Key {
	return store.Key{Resource: grantResource, Name: space + "." + child + "." + dest}
}

type grantRecord struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Generation int64 `json:"generation"`
	// Key is the destination's pki.KeyID.
	Key string `json:"key"`
}

// grant returns what dest was granted through child, and whether it was.
func (d *Downlink) grant(child, dest string) (grantRecord, bool, error) {
	var g grantRecord
	o, err := d.cfg.Store.Get(grantKey(d.space(), child, dest))
	if errors.Is(err, store.ErrNotFound) {
		return g, false, nil
	}
	if err != nil {
		return g, false, err
	}
	if err := json.Unmarshal(o.Data, &g); err != nil {
		return g, false, fmt.Errorf("session: grant %s: %w", o.Key.Name, err)
	}
	return g, true, nil
}

// saveGrant records what dest was granted through child. Grants are bulk
// writes (store.Bulk): ten thousand edges linking at once make a few log
// entries at the root, not one each.
func (d *Downlink) saveGrant(ctx context.Context, child, dest string, g grantRecord) error {
	ctx = store.Bulk(ctx)
	k := grantKey(d.space(), child, dest)
	g.Metadata.Name = k.Name
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	for {
		o, err := d.cfg.Store.Get(k)
		switch {
		case errors.Is(err, store.ErrNotFound):
			_, err = d.cfg.Store.Create(ctx, k, data)
		case err != nil:
			return err
		default:
			var cur grantRecord
			if json.Unmarshal(o.Data, &cur) == nil && cur.Generation == g.Generation && cur.Key == g.Key {
				return nil
			}
			_, err = d.cfg.Store.Update(ctx, k, data, o.Revision)
		}
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrConflict) {
			continue
		}
		return err
	}
}

// registerRetry is how long a parent waits before asking again after a
// transient failure to register.
const registerRetry = 200 * time.Millisecond

// register has the Registrar record reg, again after transient failures,
// until it is recorded, refused (join.ErrRefused) or ctx ends.
func (d *Downlink) register(ctx context.Context, reg join.Registration) (int64, error) {
	for {
		gen, err := d.cfg.Registrar.Register(ctx, reg)
		if err == nil || errors.Is(err, join.ErrRefused) || errors.Is(err, ErrParentTooOld) {
			return gen, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		d.log.Debug("registering a relay failed, retrying", "relay", reg.Name, "error", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(registerRetry):
		}
	}
}

// linkCheck is the registration of a child that linked with its
// certificate: the root checks its key and records its home.
type linkCheck struct {
	reg join.Registration
	// wait: the child is served only once the root answered. A child
	// granted before with the same key (it linked here already) is served
	// at once and registered meanwhile, so that a region keeps serving
	// its children while its own parent is away; a child linking here for
	// the first time, or with another key, waits.
	wait bool
}

// prepareLink returns the registration of a child that linked on conn
// with hello, nil without a Registrar.
func (d *Downlink) prepareLink(conn link.Conn, id pki.Identity, hello *wire.Hello) (*linkCheck, error) {
	if d.cfg.Registrar == nil {
		return nil, nil
	}
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("session: no peer certificate")
	}
	pub, err := pki.PublicKeyDER(certs[0].PublicKey)
	if err != nil {
		return nil, err
	}
	g, granted, err := d.grant(id.Name, id.Name)
	if err != nil {
		return nil, err
	}
	return &linkCheck{
		reg: join.Registration{Name: id.Name, Role: id.Role, Path: append(slices.Clone(d.cfg.Path), id.Name), PublicKey: pub,
			ProofTime: hello.Proof.Time, Proof: hello.Proof.Signature},
		wait: !granted || g.Key != pki.KeyIDOfDER(pub),
	}, nil
}

// linked finishes a child's registration with the Registrar's answer:
// it returns the refusal (the link must end), or records the child's
// grant and, if its generation changed, its announcement again.
func (d *Downlink) linked(ctx context.Context, c *childState, lc *linkCheck, gen int64, err error, log *slog.Logger) error {
	switch {
	case errors.Is(err, ErrParentTooOld):
		d.setLegacy(c, true)
		log.Warn("serving the child unverified: this relay's parent does not register relays; upgrade it", "error", err)
		return nil
	case err != nil:
		if errors.Is(err, join.ErrRefused) {
			d.registrationsRefused.Add(1)
			log.Warn("refusing a child the root does not recognize", "path", c.id.String(), "error", err)
		}
		return err
	}
	d.setLegacy(c, false)
	if err := d.saveGrant(ctx, c.id.Name, c.id.Name, grantRecord{Generation: gen, Key: pki.KeyIDOfDER(lc.reg.PublicKey)}); err != nil {
		return err
	}
	return d.recordAgain(ctx, c)
}

func (d *Downlink) setLegacy(c *childState, legacy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.unverified = legacy
}

// onRegister answers a child's Register: the relay must be below the
// child; the Registrar records it; for a link, this relay grants the
// relay's generation to the child before it answers.
func (d *Downlink) onRegister(ctx context.Context, c *childState, m *wire.Register, send func(wire.Message) error) {
	answer := &wire.Registered{ID: m.ID}
	gen, err := d.forward(ctx, c, m)
	switch {
	case err == nil:
		answer.Generation = gen
	case errors.Is(err, join.ErrRefused):
		answer.Code, answer.Message = wire.CodePermissionDenied, err.Error()
	default:
		answer.Code, answer.Message = wire.CodeInternal, err.Error()
	}
	if err := send(answer); err != nil {
		d.log.Debug("answering a registration", "child", c.id.Name, "error", err)
	}
}

func (d *Downlink) forward(ctx context.Context, c *childState, m *wire.Register) (int64, error) {
	role, ok := childRole(m.Role)
	below := append(slices.Clone(d.cfg.Path), c.id.Name)
	switch {
	case d.cfg.Registrar == nil:
		return 0, &registrationError{code: wire.CodePermissionDenied, msg: "this relay does not register relays"}
	case c.id.Role != pki.RoleRegion:
		return 0, &registrationError{code: wire.CodePermissionDenied, msg: "an edge has no relays below it to register"}
	case !ok || m.Kind != wire.RegisterJoin && m.Kind != wire.RegisterLink:
		return 0, &registrationError{code: wire.CodePermissionDenied, msg: fmt.Sprintf("malformed registration of %q", m.Name)}
	case len(m.Path) <= len(below) || !slices.Equal(m.Path[:len(below)], below) || m.Path[len(m.Path)-1] != m.Name:
		d.registrationsRefused.Add(1)
		d.log.Warn("refusing a registration outside the child's subtree", "child", c.id.Name, "relay", m.Name, "path", strings.Join(m.Path, "/"))
		return 0, &registrationError{code: wire.CodePermissionDenied,
			msg: fmt.Sprintf("%s may register only relays below it, not %s", c.id.Name, strings.Join(m.Path, "/"))}
	}
	reg := join.Registration{Join: m.Kind == wire.RegisterJoin, Name: m.Name, Role: role, Path: m.Path, PublicKey: m.PublicKey, Token: m.Token,
		ProofTime: m.Proof.Time, Proof: m.Proof.Signature}
	gen, err := d.cfg.Registrar.Register(ctx, reg)
	if err != nil {
		if errors.Is(err, join.ErrRefused) {
			d.registrationsRefused.Add(1)
		}
		return 0, err
	}
	if !reg.Join {
		if err := d.saveGrant(ctx, c.id.Name, m.Name, grantRecord{Generation: gen, Key: pki.KeyIDOfDER(m.PublicKey)}); err != nil {
			return 0, err
		}
	}
	return gen, nil
}

// ---- checking announcements ----

// checkClaims returns what of a child's announcement it may claim, with
// the generations this relay granted, and logs and counts the rest:
//
//   - an edge announces itself alone, with path [edge]; its Since is its
//     grant's generation;
//   - a region announces destinations below it (paths [region, ..., dest],
//     never itself), each with the generation granted through it.
//
// Without a Registrar (or for a child that predates registration:
// protocol version < 3, or a parent that does not register) only the
// shape is checked, and Since is the child's.
func (d *Downlink) checkClaims(c *childState, dests []wire.Destination) ([]wire.Destination, error) {
	d.mu.Lock()
	verify := d.cfg.Registrar != nil && !c.unverified && (c.id.Role == pki.RoleEdge || c.version >= 3)
	d.mu.Unlock()
	out := make([]wire.Destination, 0, len(dests))
	for _, dest := range dests {
		reason := ""
		switch {
		case c.id.Role == pki.RoleEdge && (dest.Name != c.id.Name || !slices.Equal(dest.Path, []string{c.id.Name})):
			reason = "an edge announces itself alone"
		case c.id.Role != pki.RoleEdge && (len(dest.Path) < 2 || dest.Path[0] != c.id.Name || dest.Path[len(dest.Path)-1] != dest.Name ||
			slices.Contains(dest.Path[1:], c.id.Name)):
			reason = "a region announces only destinations below itself"
		case verify:
			g, granted, err := d.grant(c.id.Name, dest.Name)
			switch {
			case err != nil:
				return nil, err
			case !granted:
				reason = "the root never registered it below this child"
			case c.id.Role == pki.RoleEdge:
				dest.Since = g.Generation
			case dest.Since != g.Generation:
				reason = fmt.Sprintf("generation %d, but %d was granted", dest.Since, g.Generation)
			}
		}
		if reason != "" {
			d.claimRefused(c)
			d.log.Warn("refusing a claim", "child", c.id.Name, "destination", dest.Name, "path", strings.Join(dest.Path, "/"), "reason", reason)
			continue
		}
		out = append(out, dest)
	}
	return out, nil
}

// claimRefused counts a refused claim of child c.
func (d *Downlink) claimRefused(c *childState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.claimsRefused++
}

// recordAgain records the child's last announcement again, against the
// grants as they are now (an edge's generation changed).
func (d *Downlink) recordAgain(ctx context.Context, c *childState) error {
	d.mu.Lock()
	raw := c.raw
	d.mu.Unlock()
	if raw == nil {
		return nil
	}
	_, err := d.record(ctx, c, raw)
	return err
}
