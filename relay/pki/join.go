package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Join token lifetimes: [IssueJoinToken] accepts a TTL from MinJoinTokenTTL
// to MaxJoinTokenTTL; "relay token create" defaults to DefaultJoinTokenTTL.
const (
	DefaultJoinTokenTTL = time.Hour
	MinJoinTokenTTL     = time.Minute
	MaxJoinTokenTTL     = 24 * time.Hour
)

// JoinTokenPrefix starts every join token; it names the format version.
const JoinTokenPrefix = "cnp1."

const (
	// maxJoinTokenLen bounds what VerifyJoinToken decodes: real tokens are
	// about 250 characters.
	maxJoinTokenLen = 2048
	// joinTokenSkew is how far in the future a token's issue time may be,
	// for a verifier whose clock is behind the root's.
	joinTokenSkew = 5 * time.Minute
)

// Join token errors. Errors returned by [VerifyJoinToken] match one of them
// with errors.Is; their messages are meant for the joining relay's operator
// and never contain the token.
var (
	ErrTokenExpired = errors.New("join token expired")
	ErrTokenInvalid = errors.New("invalid join token")
)

// tokenError is a join token error with its own message that matches its
// sentinel with errors.Is.
type tokenError struct {
	sentinel error
	msg      string
}

func (e *tokenError) Error() string { return e.msg }
func (e *tokenError) Unwrap() error { return e.sentinel }

func invalidToken(format string, args ...any) error {
	return &tokenError{ErrTokenInvalid, fmt.Sprintf(format, args...)}
}

// JoinClaims is what a join token says.
type JoinClaims struct {
	// ID is random (16 bytes, base64url) and identifies the token in logs
	// and audit records; it is not a secret.
	ID       string
	IssuedAt time.Time
	Expires  time.Time
	// Role restricts the token to relays joining with that role; zero
	// allows any role.
	Role ChildRole
}

// Allows reports whether the token may be used to join with role.
func (c JoinClaims) Allows(role ChildRole) bool { return c.Role == 0 || c.Role == role }

