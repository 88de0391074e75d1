package session

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// Certificate renewal (docs/security.md, "Renewal"). On a link of
// protocol version 4 a child asks its parent for a new certificate once
// its own is due (pki.RenewAt): a Renew with a certificate request made
// with the key it holds. The parent checks the request against the
// certificate the child presented on the link (same name, path and key;
// pki.CA.RenewChild) and has the root confirm, as when the child linked,
// that the name is joined with that key and role and is at home here;
// then it signs (join.Authority.Renew) and answers Renewed with the chain.
// The child stores it (pki.SaveRenewedChain) and presents it from its next
// dial on; the link it asked on stays up. A region signs for its children
// and serves them with it too (UplinkConfig.Renewed): its key is the
// same, so what it signed before still verifies.

// renewTimeout bounds a renewal: the child's wait for the answer, the
// parent's wait for the root.
const renewTimeout = time.Minute

// Bounds of the wait before a relay asks again when its last attempt left
// its certificate due (refused, failed, or cut short by its issuer's
// expiry): a tenth of the time the certificate has left, within these.
const (
	minRenewGap = time.Second
	maxRenewGap = time.Hour
)

// renewal is an uplink's state of renewing. Its methods are safe for
// concurrent use.
type renewal struct {
	mu      sync.Mutex
	last    time.Time // of the last attempt
	id      uint64    // of the last request
	answers chan *wire.Renewed
	count   atomic.Uint64
}

// next is when to ask to renew a certificate due at due, which expires at
// expires: at due, but not sooner after the last attempt than a tenth of
// the time the certificate has left (within minRenewGap and maxRenewGap),
// so that a relay whose renewal leaves it due (its issuer expires first,
// its parent refuses) asks again more often only as its expiry nears.
func (r *renewal) next(due, expires time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() {
		return due
	}
	if again := r.last.Add(min(max(time.Until(expires)/10, minRenewGap), maxRenewGap)); again.After(due) {
		return again
	}
	return due
}

// begin records an attempt and returns its request's ID and where its
// answer arrives.
func (r *renewal) begin() (uint64, <-chan *wire.Renewed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
	r.id++
	r.answers = make(chan *wire.Renewed, 1)
	return r.id, r.answers
}

// answer delivers the parent's Renewed, if it answers the last request.
func (r *renewal) answer(m *wire.Renewed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answers != nil && m.ID == r.id {
		r.answers <- m
		r.answers = nil
	}
}

// Renewals counts the certificates this relay renewed over its links.
func (u *Uplink) Renewals() uint64 { return u.renewal.count.Load() }

// renewIn is how long until this relay asks to renew its certificate
// (renewal.next).
func (u *Uplink) renewIn() time.Duration {
	leaf := u.cert.Load().Leaf
	return time.Until(u.renewal.next(pki.RenewAt(leaf, u.cfg.RenewBefore), leaf.NotAfter))
}

// renewOnce asks the parent for a new certificate and, once it answers
// with one, stores it and uses it from then on.
func (u *Uplink) renewOnce(ctx context.Context, send func(wire.Message) error) error {
	key, ok := u.cert.Load().PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("session: the relay's key is not an ECDSA key")
	}
	csr, err := pki.NewCSR(key, u.cfg.Name)
	if err != nil {
		return err
	}
	id, answers := u.renewal.begin()
	if err := send(&wire.Renew{ID: id, CSR: csr}); err != nil {
		return err
	}
	var a *wire.Renewed
	t := time.NewTimer(renewTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("session: the parent did not answer within %s", renewTimeout)
	case a = <-answers:
	}
	if a.Code != 0 {
		return fmt.Errorf("session: the parent refused (%s): %s", a.Code, a.Message)
	}
	cert, err := pki.SaveRenewedChain(u.cfg.DataDir, a.Chain)
	if err != nil {
		return err
	}
	u.cert.Store(&cert)
	u.renewal.count.Add(1)
	u.log.Info("certificate renewed", "expires", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	if u.cfg.Renewed != nil {
		u.cfg.Renewed()
	}
	return nil
}

// ---- the parent side ----

// onRenew answers a child's Renew on its link conn, whose registration
// is lc (nil without a Registrar).
func (d *Downlink) onRenew(ctx context.Context, c *childState, conn link.Conn, lc *linkCheck, m *wire.Renew, send func(wire.Message) error, log *slog.Logger) {
	answer := &wire.Renewed{ID: m.ID}
	chain, err := d.renew(ctx, c, conn, lc, m.CSR)
	switch {
	case err == nil:
		d.renewed.Add(1)
		answer.Chain = chain
		log.Debug("renewed a child's certificate")
	case ctx.Err() != nil:
		return // the link ended
	default:
		d.renewalsRefused.Add(1)
		log.Warn("refusing a certificate renewal", "path", c.id.String(), "reason", err)
		answer.Code, answer.Message = wire.CodePermissionDenied, err.Error()
		if !errors.Is(err, join.ErrRefused) && !errors.Is(err, errRenewRefused) {
			answer.Code = wire.CodeInternal
		}
	}
	if err := send(answer); err != nil {
		log.Debug("answering a renewal", "error", err)
	}
}

// errRenewRefused marks a renewal this relay refuses by itself.
var errRenewRefused = errors.New("renewal refused")

// renew checks a child's renewal and signs it: the request must be for
// the certificate the child presented on conn (name, path, key), and the
// root must still record that name with that key and role, at home here.
func (d *Downlink) renew(ctx context.Context, c *childState, conn link.Conn, lc *linkCheck, csr []byte) ([]byte, error) {
	certs := conn.ConnectionState().PeerCertificates
	d.mu.Lock()
	unverified := c.unverified
	d.mu.Unlock()
	switch {
	case len(certs) == 0:
		return nil, fmt.Errorf("%w: the link has no certificate", errRenewRefused)
	case lc == nil:
		return nil, fmt.Errorf("%w: this relay does not register relays, so it cannot check the key with the root", errRenewRefused)
	case unverified:
		return nil, fmt.Errorf("%w: this relay's parent does not register relays (protocol version < 3), so it cannot check the key with the root", errRenewRefused)
	}
	chain, err := d.cfg.Authority.Renew(certs[0], csr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRenewRefused, err)
	}
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	switch _, err := d.register(ctx, lc.reg); {
	case errors.Is(err, join.ErrRefused):
		return nil, err // the root's reason
	case err != nil:
		return nil, fmt.Errorf("the root did not confirm the relay's key in time: %w", err)
	}
	return chain, nil
}
