package pki

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
)

func TestJoinTokenValid(t *testing.T) {
	ca, _ := newTestCA(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	token, err := IssueJoinToken(ca, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(token, "."); !strings.HasPrefix(token, JoinTokenPrefix) || len(parts) != 3 {
		t.Fatalf("token %q is not cnp1.<claims>.<signature>", token)
	}
	// White space around a pasted token is forgiven.
	c, err := VerifyJoinToken(ca.Cert, " "+token+"\n", now.Add(59*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == "" || !c.IssuedAt.Equal(now) || !c.Expires.Equal(now.Add(time.Hour)) || c.Role != 0 {
		t.Errorf("claims %+v, want an ID, issued %s, expiring an hour later, any role", c, now)
	}
	if !c.Allows(RoleRegion) || !c.Allows(RoleEdge) {
		t.Error("a token without a role does not allow every role")
	}
	other, err := IssueJoinToken(ca, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := VerifyJoinToken(ca.Cert, other, now); c2.ID == c.ID {
		t.Error("two tokens have the same ID")
	}
}

func TestJoinTokenForRole(t *testing.T) {
	ca, _ := newTestCA(t)
	now := time.Now()
	token, err := IssueJoinTokenForRole(ca, RoleEdge, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := VerifyJoinToken(ca.Cert, token, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Role != RoleEdge || !c.Allows(RoleEdge) || c.Allows(RoleRegion) {
		t.Errorf("claims %+v: want a token for edges only", c)
	}
	if _, err := IssueJoinTokenForRole(ca, ChildRole(7), time.Hour, now); err == nil {
		t.Error("issued a token for an unknown role")
	}
}

func TestJoinTokenExpired(t *testing.T) {
	ca, _ := newTestCA(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	token, err := IssueJoinToken(ca, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{now.Add(time.Minute), now.Add(48 * time.Hour)} {
		_, err := VerifyJoinToken(ca.Cert, token, at)
		if !errors.Is(err, ErrTokenExpired) || errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("at %s: error %v, want ErrTokenExpired", at, err)
		}
		if want := "join token expired at 2026-03-01T12:01:00Z"; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
}

func TestJoinTokenIssuedInFuture(t *testing.T) {
	ca, _ := newTestCA(t)
	now := time.Now()
	token, err := IssueJoinToken(ca, time.Hour, now.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyJoinToken(ca.Cert, token, now); !errors.Is(err, ErrTokenInvalid) || !strings.Contains(err.Error(), "future") {
		t.Errorf("error %v, want an invalid token issued in the future", err)
	}
	// A verifier a little behind the root still accepts it.
	if _, err := VerifyJoinToken(ca.Cert, token, now.Add(6*time.Minute)); err != nil {
		t.Errorf("with 4 minutes of clock skew: %v", err)
	}
}

func TestJoinTokenTampered(t *testing.T) {
	ca, _ := newTestCA(t)
	now := time.Now()
	token, err := IssueJoinToken(ca, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(claims, &p); err != nil {
		t.Fatal(err)
	}
	p["exp"] = now.Add(365 * 24 * time.Hour).Unix()
	forged, _ := json.Marshal(p)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]

	// Flip one bit of the signature as well.
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[len(sig)/2] ^= 1
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	for name, tok := range map[string]string{"payload": tampered, "signature": badSig} {
		_, err := VerifyJoinToken(ca.Cert, tok, now)
		if !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("%s: error %v, want ErrTokenInvalid", name, err)
		}
		if want := "join token signature does not verify against the root CA"; err.Error() != want {
			t.Errorf("%s: error %q, want %q", name, err, want)
		}
	}
}

func TestJoinTokenOtherCA(t *testing.T) {
	ca, _ := newTestCA(t)
	other, _ := newTestCA(t)
	token, err := IssueJoinToken(other, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyJoinToken(ca.Cert, token, time.Now())
	if !errors.Is(err, ErrTokenInvalid) || err.Error() != "join token signature does not verify against the root CA" {
		t.Errorf("error %v, want a signature that does not verify", err)
	}
}

func TestJoinTokenMalformed(t *testing.T) {
	ca, _ := newTestCA(t)
	valid, err := IssueJoinToken(ca, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, claims, _ := strings.Cut(valid, ".")
	claims, sig, _ := strings.Cut(claims, ".")
	for _, tok := range []string{
		"",
		"   ",
		"garbage",
		"cnp1.",
		"cnp1." + claims,
		"cnp1." + claims + ".",
		"cnp1.." + sig,
		"cnp2." + claims + "." + sig,
		"CNP1." + claims + "." + sig,
		"cnp1." + claims + "." + sig + ".extra",
		"cnp1.!!!." + sig,
		"cnp1." + claims + "." + sig + "=",
		"cnp1." + claims + "." + strings.Repeat("A", 3000),
		valid[:len(valid)-1],
	} {
		c, err := VerifyJoinToken(ca.Cert, tok, time.Now())
		if !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("token %.40q: claims %+v, error %v; want ErrTokenInvalid", tok, c, err)
			continue
		}
		if strings.Contains(err.Error(), claims) || strings.Contains(err.Error(), sig) {
			t.Errorf("error %q quotes the token", err)
		}
	}
}

func TestJoinTokenTTL(t *testing.T) {
	ca, _ := newTestCA(t)
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{
		{0, false},
		{-time.Hour, false},
		{59 * time.Second, false},
		{time.Minute, true},
		{DefaultJoinTokenTTL, true},
		{24 * time.Hour, true},
		{24*time.Hour + time.Second, false},
	} {
		_, err := IssueJoinToken(ca, tc.ttl, time.Now())
		if (err == nil) != tc.ok {
			t.Errorf("TTL %s: error %v, want ok=%v", tc.ttl, err, tc.ok)
		}
		if (CheckJoinTokenTTL(tc.ttl) == nil) != tc.ok {
			t.Errorf("CheckJoinTokenTTL(%s) disagrees with IssueJoinToken", tc.ttl)
		}
	}
	if err := CheckJoinTokenTTL(30 * time.Second); err == nil || err.Error() != "must be between 1m and 24h, not 30s" {
		t.Errorf("CheckJoinTokenTTL(30s) = %v", err)
	}
}

func TestJoinTokenOnlyFromRoot(t *testing.T) {
	root, _ := newTestCA(t)
	region := join(t, root, []string{"root"}, "region-a", RoleRegion)
	if _, err := IssueJoinToken(region.ca, time.Hour, time.Now()); err == nil {
		t.Error("an intermediate CA issued a join token")
	}
}

func TestLoadCA(t *testing.T) {
	if _, err := LoadCA(Dir(t.TempDir())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadCA on an empty directory: %v, want fs.ErrNotExist", err)
	}
	ca, dir := newTestCA(t)
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) || string(loaded.CertPEM) != string(ca.CertPEM) {
		t.Error("LoadCA returned another CA")
	}
}
