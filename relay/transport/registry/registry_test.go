package registry

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/join"
)

type fixture struct {
	t   *testing.T
	ca  *pki.CA
	st  *store.Store
	reg *Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	reg := New(Config{Store: st, Root: ca.Cert, RootName: "root", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &fixture{t: t, ca: ca, st: st, reg: reg}
}

// token issues a token with limits and records it, as "relay token
// create" does.
func (f *fixture) token(l pki.JoinLimits) (string, pki.JoinClaims) {
	f.t.Helper()
	tok, claims, err := pki.IssueLimitedJoinToken(f.ca, l, time.Hour, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := RecordToken(context.Background(), f.st, claims); err != nil {
		f.t.Fatal(err)
	}
	return tok, claims
}

// relayKey is a relay's key pair.
type relayKey struct {
	t   *testing.T
	key *ecdsa.PrivateKey
	der []byte
}

func key(t *testing.T) *relayKey {
	t.Helper()
	k, err := pki.NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := pki.PublicKeyDER(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return &relayKey{t: t, key: k, der: der}
}

func (k *relayKey) id() string { return pki.KeyIDOfDER(k.der) }

func joinAs(name string, k *relayKey, token string, path ...string) join.Registration {
	return join.Registration{Join: true, Name: name, Role: pki.RoleEdge, Path: append(append([]string{"root"}, path...), name), PublicKey: k.der, Token: token}
}

// linkAs is the registration of a link of name at path, with a link
// proof by k made now.
func linkAs(name string, k *relayKey, path ...string) join.Registration {
	return k.linkAt(time.Now(), name, path...)
}

func (k *relayKey) linkAt(at time.Time, name string, path ...string) join.Registration {
	k.t.Helper()
	r := join.Registration{Name: name, Role: pki.RoleEdge, Path: append(append([]string{"root"}, path...), name), PublicKey: k.der, ProofTime: at.UnixNano()}
	var err error
	if r.Proof, err = pki.SignLinkProof(k.key, r.Path, r.ProofTime); err != nil {
		k.t.Fatal(err)
	}
	return r
}

func (f *fixture) uses(id string) int {
	f.t.Helper()
	rec, err := readToken(f.st, id)
	if err != nil {
		f.t.Fatal(err)
	}
	n, err := rec.uses()
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// A name joins once: a second join with another key is refused, with a
// message that says how an admin re-keys it; the same join again (a lost
// answer) is accepted.
func TestJoinNameOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, claims := f.token(pki.JoinLimits{})
	real := key(t)
	gen, err := f.reg.Register(ctx, joinAs("e3", real, tok, "region-a"))
	if err != nil || gen == 0 {
		t.Fatalf("first join: generation %d, %v", gen, err)
	}
	if again, err := f.reg.Register(ctx, joinAs("e3", real, tok, "region-a")); err != nil || again != gen {
		t.Fatalf("the same join again: generation %d, %v; want %d, nil", again, err, gen)
	}
	_, err = f.reg.Register(ctx, joinAs("e3", key(t), tok, "region-b"))
	if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "relay token create --rekey --names=e3") {
		t.Fatalf("an impostor's join: %v; want ErrNameTaken saying how to re-key", err)
	}
	rec, _, err := ReadRelay(f.st, "e3")
	if err != nil || rec.Key != real.id() || strings.Join(rec.Home, "/") != "root/region-a/e3" {
		t.Fatalf("record after the impostor: %+v, %v", rec, err)
	}
	if n := f.uses(claims.ID); n != 1 {
		t.Errorf("token used %d times, want 1", n)
	}
	// The root's name and a name on the relay's own path are never free.
	for _, r := range []join.Registration{joinAs("root", key(t), tok), joinAs("region-a", key(t), tok, "region-a")} {
		if _, err := f.reg.Register(ctx, r); err == nil {
			t.Errorf("join %s at %s accepted", r.Name, strings.Join(r.Path, "/"))
		}
	}
}

// Only a token made with --rekey and naming the relay gives a joined name
// a new key; the old key is then refused when it links.
func TestRekey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, _ := f.token(pki.JoinLimits{})
	old := key(t)
	first, err := f.reg.Register(ctx, joinAs("e3", old, tok, "region-a"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := f.token(pki.JoinLimits{Rekey: true, Names: []string{"e4"}})
	if _, err := f.reg.Register(ctx, joinAs("e3", key(t), other, "region-a")); err == nil {
		t.Fatal("a re-key token for e4 re-keyed e3")
	}
	rekey, _ := f.token(pki.JoinLimits{Rekey: true, Names: []string{"e3"}})
	fresh := key(t)
	gen, err := f.reg.Register(ctx, joinAs("e3", fresh, rekey, "region-a"))
	if err != nil || gen <= first {
		t.Fatalf("re-key: generation %d (was %d), %v", gen, first, err)
	}
	if _, err := f.reg.Register(ctx, linkAs("e3", old, "region-a")); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("the old key linked: %v, want ErrKeyMismatch", err)
	}
	if _, err := f.reg.Register(ctx, linkAs("e3", fresh, "region-a")); err != nil {
		t.Errorf("the new key: %v", err)
	}
}

// A token is refused once its record is gone (revoked), once used up, and
// for names or roles it does not allow; a token signed by the root but
// never recorded is refused too.
func TestTokenLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	once, onceClaims := f.token(pki.JoinLimits{MaxUses: 1})
	if _, err := f.reg.Register(ctx, joinAs("a", key(t), once)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(ctx, joinAs("b", key(t), once)); !errors.Is(err, ErrTokenRefused) || !strings.Contains(err.Error(), "used 1 times") {
		t.Errorf("second use of a one-use token: %v", err)
	}
	if n := f.uses(onceClaims.ID); n != 1 {
		t.Errorf("uses %d, want 1", n)
	}

	named, _ := f.token(pki.JoinLimits{Names: []string{"c"}, Role: pki.RoleEdge})
	if _, err := f.reg.Register(ctx, joinAs("d", key(t), named)); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("a name the token does not allow: %v", err)
	}
	region := joinAs("c", key(t), named)
	region.Role = pki.RoleRegion
	if _, err := f.reg.Register(ctx, region); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("a role the token does not allow: %v", err)
	}
	if _, err := f.reg.Register(ctx, joinAs("c", key(t), named)); err != nil {
		t.Errorf("the name it allows: %v", err)
	}

	revoked, claims := f.token(pki.JoinLimits{})
	if _, err := f.st.Delete(ctx, TokenKey(claims.ID), 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(ctx, joinAs("e", key(t), revoked)); !errors.Is(err, ErrTokenRefused) || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("a revoked token: %v", err)
	}
	unrecorded, err := pki.IssueJoinToken(f.ca, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(ctx, joinAs("e", key(t), unrecorded)); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("an unrecorded token: %v", err)
	}
}

// Many joins at once with one limited token: exactly its limit succeed,
// and its record counts them.
func TestConcurrentJoinsCountUses(t *testing.T) {
	f := newFixture(t)
	tok, claims := f.token(pki.JoinLimits{MaxUses: 40})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 100 {
		wg.Go(func() {
			_, err := f.reg.Register(context.Background(), joinAs(fmt.Sprintf("e%d", i), key(t), tok))
			if err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !errors.Is(err, ErrTokenRefused) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok != 40 || f.uses(claims.ID) != 40 {
		t.Errorf("%d joins succeeded, record says %d uses; want 40 and 40", ok, f.uses(claims.ID))
	}
}

// A link checks the key and records the home; the generation grows only
// when the home changes. A relay without a record (joined before the
// registry) is recorded with the key it presents.
func TestLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, _ := f.token(pki.JoinLimits{})
	k := key(t)
	g1, err := f.reg.Register(ctx, joinAs("e3", k, tok, "region-a"))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := f.reg.Register(ctx, linkAs("e3", k, "region-a")); err != nil || g != g1 {
		t.Fatalf("link at its home: %d, %v; want %d", g, err, g1)
	}
	g2, err := f.reg.Register(ctx, linkAs("e3", k, "region-b"))
	if err != nil || g2 <= g1 {
		t.Fatalf("link at a sibling: %d, %v; want more than %d", g2, err, g1)
	}
	g3, err := f.reg.Register(ctx, linkAs("e3", k, "region-a"))
	if err != nil || g3 <= g2 {
		t.Fatalf("link back: %d, %v; want more than %d", g3, err, g2)
	}
	if _, err := f.reg.Register(ctx, linkAs("e3", key(t), "region-b")); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("another key: %v, want ErrKeyMismatch", err)
	}
	if rec, _, _ := ReadRelay(f.st, "e3"); rec.Generation != g3 || strings.Join(rec.Home, "/") != "root/region-a/e3" {
		t.Errorf("record %+v after a refused link", rec)
	}
	old := key(t)
	if _, err := f.reg.Register(ctx, linkAs("veteran", old, "region-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(ctx, linkAs("veteran", key(t), "region-a")); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("a second key for a recorded veteran: %v", err)
	}
}

// A relay moves to another home only with a link proof by its own key,
// of that home, newer than the one that made its last move: a parent that
// knows a relay's public key (it is in its certificate) cannot move it,
// nor replay a proof it once saw.
func TestLinkProofs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, _ := f.token(pki.JoinLimits{})
	k := key(t)
	if _, err := f.reg.Register(ctx, joinAs("e3", k, tok, "region-a")); err != nil {
		t.Fatal(err)
	}
	old := k.linkAt(time.Now().Add(-time.Minute), "e3", "region-b")
	if _, err := f.reg.Register(ctx, linkAs("e3", k, "region-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(ctx, linkAs("e3", k, "region-a")); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]join.Registration{
		"no proof":            {Name: "e3", Role: pki.RoleEdge, Path: []string{"root", "region-b", "e3"}, PublicKey: k.der},
		"a proof of region-a": withPath(linkAs("e3", k, "region-a"), "root", "region-b", "e3"),
		"another key's proof": withKey(linkAs("e3", key(t), "region-b"), k.der),
		"a replayed proof":    old,
		"a proof from afar":   k.linkAt(time.Now().Add(time.Hour), "e3", "region-b"),
	} {
		if _, err := f.reg.Register(ctx, r); !errors.Is(err, ErrKeyMismatch) {
			t.Errorf("%s: %v, want ErrKeyMismatch", name, err)
		}
	}
	if rec, _, _ := ReadRelay(f.st, "e3"); strings.Join(rec.Home, "/") != "root/region-a/e3" {
		t.Errorf("home %v after refused moves", rec.Home)
	}
}

func withPath(r join.Registration, path ...string) join.Registration { r.Path = path; return r }
func withKey(r join.Registration, der []byte) join.Registration      { r.PublicKey = der; return r }

func TestInvalidRegistrations(t *testing.T) {
	f := newFixture(t)
	k := key(t).der
	for _, r := range []join.Registration{
		{Name: "e", Role: pki.RoleEdge, Path: []string{"other", "e"}, PublicKey: k},
		{Name: "e", Role: pki.RoleEdge, Path: []string{"root", "f"}, PublicKey: k},
		{Name: "e", Role: pki.RoleEdge, Path: []string{"e"}, PublicKey: k},
		{Name: "e", Role: pki.RoleEdge, Path: []string{"root", "e"}},
		{Name: "e", Path: []string{"root", "e"}, PublicKey: k},
	} {
		if _, err := f.reg.Register(context.Background(), r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
}
