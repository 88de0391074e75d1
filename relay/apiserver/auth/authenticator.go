package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
)

// AdminUser is the user name the admin token authenticates as.
const AdminUser = "canopy:admin"

// AuthenticatorConfig says which credentials the API accepts. Each kind of
// credential is off while its field (AdminToken, ClientCAs, SAKey) is zero;
// the zero AuthenticatorConfig authenticates nobody.
type AuthenticatorConfig struct {
	// AdminToken is a bearer token that authenticates as AdminUser in the
	// groups system:masters and system:authenticated. Empty: no admin token.
	AdminToken string
	// ClientCAs verifies client certificates (with the client-auth extended
	// key usage). The certificate's CommonName is the user name and its
	// Organizations are the groups. Nil: certificates are ignored.
	ClientCAs *x509.CertPool
	// SAKey signs the ServiceAccount tokens IssueServiceAccountToken issues
	// (ES256, so a P-256 key); its public half verifies them. Nil: no
	// ServiceAccount tokens are issued or accepted.
	SAKey *ecdsa.PrivateKey
	// Store is read to check that the ServiceAccount a token names still
	// exists with the UID it had when the token was issued. Required with
	// SAKey.
	Store store.Reader
	// Issuer is the iss claim of ServiceAccount tokens and the default
	// audience of issued tokens. A token is accepted only if its audiences
	// include Issuer, as kube-apiserver accepts only tokens for its
	// --api-audiences (which default to its issuer). Required with SAKey.
	Issuer string
}

// Authenticator turns the credentials of a request into a user. It is
// immutable after NewAuthenticator and safe for concurrent use.
type Authenticator struct {
	adminDigest [sha256.Size]byte // SHA-256 of the admin token, when hasAdmin
	hasAdmin    bool
	clientCAs   *x509.CertPool
	saKey       *ecdsa.PrivateKey
	keyID       string // kid header of issued tokens
	st          store.Reader
	issuer      string
	now         func() time.Time
}

// NewAuthenticator checks cfg and returns an Authenticator for it.
func NewAuthenticator(cfg AuthenticatorConfig) (*Authenticator, error) {
	a := &Authenticator{
		clientCAs: cfg.ClientCAs,
		saKey:     cfg.SAKey,
		st:        cfg.Store,
		issuer:    cfg.Issuer,
		now:       time.Now,
	}
	if cfg.AdminToken != "" {
		a.adminDigest = sha256.Sum256([]byte(cfg.AdminToken))
		a.hasAdmin = true
	}
	if cfg.SAKey != nil {
		switch {
		case cfg.SAKey.Curve != elliptic.P256():
			return nil, errors.New("auth: SAKey must be a P-256 key (tokens are signed with ES256)")
		case cfg.Store == nil:
			return nil, errors.New("auth: SAKey needs a Store to check ServiceAccounts")
		case cfg.Issuer == "":
			return nil, errors.New("auth: SAKey needs an Issuer")
		}
		der, err := x509.MarshalPKIXPublicKey(&cfg.SAKey.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("auth: encoding SAKey's public key: %w", err)
		}
		sum := sha256.Sum256(der)
		a.keyID = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return a, nil
}

// Authenticate returns the user that made r, a request to space. It tries,
// in order, a client certificate and an Authorization: Bearer token (the
// admin token, then a ServiceAccount token issued for this space). A request
// with no usable credentials gets an error wrapping ErrUnauthenticated; a
// store failure while checking a ServiceAccount is returned as is.
func (a *Authenticator) Authenticate(r *http.Request, space string) (user.Info, error) {
	u, certErr := a.certificateUser(r)
	if u != nil {
		return u, nil
	}
	if token, ok := bearerToken(r.Header); ok {
		return a.tokenUser(token, space)
	}
	if certErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthenticated, certErr)
	}
	return nil, fmt.Errorf("%w: no credentials", ErrUnauthenticated)
}

// certificateUser returns the user named by r's client certificate, nil and
// no error when r has none (or certificates are off), or why it was refused.
// The chain is verified here against ClientCAs, as kube's x509 authenticator
// does, rather than trusting the listener: its tls.Config may trust other CAs.
func (a *Authenticator) certificateUser(r *http.Request) (user.Info, error) {
	if a.clientCAs == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, nil
	}
	// Only certificates issued directly by the root CA name kube users: the
	// intermediates a client sends are ignored, because relay regions hold
	// intermediate CAs (for their children's link certificates) and must
	// not be able to mint API users. Relay link certificates themselves
	// are not API credentials either.
	leaf := r.TLS.PeerCertificates[0]
	opts := x509.VerifyOptions{
		Roots:       a.clientCAs,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		CurrentTime: a.now(),
	}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("verifying client certificate: %w", err)
	}
	if id, err := pki.IdentityFromCert(leaf); err == nil {
		return nil, fmt.Errorf("client certificate of relay %s is a link identity, not an API credential", id)
	}
	if leaf.Subject.CommonName == "" {
		return nil, errors.New("client certificate has no common name")
	}
	sum := sha256.Sum256(leaf.Raw)
	return &user.DefaultInfo{
		Name:   leaf.Subject.CommonName,
		Groups: withAuthenticated(leaf.Subject.Organization),
		Extra:  map[string][]string{user.CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(sum[:])}},
	}, nil
}

// tokenUser authenticates a bearer token.
func (a *Authenticator) tokenUser(token, space string) (user.Info, error) {
	if a.hasAdmin {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], a.adminDigest[:]) == 1 {
			return &user.DefaultInfo{
				Name:   AdminUser,
				Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated},
			}, nil
		}
	}
	if a.saKey == nil {
		return nil, fmt.Errorf("%w: invalid bearer token", ErrUnauthenticated)
	}
	return a.serviceAccountUser(token, space)
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header,
// parsed as kube does (scheme case-insensitive, surrounding space ignored).
func bearerToken(h http.Header) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(h.Get("Authorization")), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// withAuthenticated returns a copy of groups with system:authenticated
// added, unless groups already say whether the user is authenticated (kube's
// AuthenticatedGroupAdder).
func withAuthenticated(groups []string) []string {
	if slices.Contains(groups, user.AllAuthenticated) || slices.Contains(groups, user.AllUnauthenticated) {
		return slices.Clone(groups)
	}
	return append(slices.Clip(groups), user.AllAuthenticated)
}
