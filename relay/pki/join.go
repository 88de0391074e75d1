package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
	// ID is random (16 bytes, lower-case hex) and identifies the token in
	// logs, in its record at the root and to "relay token revoke"; it is
	// not a secret.
	ID       string
	IssuedAt time.Time
	Expires  time.Time
	// Role restricts the token to relays joining with that role; zero
	// allows any role.
	Role ChildRole
	// Names, when set, are the only relay names the token may join.
	Names []string
	// MaxUses, when positive, is how many joins the token allows in all;
	// the root counts them (relay/transport/registry).
	MaxUses int
	// Rekey lets the token join names that are already joined, replacing
	// their keys: an admin's way to give a relay that lost its key (or
	// its data directory) its name back. It requires Names.
	Rekey bool
}

// JoinLimits restricts what a token may do; the zero value restricts
// nothing (any role, any name, any number of joins).
type JoinLimits struct {
	Role    ChildRole
	Names   []string
	MaxUses int
	Rekey   bool
}

// Allows reports whether the token may be used to join with role.
func (c JoinClaims) Allows(role ChildRole) bool { return c.Role == 0 || c.Role == role }

// AllowsName reports whether the token may be used to join as name.
func (c JoinClaims) AllowsName(name string) bool {
	return len(c.Names) == 0 || slices.Contains(c.Names, name)
}

// joinPayload is the JSON encoding of JoinClaims inside a token.
type joinPayload struct {
	ID       string   `json:"jti"`
	IssuedAt int64    `json:"iat"`
	Expires  int64    `json:"exp"`
	Role     string   `json:"role,omitempty"`
	Names    []string `json:"names,omitempty"`
	MaxUses  int      `json:"uses,omitempty"`
	Rekey    bool     `json:"rekey,omitempty"`
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
// credential usable until it expires, as often as its limits allow (see
// [IssueLimitedJoinToken]): keep it as private as a password, and keep
// its TTL short. The root accepts a token
// only while its record exists (relay/transport/registry: "relay token create"
// writes it, "relay token revoke" deletes it).
func IssueJoinToken(ca *CA, ttl time.Duration, now time.Time) (string, error) {
	token, _, err := IssueLimitedJoinToken(ca, JoinLimits{}, ttl, now)
	return token, err
}

// IssueJoinTokenForRole is [IssueJoinToken] for a token that only a relay
// joining with role may use (see [JoinClaims.Allows]); role 0 allows any.
func IssueJoinTokenForRole(ca *CA, role ChildRole, ttl time.Duration, now time.Time) (string, error) {
	token, _, err := IssueLimitedJoinToken(ca, JoinLimits{Role: role}, ttl, now)
	return token, err
}

// CheckJoinLimits checks limits as [IssueLimitedJoinToken] does; its
// errors name the limit (role, names, uses, rekey).
func CheckJoinLimits(l JoinLimits) error {
	if l.Role != 0 && !l.Role.valid() {
		return fmt.Errorf("role: unknown relay role %d", int(l.Role))
	}
	if err := checkPath(l.Names); err != nil {
		return fmt.Errorf("names: %w", err)
	}
	if l.MaxUses < 0 {
		return fmt.Errorf("uses: must not be negative, not %d", l.MaxUses)
	}
	if l.Rekey && len(l.Names) == 0 {
		return errors.New("rekey: a token that re-keys relays must name them")
	}
	return nil
}

// IssueLimitedJoinToken is [IssueJoinToken] for a token restricted by
// limits (see [JoinClaims]); it also returns the token's claims.
func IssueLimitedJoinToken(ca *CA, limits JoinLimits, ttl time.Duration, now time.Time) (string, JoinClaims, error) {
	if err := CheckJoinTokenTTL(ttl); err != nil {
		return "", JoinClaims{}, fmt.Errorf("pki: join token TTL %w", err)
	}
	if err := CheckJoinLimits(limits); err != nil {
		return "", JoinClaims{}, fmt.Errorf("pki: join token %w", err)
	}
	if !isRoot(ca.Cert) {
		return "", JoinClaims{}, errors.New("pki: join tokens are signed by the root CA; this CA is an intermediate")
	}
	if _, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey); !ok {
		return "", JoinClaims{}, errors.New("pki: join tokens need an ECDSA root CA key")
	}
	id := make([]byte, 16)
	rand.Read(id) // never fails; see crypto/rand.Read
	p := joinPayload{
		ID:       hex.EncodeToString(id),
		IssuedAt: now.Unix(),
		Expires:  now.Add(ttl).Unix(),
		Names:    slices.Clone(limits.Names),
		MaxUses:  limits.MaxUses,
		Rekey:    limits.Rekey,
	}
	if limits.Role != 0 {
		p.Role = limits.Role.String()
	}
	claims, err := json.Marshal(p)
	if err != nil {
		return "", JoinClaims{}, err
	}
	signed := JoinTokenPrefix + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := ca.Key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return "", JoinClaims{}, fmt.Errorf("pki: sign join token: %w", err)
	}
	c := p.claims()
	c.Role = limits.Role
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), c, nil
}

// claims returns what p says, with times in UTC.
func (p joinPayload) claims() JoinClaims {
	return JoinClaims{ID: p.ID, IssuedAt: time.Unix(p.IssuedAt, 0).UTC(), Expires: time.Unix(p.Expires, 0).UTC(),
		Names: p.Names, MaxUses: p.MaxUses, Rekey: p.Rekey}
}

// TokenID returns the ID a join token claims, without verifying it (for
// messages about a token that failed to verify); "" if it has none.
func TokenID(token string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(token), JoinTokenPrefix)
	if !ok {
		return ""
	}
	claimsB64, _, _ := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.Strict().DecodeString(claimsB64)
	var p joinPayload
	if err != nil || json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.ID
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
	c := p.claims()
	if err := CheckJoinLimits(JoinLimits{Names: c.Names, MaxUses: c.MaxUses, Rekey: c.Rekey}); err != nil {
		return JoinClaims{}, invalidToken("malformed join token: %v", err)
	}
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
