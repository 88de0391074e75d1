package session

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// Destination is one destination a relay announces (wire.Destination);
// Moved is what a parent says moved away from a relay (wire.Moved). The
// relays that use this package pass them between an uplink and a
// downlink without knowing the wire format.
type (
	Destination = wire.Destination
	Moved       = wire.Moved
)

// ErrNoToken: the child has never joined and was given no join token.
var ErrNoToken = errors.New("session: this relay has not joined its parent yet: pass --join-token")

// UplinkConfig configures the child side.
type UplinkConfig struct {
	Name    string
	Role    pki.ChildRole
	DataDir string
	// Parents are the parent's addresses, tried in order (after the
	// address that last worked, before the parent's siblings that it
	// told this relay about: Uplink.DialOrder).
	Parents []string
	// JoinToken is needed only until the first successful join.
	JoinToken string
	// Store holds the inbox (what the parent sends) and the outbox (what
	// this relay reports).
	Store         *store.Store
	Inbox, Outbox string
	// Transport settings: QUIC or TCP (auto by default), an HTTP CONNECT
	// proxy, a shared QUIC transport (many relays on one socket).
	Mode      link.Mode
	Proxy     *url.URL
	Transport *quic.Transport
	Link      link.Config
	Backoff   link.Backoff
	Logger    *slog.Logger
	// Subtree returns the destinations below this relay to announce, with
	// paths relative to this relay (an edge: itself, with an empty path;
	// a region: its children's, as Downlink.Subtree gives them), and a
	// channel that is closed when they change. Nil announces nothing.
	Subtree func() ([]wire.Destination, <-chan struct{})
	// Moved, when set, receives what the parent says has moved away from
	// this relay (a region: Downlink.SetMoved). Nil ignores it.
	Moved func(*wire.Moved)
	// RenewBefore is how long before its certificate expires this relay
	// asks its parent for a new one (renew.go); zero: once two thirds of
	// its lifetime have passed (pki.RenewAt).
	RenewBefore time.Duration
	// Renewed, when set, is called once a renewed certificate is in the
	// data directory (a region presents it to its children and signs
	// with it from then on).
	Renewed func()
	// ServeProxy, when set, serves each proxy stream the parent opens, in a
	// goroutine of its own, until ctx ends with the link: a region passes
	// it on (proxy.Forward), an edge answers it (proxy.Accept). Nil:
	// streams are closed, and the parent's requests fail.
	ServeProxy func(ctx context.Context, st link.Stream)
}

// Uplink keeps one child relay linked to its parent.
type Uplink struct {
	cfg       UplinkConfig
	log       *slog.Logger
	receiver  *tree.Receiver
	reporter  *tree.Reporter
	connected atomic.Bool
	redial    atomic.Pointer[link.Redialer]
	// homes are the parent's siblings learned from it, and the address
	// that last worked (siblings.go); routes what the parent has recorded
	// of this relay's announcements (rehome.go).
	homes  homes
	routes routes
	// registrations are the Registers sent to the parent for this relay's
	// children (register.go).
	registrations registrations
	// cert is this relay's certificate and key, once Start loaded them,
	// replaced when renewed (renew.go), which counts renewals.
	cert    atomic.Pointer[tls.Certificate]
	renewal renewal
}

// NewUplink returns an Uplink for cfg.
func NewUplink(cfg UplinkConfig) *Uplink {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Uplink{
		routes:   routes{changed: make(chan struct{})},
		cfg:      cfg,
		log:      cfg.Logger.With("parent", cfg.Parents),
		receiver: tree.NewReceiver(cfg.Store, cfg.Inbox, tree.ReceiverOptions{}),
		reporter: tree.NewReporter(cfg.Store, cfg.Outbox, tree.ReporterOptions{Logger: cfg.Logger}),
	}
}

// Connected reports whether a link to the parent is up.
func (u *Uplink) Connected() bool { return u.connected.Load() }

// Reconnects counts links after the first.
func (u *Uplink) Reconnects() uint64 {
	if r := u.redial.Load(); r != nil {
		return r.Reconnects()
	}
	return 0
}

// Cursor is the last parent revision applied to the inbox.
func (u *Uplink) Cursor() (uint64, error) { return u.receiver.Cursor() }

// Downsync and Upsync report the streams' counters.
func (u *Uplink) Downsync() tree.Stats { return u.receiver.Stats() }
func (u *Uplink) Upsync() tree.Stats   { return u.reporter.Stats() }