// joinPayload is the JSON encoding of JoinClaims inside a token.
type joinPayload struct {
	ID       string `json:"jti"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
	Role     string `json:"role,omitempty"`
}

// CheckJoinTokenTTL returns an error, "must be between 1m and 24h, not
// TTL", unless MinJoinTokenTTL <= ttl <= MaxJoinTokenTTL.
func CheckJoinTokenTTL(ttl time.Duration) error {
	if ttl < MinJoinTokenTTL || ttl > MaxJoinTokenTTL {
		return fmt.Errorf("must be between 1m and 24h, not %s", ttl)
	}
	return nil
}

// IssueJoinToken returns a join token valid from now for ttl (see
// [CheckJoinTokenTTL]) for a relay of any role. ca must be the root CA: a
// token is
//
//	cnp1.<base64url(JSON claims)>.<base64url(ASN.1 ECDSA signature)>
//
// where the signature, by the root CA key, covers SHA-256 of everything
// before the last dot. Any relay holding the root CA certificate verifies it
// with [VerifyJoinToken], so a token works at any tier. A token is a bearer
// credential usable any number of times until it expires: keep it as
// private as a password, and keep its TTL short.
func IssueJoinToken(ca *CA, ttl time.Duration, now time.Time) (string, error) {
	return IssueJoinTokenForRole(ca, 0, ttl, now)
}

// IssueJoinTokenForRole is [IssueJoinToken] for a token that only a relay
// joining with role may use (see [JoinClaims.Allows]); role 0 allows any.
func IssueJoinTokenForRole(ca *CA, role ChildRole, ttl time.Duration, now time.Time) (string, error) {
	if err := CheckJoinTokenTTL(ttl); err != nil {
		return "", fmt.Errorf("pki: join token TTL %w", err)
	}
	if role != 0 && !role.valid() {
		return "", fmt.Errorf("pki: join token for unknown role %d", int(role))
	}
	if !isRoot(ca.Cert) {
		return "", errors.New("pki: join tokens are signed by the root CA; this CA is an intermediate")
	}
	if _, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey); !ok {
		return "", errors.New("pki: join tokens need an ECDSA root CA key")
	}
	id := make([]byte, 16)
	rand.Read(id) // never fails; see crypto/rand.Read
	p := joinPayload{
		ID:       base64.RawURLEncoding.EncodeToString(id),
		IssuedAt: now.Unix(),
		Expires:  now.Add(ttl).Unix(),
	}
	if role != 0 {
		p.Role = role.String()
	}
	claims, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	signed := JoinTokenPrefix + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := ca.Key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("pki: sign join token: %w", err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// VerifyJoinToken checks that token was issued by the CA whose certificate
// is root and has not expired at now, and returns its claims. Errors match
// [ErrTokenExpired] ("join token expired at 2006-01-02T15:04:05Z") or
// [ErrTokenInvalid] (malformed, signed by another CA, issued in the future).
// Surrounding white space is ignored.
func VerifyJoinToken(root *x509.Certificate, token string, now time.Time) (JoinClaims, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return JoinClaims{}, invalidToken("join token is empty")
	}
	if len(token) > maxJoinTokenLen {
		return JoinClaims{}, invalidToken("malformed join token: longer than %d characters", maxJoinTokenLen)
	}
	rest, ok := strings.CutPrefix(token, JoinTokenPrefix)
	if !ok {
		return JoinClaims{}, invalidToken("malformed join token: it does not start with %q", JoinTokenPrefix)
	}
	claimsB64, sigB64, ok := strings.Cut(rest, ".")
	if !ok || claimsB64 == "" || sigB64 == "" || strings.Contains(sigB64, ".") {
		return JoinClaims{}, invalidToken("malformed join token: want %s<claims>.<signature>", JoinTokenPrefix)
	}
	claims, err1 := base64.RawURLEncoding.Strict().DecodeString(claimsB64)
	sig, err2 := base64.RawURLEncoding.Strict().DecodeString(sigB64)
	if err1 != nil || err2 != nil {
		return JoinClaims{}, invalidToken("malformed join token: not base64url")
	}
	pub, ok := root.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return JoinClaims{}, invalidToken("join token cannot be verified: the root CA key is not ECDSA")
	}
	digest := sha256.Sum256([]byte(token[:len(JoinTokenPrefix)+len(claimsB64)]))
	if !ecdsa.VerifyASN1(pub, digest[:], sig) {
		return JoinClaims{}, invalidToken("join token signature does not verify against the root CA")
	}

	// The root signed these claims; a decoding failure is a bug at the root,
	// still reported as an invalid token.
	var p joinPayload
	dec := json.NewDecoder(bytes.NewReader(claims))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.ID == "" || p.Expires <= p.IssuedAt {
		return JoinClaims{}, invalidToken("malformed join token: bad claims")
	}
	c := JoinClaims{ID: p.ID, IssuedAt: time.Unix(p.IssuedAt, 0).UTC(), Expires: time.Unix(p.Expires, 0).UTC()}
	if p.Role != "" {
		var err error
		if c.Role, err = ParseChildRole(p.Role); err != nil {
			return JoinClaims{}, invalidToken("malformed join token: unknown role %q", p.Role)
		}
	}
	if !now.Before(c.Expires) {
		return JoinClaims{}, &tokenError{ErrTokenExpired, "join token expired at " + c.Expires.Format(time.RFC3339)}
	}
	if now.Add(joinTokenSkew).Before(c.IssuedAt) {
		return JoinClaims{}, invalidToken("join token issued in the future, at %s: check the clocks", c.IssuedAt.Format(time.RFC3339))
	}
	return c, nil
}

// LoadCA loads the CA stored in dir (DIR/pki) without ever creating one, as
// commands that only read a root's PKI need. A missing certificate is an
// error that matches fs.ErrNotExist.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := readFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	return LoadCAFromPEM(certPEM, keyPEM)
}

// isRoot reports whether cert is self-signed.
func isRoot(cert *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, cert.RawSubject) && cert.CheckSignatureFrom(cert) == nil
}
