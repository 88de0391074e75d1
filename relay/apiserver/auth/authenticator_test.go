package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/store"
)

const (
	adminToken = "s3cr3t-admin-token"
	issuer     = "https://canopy.example"
)

// testCA is a certificate authority for client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue returns a client certificate for subject with the given extended
// key usage.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// request builds a request with an optional client certificate and
// Authorization header.
func request(cert *x509.Certificate, authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/spaces/s1/api/v1/pods", nil)
	if cert != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	}
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

// fixedClock is a clock tests move by hand.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

func newTestAuthenticator(t *testing.T, st store.Reader, ca *testCA, key *ecdsa.PrivateKey, clock *fixedClock) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(AuthenticatorConfig{AdminToken: adminToken, ClientCAs: ca.pool(), SAKey: key, Store: st, Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	a.now = clock.now
	return a
}

func TestAuthenticate(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	ca, otherCA := newTestCA(t), newTestCA(t)
	clock := &fixedClock{time.Now()}
	a := newTestAuthenticator(t, st, ca, newKey(t), clock)
	putObject(t, st, "s1", makeServiceAccount("default", "robot", "uid-1"))

	alice := ca.issue(t, pkix.Name{CommonName: "alice", Organization: []string{"dev", "ops"}}, x509.ExtKeyUsageClientAuth)
	serverCert := ca.issue(t, pkix.Name{CommonName: "alice"}, x509.ExtKeyUsageServerAuth)
	noCN := ca.issue(t, pkix.Name{Organization: []string{"dev"}}, x509.ExtKeyUsageClientAuth)
	stranger := otherCA.issue(t, pkix.Name{CommonName: "mallory", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth)

	token, _, err := a.IssueServiceAccountToken("s1", "default", "robot", "uid-1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	jti := claimsOf(t, token)["jti"].(string)
	robot := &user.DefaultInfo{
		Name:   "system:serviceaccount:default:robot",
		UID:    "uid-1",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
		Extra:  map[string][]string{user.CredentialIDKey: {"JTI=" + jti}},
	}
	admin := &user.DefaultInfo{Name: "canopy:admin", Groups: []string{"system:masters", "system:authenticated"}}

	tests := []struct {
		name  string
		r     *http.Request
		space string
		want  user.Info // nil: ErrUnauthenticated
	}{
		{"admin token", request(nil, "Bearer "+adminToken), "s1", admin},
		{"admin token, any space", request(nil, "Bearer "+adminToken), "s2", admin},
		{"lower-case scheme", request(nil, "bearer "+adminToken), "s1", admin},
		{"two spaces: empty token, as kube", request(nil, "Bearer  "+adminToken), "s1", nil},
		{"bad token", request(nil, "Bearer nope"), "s1", nil},
		{"admin token prefix", request(nil, "Bearer "+adminToken[:5]), "s1", nil},
		{"basic auth", request(nil, "Basic YWRtaW46YWRtaW4="), "s1", nil},
		{"empty bearer", request(nil, "Bearer"), "s1", nil},
		{"no credentials", request(nil, ""), "s1", nil},
		{"client certificate", request(alice, ""), "s1", &user.DefaultInfo{
			Name:   "alice",
			Groups: []string{"dev", "ops", "system:authenticated"},
			Extra:  map[string][]string{user.CredentialIDKey: {"X509SHA256=" + fingerprint(alice)}},
		}},
		{"certificate wins over token", request(alice, "Bearer "+adminToken), "s1", &user.DefaultInfo{
			Name:   "alice",
			Groups: []string{"dev", "ops", "system:authenticated"},
			Extra:  map[string][]string{user.CredentialIDKey: {"X509SHA256=" + fingerprint(alice)}},
		}},
		{"certificate of another CA", request(stranger, ""), "s1", nil},
		{"certificate of another CA, then token", request(stranger, "Bearer "+adminToken), "s1", admin},
		{"server certificate", request(serverCert, ""), "s1", nil},
		{"certificate without CN", request(noCN, ""), "s1", nil},
		{"service account token", request(nil, "Bearer "+token), "s1", robot},
		{"service account token, wrong space", request(nil, "Bearer "+token), "s2", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(tt.r, tt.space)
			if tt.want == nil {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("got %v, %v; want ErrUnauthenticated", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestServiceAccountTokenLifecycle(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	key := newKey(t)
	clock := &fixedClock{time.Now()}
	a := newTestAuthenticator(t, st, newTestCA(t), key, clock)
	putObject(t, st, "s1", makeServiceAccount("default", "robot", "uid-1"))
	authn := func(token, space string) error {
		_, err := a.Authenticate(request(nil, "Bearer "+token), space)
		return err
	}
	token, exp, err := a.IssueServiceAccountToken("s1", "default", "robot", "uid-1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := authn(token, "s1"); err != nil {
		t.Fatalf("fresh token: %v", err)
	}

	t.Run("expiry", func(t *testing.T) {
		defer func(t0 time.Time) { clock.t = t0 }(clock.t)
		clock.t = exp.Add(30 * time.Second) // within the leeway
		if err := authn(token, "s1"); err != nil {
			t.Errorf("within leeway: %v", err)
		}
		clock.t = exp.Add(2 * time.Minute)
		if err := authn(token, "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("expired: %v", err)
		}
	})
	t.Run("not yet valid", func(t *testing.T) {
		defer func(t0 time.Time) { clock.t = t0 }(clock.t)
		clock.t = clock.t.Add(-5 * time.Minute)
		if err := authn(token, "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("before nbf: %v", err)
		}
	})
	t.Run("other audience", func(t *testing.T) {
		vault, _, err := a.IssueServiceAccountToken("s1", "default", "robot", "uid-1", []string{"vault"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := authn(vault, "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token for another audience: %v", err)
		}
	})
	t.Run("other key", func(t *testing.T) {
		other := newTestAuthenticator(t, st, newTestCA(t), newKey(t), clock)
		forged, _, err := other.IssueServiceAccountToken("s1", "default", "robot", "uid-1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := authn(forged, "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token signed by another key: %v", err)
		}
	})
	t.Run("tampered", func(t *testing.T) {
		parts := strings.Split(token, ".")
		claims := claimsOf(t, token)
		claims["canopy.dev"].(map[string]any)["space"] = "s2"
		payload, _ := json.Marshal(claims)
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
		if err := authn(forged, "s2"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("tampered token: %v", err)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		parts := strings.Split(token, ".")
		header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
		if err := authn(header+"."+parts[1]+".", "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("alg none: %v", err)
		}
	})
	t.Run("being deleted", func(t *testing.T) {
		sa := makeServiceAccount("default", "robot", "uid-1")
		gone := metav1.NewTime(clock.t.Add(-2 * time.Minute))
		sa.DeletionTimestamp = &gone
		putObject(t, st, "s1", sa)
		defer putObject(t, st, "s1", makeServiceAccount("default", "robot", "uid-1"))
		if err := authn(token, "s1"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("service account being deleted: %v", err)
		}
	})

	// Deleted, then recreated with a new uid.
	deleteObject(t, st, "s1", makeServiceAccount("default", "robot", ""))
	if err := authn(token, "s1"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("service account deleted: %v", err)
	}
	putObject(t, st, "s1", makeServiceAccount("default", "robot", "uid-2"))
	if err := authn(token, "s1"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("service account recreated: %v", err)
	}
	fresh, _, err := a.IssueServiceAccountToken("s1", "default", "robot", "uid-2", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := authn(fresh, "s1"); err != nil {
		t.Errorf("token of the new service account: %v", err)
	}
	// The same ServiceAccount in another space is another ServiceAccount.
	putObject(t, st, "s2", makeServiceAccount("default", "robot", "uid-2"))
	if err := authn(fresh, "s2"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("token used in another space: %v", err)
	}
}

func TestIssueServiceAccountToken(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	clock := &fixedClock{time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)}
	a := newTestAuthenticator(t, st, newTestCA(t), newKey(t), clock)
	now := clock.t.Truncate(time.Second)

	tests := []struct {
		name      string
		audiences []string
		ttl       time.Duration
		wantTTL   time.Duration
		wantAud   []any
	}{
		{"defaults", nil, 0, time.Hour, []any{issuer}},
		{"minimum", []string{"vault", issuer}, 10 * time.Minute, 10 * time.Minute, []any{"vault", issuer}},
		{"capped", nil, 100 * time.Hour, 48 * time.Hour, []any{issuer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, exp, err := a.IssueServiceAccountToken("s1", "ns", "sa", "uid-9", tt.audiences, tt.ttl)
			if err != nil {
				t.Fatal(err)
			}
			if want := now.Add(tt.wantTTL); !exp.Equal(want) {
				t.Errorf("exp = %v, want %v", exp, want)
			}
			c := claimsOf(t, token)
			want := map[string]any{
				"iss": issuer,
				"sub": "system:serviceaccount:ns:sa",
				"aud": tt.wantAud,
				"exp": float64(now.Add(tt.wantTTL).Unix()),
				"nbf": float64(now.Unix()),
				"iat": float64(now.Unix()),
				"jti": c["jti"],
				"canopy.dev": map[string]any{
					"space":          "s1",
					"namespace":      "ns",
					"serviceaccount": map[string]any{"name": "sa", "uid": "uid-9"},
				},
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("claims\n%v\nwant\n%v", c, want)
			}
			if jti, _ := c["jti"].(string); len(jti) != 36 {
				t.Errorf("jti %q is not a UUID", jti)
			}
			h := headerOf(t, token)
			if h["alg"] != "ES256" || h["kid"] == "" {
				t.Errorf("header %v", h)
			}
		})
	}

	if _, _, err := a.IssueServiceAccountToken("s1", "ns", "sa", "uid-9", nil, 9*time.Minute); !errors.Is(err, ErrTokenTTL) {
		t.Errorf("9 minutes: %v, want ErrTokenTTL", err)
	}
	if _, _, err := a.IssueServiceAccountToken("s1", "ns", "sa", "", nil, 0); err == nil {
		t.Error("token without uid issued")
	}
	noKey, err := NewAuthenticator(AuthenticatorConfig{AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := noKey.IssueServiceAccountToken("s1", "ns", "sa", "uid", nil, 0); err == nil {
		t.Error("token issued without a key")
	}
}

func TestNewAuthenticatorChecksConfig(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]AuthenticatorConfig{
		"P-384 key":      {SAKey: p384, Store: st, Issuer: issuer},
		"key, no store":  {SAKey: newKey(t), Issuer: issuer},
		"key, no issuer": {SAKey: newKey(t), Store: st},
	} {
		if _, err := NewAuthenticator(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Everything off: nothing authenticates.
	a, err := NewAuthenticator(AuthenticatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(request(nil, "Bearer "), "s1"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("zero config: %v", err)
	}
	if _, err := a.Authenticate(request(nil, "Bearer x"), "s1"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("zero config: %v", err)
	}
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// claimsOf and headerOf decode a JWT's parts without checking it.
func claimsOf(t *testing.T, token string) map[string]any { return jwtPart(t, token, 1) }

func headerOf(t *testing.T, token string) map[string]any { return jwtPart(t, token, 0) }

func jwtPart(t *testing.T, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