// Start joins if needed, then keeps the link up until ctx is done.
func (u *Uplink) Start(ctx context.Context) error {
	if err := u.ensureIdentity(ctx); err != nil {
		return err
	}
	cert, root, err := pki.LoadChildIdentity(u.cfg.DataDir)
	if err != nil {
		return err
	}
	if err := u.loadSiblings(); err != nil {
		return err
	}
	u.cert.Store(&cert)
	// Every dial presents the certificate of the moment.
	tlsCfg := pki.LinkClientTLS(nil, root, join.ServerNameOf(u.cfg.Parents[0]))
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return u.cert.Load(), nil }
	d := u.dialer(tlsCfg)
	defer d.Close()
	redial := &link.Redialer{
		Dial: func(ctx context.Context) (link.Conn, error) {
			return u.dial(ctx, d)
		},
		Serve:   u.session,
		Backoff: u.cfg.Backoff,
		OnRetry: func(err error, attempt int, wait time.Duration) {
			u.log.Info("parent unreachable, retrying", "attempt", attempt, "wait", wait, "error", err)
		},
	}
	u.redial.Store(redial)
	return redial.Start(ctx)
}

// ensureIdentity joins with the token unless an identity is on disk.
func (u *Uplink) ensureIdentity(ctx context.Context) error {
	_, _, err := pki.LoadChildIdentity(u.cfg.DataDir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if u.cfg.JoinToken == "" {
		return ErrNoToken
	}
	for attempt := 0; ; attempt++ {
		err := u.joinOnce(ctx)
		if err == nil {
			u.log.Info("joined parent")
			return nil
		}
		// A refusal (bad or expired token) or an untrusted parent will not
		// change by retrying; a network failure may.
		if errors.Is(err, join.ErrRefused) || errors.Is(err, join.ErrUntrustedParent) {
			return err
		}
		wait := u.cfg.Backoff.Delay(attempt)
		u.log.Info("join failed, retrying", "error", err, "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (u *Uplink) dialer(tlsCfg *tls.Config) *link.Dialer {
	return &link.Dialer{TLS: tlsCfg, Mode: u.cfg.Mode, Proxy: u.cfg.Proxy, Transport: u.cfg.Transport, Config: u.cfg.Link}
}

func (u *Uplink) joinOnce(ctx context.Context) error {
	server := join.ServerNameOf(u.cfg.Parents[0])
	d := u.dialer(join.ClientTLS(server))
	defer d.Close()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := d.Dial(dctx, u.cfg.Parents)
	if err != nil {
		return err
	}
	defer conn.Close("joined")
	return join.Join(dctx, conn, u.cfg.DataDir, join.Request{Name: u.cfg.Name, Role: u.cfg.Role, Token: u.cfg.JoinToken, ServerName: server})
}

// session runs one link: Hello/Welcome, then downsync and upsync until
// one of them ends.
func (u *Uplink) session(ctx context.Context, conn link.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	control, err := conn.OpenStream(ctx, link.StreamControl)
	if err != nil {
		return err
	}
	// Closed when this function returns, once every writer of it is done
	// (steer, the Registers): quic-go forbids a Close concurrent with a
	// Write.
	defer control.Close()
	cursor, err := u.receiver.Cursor()
	if err != nil {
		return err
	}
	epoch, err := u.receiver.Epoch()
	if err != nil {
		return err
	}
	r, w := wire.NewReader(control, nil), wire.NewWriter(control, nil)
	role := wire.RoleEdge
	if u.cfg.Role == pki.RoleRegion {
		role = wire.RoleRegion
	}
	proof, err := u.linkProof(conn)
	if err != nil {
		return err
	}
	if err := w.Send(&wire.Hello{Name: u.cfg.Name, Role: role, Versions: wire.SupportedVersions(),
		Cursor: wire.Cursor{Revision: cursor, ReportSeq: u.reporter.Acked(), Epoch: epoch}, Proof: proof}); err != nil {
		return err
	}
	welcome, err := readAs[*wire.Welcome](r)
	if err != nil {
		return err
	}
	down, err := conn.OpenStream(ctx, link.StreamDownsync)
	if err != nil {
		return err
	}
	up, err := conn.OpenStream(ctx, link.StreamUpsync)
	if err != nil {
		down.Close()
		return err
	}
	u.connected.Store(true)
	defer u.connected.Store(false)
	u.log.Info("connected to parent", "transport", conn.Transport(), "cursor", cursor, "resync", welcome.Resync)
	errc := make(chan error, 5)
	u.receiver.SetEpoch(welcome.Epoch)
	u.routes.reset(welcome.Version)
	since, err := homed(ctx, u.cfg.Store, welcome.Epoch)
	if err != nil {
		down.Close()
		up.Close()
		return err
	}
	// The Receiver and Reporter serve one stream at a time: the session
	// returns once they have let go of this link's streams, so that the
	// next link does not find them busy (tree.ErrBusy).
	var streams sync.WaitGroup
	streams.Go(func() { errc <- u.receiver.Serve(ctx, down) })
	streams.Go(func() { errc <- u.reporter.Serve(ctx, up, welcome.ReportAcked) })
	send := lockedSend(w) // steer and the Registers share the control stream
	u.registrations.start(welcome.Version, send)
	defer u.registrations.stop()
	go func() {
		errc <- serveControl(ctx, r, nil, u.cfg.Moved, func(m wire.Message) error { return u.fromParent(ctx, m) })
	}()
	defer link.AfterClose(conn, func() { errc <- fmt.Errorf("session: link closed") })()
	if welcome.Version >= proxyVersion {
		u.serveProxies(ctx, conn)
	}
	err = u.steer(ctx, send, since, welcome.Version >= 4, errc)
	cancel()
	streams.Wait()
	return err
}

// steer writes what this relay tells its parent on the control stream
// until the link ends (the first error on errc) or ctx does: the subtree
// on connect and again whenever it changes, with since as the Since of
// the destinations that have none (this relay's own; a parent of protocol
// version 3 replaces it), and, with renew, a request for a new
// certificate whenever the current one is due. It runs in the session's
// goroutine; a renewal, which waits for its answer, runs in one of its
// own while it lasts, and has ended when steer returns.
func (u *Uplink) steer(ctx context.Context, send func(wire.Message) error, since int64, renew bool, errc <-chan error) error {
	var changed <-chan struct{}
	var gen uint64
	announce := func() error {
		gen++
		var dests []wire.Destination
		dests, changed = u.cfg.Subtree()
		// Paths are relative to the announcer: this relay first.
		out := make([]wire.Destination, len(dests))
		for i, d := range dests {
			d.Path = append([]string{u.cfg.Name}, d.Path...)
			if d.Since == 0 {
				d.Since = since
			}
			out[i] = d
		}
		u.routes.announcing(gen, out) // before an ack can come
		return send(&wire.Announce{Generation: gen, Destinations: out})
	}
	if u.cfg.Subtree != nil {
		if err := announce(); err != nil {
			return err
		}
	}

	var due <-chan time.Time
	renewed := make(chan struct{}, 1)
	rctx, stop := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	defer func() {
		stop()
		renewing.Wait()
	}()
	var timer *time.Timer
	if renew {
		timer = time.NewTimer(u.renewIn())
		defer timer.Stop()
		due = timer.C
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			if err := announce(); err != nil {
				return err
			}
		case <-due:
			due = nil
			renewing.Go(func() {
				leaf := u.cert.Load().Leaf
				if err := u.renewOnce(rctx, send); err != nil && rctx.Err() == nil {
					u.log.Warn("renewing the certificate failed; asking again later", "expires", leaf.NotAfter.UTC().Format(time.RFC3339), "error", err)
				}
				renewed <- struct{}{}
			})
		case <-renewed:
			timer.Reset(u.renewIn())
			due = timer.C
		}
	}
}

// homeResource holds, in a child's system space, the parent store it is
// served from (its epoch) and since when (wire.Destination.Since).
var homeResource = store.Resource{Group: "tree.canopy.dev", Resource: "homes"}

// homed returns since when this relay has been served by the parent store
// of epoch: unchanged across reconnects and restarts under the same
// parent, later (by this relay's clock, and never earlier than before)
// after it re-homes.
func homed(ctx context.Context, st *store.Store, epoch string) (int64, error) {
	type home struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Epoch string `json:"epoch"`
		Since int64  `json:"since"`
	}
	k := store.Key{Resource: homeResource, Name: "parent"}
	var cur home
	o, err := st.Get(k)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if err := json.Unmarshal(o.Data, &cur); err != nil {
			return 0, fmt.Errorf("session: home record: %w", err)
		}
		if cur.Epoch == epoch && cur.Since != 0 {
			return cur.Since, nil
		}
	}
	next := home{Epoch: epoch, Since: max(time.Now().UnixNano(), cur.Since+1)}
	next.Metadata.Name = k.Name
	data, err := json.Marshal(next)
	if err != nil {
		return 0, err
	}
	if o == nil {
		_, err = st.Create(ctx, k, data)
	} else {
		_, err = st.Update(ctx, k, data, o.Revision)
	}
	return next.Since, err
}
