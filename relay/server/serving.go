package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
)

// servingCheckInterval is how often a root checks its serving certificate
// (servingCert). A variable for tests.
var servingCheckInterval = time.Minute

// servingCert is the root's serving certificate, which the kube API and
// the link listener present, kept current while the root runs: every
// servingCheckInterval it asks the CA for it again (pki.CA.EnsureServing),
// which reads it from DIR/pki and issues a new one when it expires within
// 30 days, when it was removed, or when it no longer matches the hosts.
// Handshakes from then on present the new certificate; connections open
// keep theirs. So a root renews its certificate without a restart, and an
// operator rotates it by removing serving.crt (or replacing the pair with
// one the CA issued for the same hosts).
//
// Its methods are safe for concurrent use.
type servingCert struct {
	ca    *pki.CA
	dir   string
	hosts []string
	log   *slog.Logger
	cur   atomic.Pointer[tls.Certificate]
}

func newServingCert(ca *pki.CA, dir string, hosts []string, cert tls.Certificate, log *slog.Logger) *servingCert {
	s := &servingCert{ca: ca, dir: dir, hosts: hosts, log: log}
	s.cur.Store(&cert)
	return s
}

// serve returns cfg presenting the current certificate instead of a fixed
// one.
func (s *servingCert) serve(cfg *tls.Config) *tls.Config { return presenting(cfg, &s.cur) }

// presenting returns cfg presenting, at each handshake, the certificate
// cur holds then instead of a fixed one.
func presenting(cfg *tls.Config, cur *atomic.Pointer[tls.Certificate]) *tls.Config {
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cur.Load(), nil }
	return cfg
}

// Start checks the certificate every servingCheckInterval until ctx ends.
// A failed check is logged and tried again at the next one: the current
// certificate stays in use.
func (s *servingCert) Start(ctx context.Context) error {
	t := time.NewTicker(servingCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cert, err := s.ca.EnsureServing(s.dir, s.hosts)
		if err != nil {
			s.log.Warn("checking the serving certificate", "error", err)
			continue
		}
		if old := s.cur.Load(); !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
			s.cur.Store(&cert)
			s.log.Info("serving certificate replaced", "expires", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
}
