package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	servingValidity = 365 * 24 * time.Hour
	// servingRenewBefore is how long before expiry EnsureServing re-issues.
	servingRenewBefore = 30 * 24 * time.Hour
)

// loopbackHosts are in every serving certificate, so that local clients can
// always verify the relay.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// EnsureServing returns the serving certificate stored in dir (DIR/pki),
// first issuing a new one if there is none, if its SANs differ from hosts
// plus localhost, 127.0.0.1 and ::1, if this CA did not issue it, or if it
// expires within 30 days. Each host is a DNS name or an IP address;
// [ServingHosts] derives them from listen addresses. The returned
// certificate has its Leaf set.
func (ca *CA) EnsureServing(dir string, hosts []string) (tls.Certificate, error) {
	sans, err := normalizeHosts(append(slices.Clone(hosts), loopbackHosts...))
	if err != nil {
		return tls.Certificate{}, err
	}
	certPath, keyPath := filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	// Anything unreadable, mismatched or stale is replaced, not reported: the
	// serving pair is derived state that can always be issued again.
	if cert, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && ca.servingUpToDate(cert.Leaf, sans) {
		return cert, nil
	}

	commonName := "localhost"
	if len(hosts) > 0 {
		commonName = hosts[0]
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		NotBefore:   time.Now().Add(-clockSkew),
		NotAfter:    time.Now().Add(servingValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range sans {
		if ip, err := netip.ParseAddr(h); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issueFiles(tmpl, certPath, keyPath)
}

// servingUpToDate reports whether leaf was issued by ca for exactly sans
// (normalized) and stays valid for longer than servingRenewBefore.
func (ca *CA) servingUpToDate(leaf *x509.Certificate, sans []string) bool {
	if leaf == nil || leaf.CheckSignatureFrom(ca.Cert) != nil || time.Until(leaf.NotAfter) < servingRenewBefore {
		return false
	}
	have := make([]string, 0, len(leaf.DNSNames)+len(leaf.IPAddresses))
	have = append(have, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		have = append(have, ip.String())
	}
	have, err := normalizeHosts(have)
	return err == nil && slices.Equal(have, sans)
}

// normalizeHosts returns hosts canonicalized (IP addresses in their shortest
// form, DNS names in lower case), sorted and without duplicates or empty
// entries. A host that is neither an IP address nor a DNS name is an error.
func normalizeHosts(hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h), "["), "]")
		if h == "" {
			continue
		}
		if ip, err := netip.ParseAddr(h); err == nil {
			if ip.Zone() != "" {
				return nil, fmt.Errorf("pki: serving host %q: an IP address with a zone cannot be certified", h)
			}
			out = append(out, ip.Unmap().String())
			continue
		}
		h = strings.ToLower(h)
		if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
			return nil, fmt.Errorf("pki: serving host %q is neither an IP address nor a DNS name", h)
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ServingHosts returns the hosts to certify for a relay called name that
// listens on addrs (host:port): name first, then the host of each address.
// An address without a host or with an unspecified one (0.0.0.0, ::) listens
// everywhere, so it contributes the machine's host name and the non-loopback,
// non-link-local addresses of its interfaces. [CA.EnsureServing] adds the
// loopback hosts.
func ServingHosts(name string, addrs ...string) ([]string, error) {
	hosts := []string{name}
	wildcard := false
	for _, a := range addrs {
		h, _, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("pki: listen address %q: %w", a, err)
		}
		if ip, err := netip.ParseAddr(h); h == "" || (err == nil && ip.IsUnspecified()) {
			wildcard = true
			continue
		}
		hosts = append(hosts, h)
	}
	if !wildcard {
		return hosts, nil
	}
	if h, err := os.Hostname(); err == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(h))) == 0 {
		hosts = append(hosts, h)
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("pki: list interface addresses: %w", err)
	}
	for _, a := range ifaddrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipnet.IP)
		if !ok || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		hosts = append(hosts, ip.Unmap().String())
	}
	return hosts, nil
}

// issueFiles issues a certificate for tmpl and writes it and its new key
// (0600) to certPath and keyPath.
func (ca *CA) issueFiles(tmpl *x509.Certificate, certPath, keyPath string) (tls.Certificate, error) {
	der, key, err := ca.issue(tmpl)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM := encodeCert(der)
	keyPEM, err := encodeKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
