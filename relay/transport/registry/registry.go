package registry

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/join"
)

// Sentinel errors; Register's refusals match one of them, and
// join.ErrRefused, and say more, for the operator of the relay refused.
// Any other error (the store's, the log's) is transient: the parent asks
// again.
var (
	// ErrNameTaken: the name is joined already, with another key.
	ErrNameTaken error = &refusal{"relay name taken"}
	// ErrKeyMismatch: a relay linked with a certificate whose key (or
	// role) is not the one its name joined with.
	ErrKeyMismatch error = &refusal{"not the key the relay joined with"}
	// ErrTokenRefused: the join token is invalid, expired, revoked, used
	// up, or does not allow this name or role.
	ErrTokenRefused error = &refusal{"join token refused"}
	// ErrInvalid: the request is malformed (a path that does not end with
	// the name or does not start at the root, a bad role).
	ErrInvalid error = &refusal{"invalid registration"}
)

// refusal is a sentinel refusal; it matches join.ErrRefused.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return join.ErrRefused }

// RelayResource holds the relay records, in the system space.
var RelayResource = store.Resource{Group: "registry.canopy.dev", Resource: "relays"}

// RelayKey is the key of name's record.
func RelayKey(name string) store.Key { return store.Key{Resource: RelayResource, Name: name} }

// Relay is a relay record.
type Relay struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Role string `json:"role"`
	// Key is the pki.KeyID of the key the relay joined with, PublicKey
	// that key (PKIX), against which its link proofs are checked.
	Key       string `json:"key"`
	PublicKey []byte `json:"publicKey"`
	// JoinedPath is where it joined; Home is where it is linked now (both
	// from the root's name to its own).
	JoinedPath []string `json:"joinedPath"`
	Home       []string `json:"home"`
	// Generation grows every time Home changes (see the package doc).
	// ProofTime is the time of the link proof that last changed Home: a
	// move needs a newer one, so an old proof replayed moves nothing.
	Generation int64 `json:"generation"`
	ProofTime  int64 `json:"proofTime,omitempty"`
	// Token is the ID of the token it joined with ("" for a relay that
	// joined before the registry and was recorded when it linked).
	Token  string `json:"token,omitempty"`
	Joined int64  `json:"joined"`
}

// ReadRelay returns name's record, or nil.
func ReadRelay(r store.Reader, name string) (*Relay, *store.Object, error) {
	o, err := r.Get(RelayKey(name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var rec Relay
	if err := json.Unmarshal(o.Data, &rec); err != nil {
		return nil, nil, fmt.Errorf("registry: relay record %s: %w", name, err)
	}
	return &rec, o, nil
}

// Config configures a Registry.
type Config struct {
	// Store is the root's store.
	Store *store.Store
	// Root is the root CA certificate, which signs join tokens; RootName
	// is the root's name (the first element of every path), which no
	// relay may take.
	Root     *x509.Certificate
	RootName string
	// ReadIndex, when set (a replica of a cluster of roots), makes what
	// Register reads current: it waits until the store has applied
	// everything committed when the registration arrived, so that a token
	// recorded through another replica, or a move recorded there, is seen.
	ReadIndex ReadIndexer
	Logger    *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// ReadIndexer confirms with the leader of a cluster which log index a
// linearizable read must wait for (consensus.Node implements it).
type ReadIndexer interface {
	ReadIndex(ctx context.Context) (uint64, error)
}

// current waits until the store holds everything committed now.
func (g *Registry) current(ctx context.Context) error {
	if g.cfg.ReadIndex == nil {
		return nil
	}
	idx, err := g.cfg.ReadIndex.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return g.cfg.Store.WaitForRevision(ctx, int64(idx))
}

// Registry records the relays of a tree at its root. It implements
// join.Registrar.
type Registry struct {
	cfg Config
	log *slog.Logger
	// mu guards the joins waiting for a batch (enqueueJoin).
	mu       sync.Mutex
	pending  []*joinCall
	draining bool
}

// New returns a Registry for cfg.
func New(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Registry{cfg: cfg, log: cfg.Logger}
}

// maxAttempts bounds the retries of a registration whose records another
// replica changed meanwhile.
const maxAttempts = 10

// maxJoinBatch bounds the joins decided and written together.
const maxJoinBatch = 256

// Register records r: a join (the name must be free, or the token must
// re-key it) or a link (the key must be the name's). It returns the
// relay's generation.
func (g *Registry) Register(ctx context.Context, r join.Registration) (int64, error) {
	if err := g.check(r); err != nil {
		return 0, err
	}
	if err := g.current(ctx); err != nil {
		return 0, err
	}
	if r.Join {
		return g.enqueueJoin(ctx, r)
	}
	for range maxAttempts {
		gen, ops, err := g.link(r)
		if err != nil || len(ops) == 0 {
			return gen, err
		}
		_, err = g.cfg.Store.Txn(ctx, ops...)
		if retryable(err) {
			continue // another replica wrote meanwhile: decide again
		}
		if err != nil {
			return 0, err
		}
		return gen, nil
	}
	return 0, fmt.Errorf("registry: registering %s: the records kept changing; try again", r.Name)
}

// retryable reports whether a Txn failed because a record it expected
// changed meanwhile.
func retryable(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrNotFound)
}

// joinCall is a join waiting for its batch.
type joinCall struct {
	r    join.Registration
	done chan joinResult // buffered
}

type joinResult struct {
	gen int64
	err error
}

// enqueueJoin queues a join and waits for its outcome. Joins are decided
// and written in batches (one Txn, one update of each token's record):
// the joins of one token all change its record, and ten thousand relays
// joining at once with one token would otherwise retry against each
// other, one log entry each.
func (g *Registry) enqueueJoin(ctx context.Context, r join.Registration) (int64, error) {
	c := &joinCall{r: r, done: make(chan joinResult, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if !g.draining {
		g.draining = true
		go g.drainJoins()
	}
	g.mu.Unlock()
	select {
	case res := <-c.done:
		return res.gen, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// drainJoins writes batches until no join is pending.
func (g *Registry) drainJoins() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), maxJoinBatch)
		if n == 0 {
			g.draining = false
			g.mu.Unlock()
			return
		}
		batch := slices.Clone(g.pending[:n])
		g.pending = g.pending[n:]
		g.mu.Unlock()
		g.joinBatch(batch)
	}
}

// joinTimeout bounds the write of one batch of joins.
const joinTimeout = time.Minute

// joinBatch decides and writes one batch, again when a record changed
// meanwhile, and answers each join.
func (g *Registry) joinBatch(batch []*joinCall) {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	results := make([]joinResult, len(batch))
	var err error
	for range maxAttempts {
		b := newJoinBatch(g)
		for i, c := range batch {
			results[i].gen, results[i].err = b.join(c.r)
		}
		var ops []store.Op
		if ops, err = b.ops(); err != nil {
			break
		}
		if len(ops) == 0 {
			break
		}
		if _, err = g.cfg.Store.Txn(ctx, ops...); !retryable(err) {
			break
		}
	}
	for i, c := range batch {
		if err != nil && results[i].err == nil {
			results[i] = joinResult{err: fmt.Errorf("registry: recording the join of %s: %w", c.r.Name, err)}
		}
		c.done <- results[i]
	}
}

// joinBatch is the state of the records as a batch of joins changes them.
type joinBatch struct {
	g      *Registry
	now    time.Time
	tokens map[string]*batchToken
	// relays are the records the batch writes, by name; cur their
	// versions in the store (nil: created).
	relays map[string]Relay
	cur    map[string]*store.Object
}

type batchToken struct {
	rec  *storedToken
	uses int
}

func newJoinBatch(g *Registry) *joinBatch {
	return &joinBatch{g: g, now: g.cfg.Now(), tokens: map[string]*batchToken{}, relays: map[string]Relay{}, cur: map[string]*store.Object{}}
}

// ops returns the batch's writes.
func (b *joinBatch) ops() ([]store.Op, error) {
	var ops []store.Op
	for _, name := range slices.Sorted(maps.Keys(b.relays)) {
		op, err := recordOp(b.relays[name], b.cur[name])
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	for _, id := range slices.Sorted(maps.Keys(b.tokens)) {
		t := b.tokens[id]
		if n, _ := t.rec.uses(); n == t.uses {
			continue
		}
		op, err := t.rec.withUses(t.uses)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// relay returns name's record as the batch has it.
func (b *joinBatch) relay(name string) (*Relay, error) {
	if rec, ok := b.relays[name]; ok {
		return &rec, nil
	}
	rec, o, err := ReadRelay(b.g.cfg.Store, name)
	if err == nil {
		b.cur[name] = o
	}
	return rec, err
}

// join decides one join of the batch.
func (b *joinBatch) join(r join.Registration) (int64, error) {
	claims, err := pki.VerifyJoinToken(b.g.cfg.Root, r.Token, b.now)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrTokenRefused, err)
	}
	switch {
	case !claims.Allows(r.Role):
		return 0, fmt.Errorf("%w: join token %s is for %s relays, not %s", ErrTokenRefused, claims.ID, claims.Role, r.Role)
	case !claims.AllowsName(r.Name):
		return 0, fmt.Errorf("%w: join token %s does not allow the name %q", ErrTokenRefused, claims.ID, r.Name)
	}
	tok := b.tokens[claims.ID]
	if tok == nil {
		rec, err := readToken(b.g.cfg.Store, claims.ID)
		if errors.Is(err, store.ErrNotFound) {
			return 0, fmt.Errorf("%w: join token %s is not recorded at the root: it was revoked, or not made with 'relay token create'", ErrTokenRefused, claims.ID)
		}
		if err != nil {
			return 0, err
		}
		uses, err := rec.uses()
		if err != nil {
			return 0, err
		}
		tok = &batchToken{rec: rec, uses: uses}
		b.tokens[claims.ID] = tok
	}
	if claims.MaxUses > 0 && tok.uses >= claims.MaxUses {
		return 0, fmt.Errorf("%w: join token %s has been used %d times, its limit", ErrTokenRefused, claims.ID, tok.uses)
	}
	cur, err := b.relay(r.Name)
	if err != nil {
		return 0, err
	}
	rec := newRelay(r, b.now)
	rec.Token = claims.ID
	switch {
	case cur == nil:
	case cur.Key == rec.Key && cur.Token == claims.ID:
		// The same join again (its answer was lost): done already.
		return cur.Generation, nil
	case claims.Rekey:
		rec.Generation = max(rec.Generation, cur.Generation+1)
		b.g.log.Info("relay re-keyed", "relay", r.Name, "path", strings.Join(r.Path, "/"), "token", claims.ID)
	default:
		return 0, fmt.Errorf("%w: relay name %q is joined already (at %s); a join token cannot join it again. "+
			"If that relay lost its key, an admin re-keys it: 'relay token create --rekey --names=%s'",
			ErrNameTaken, r.Name, strings.Join(cur.JoinedPath, "/"), r.Name)
	}
	b.relays[r.Name] = rec
	tok.uses++
	return rec.Generation, nil
}

func (g *Registry) check(r join.Registration) error {
	switch {
	case r.Role != pki.RoleRegion && r.Role != pki.RoleEdge:
		return fmt.Errorf("%w: relay %q has role %s", ErrInvalid, r.Name, r.Role)
	case len(r.Path) < 2 || r.Path[0] != g.cfg.RootName || r.Path[len(r.Path)-1] != r.Name:
		return fmt.Errorf("%w: path %s of relay %q", ErrInvalid, strings.Join(r.Path, "/"), r.Name)
	case slices.Contains(r.Path[1:len(r.Path)-1], r.Name) || r.Name == g.cfg.RootName:
		return fmt.Errorf("%w: the name %q is taken by a relay on its own path", ErrNameTaken, r.Name)
	case len(r.PublicKey) == 0:
		return fmt.Errorf("%w: relay %q sent no key", ErrInvalid, r.Name)
	}
	return nil
}

// proofSkew is how far a link proof's time may be from the root's clock.
const proofSkew = 5 * time.Minute

// newRelay is the record of a relay first seen at r.Path at now.
func newRelay(r join.Registration, now time.Time) Relay {
	rec := Relay{Role: r.Role.String(), Key: pki.KeyIDOfDER(r.PublicKey), PublicKey: r.PublicKey, JoinedPath: r.Path, Home: r.Path,
		Generation: now.UnixNano(), Joined: now.Unix()}
	rec.Metadata.Name = r.Name
	return rec
}

// link decides a link: the key must be the one the name joined with, and
// a new home needs a link proof by that key, newer than the one that made
// the last move. A name without a record joined before the registry
// existed: it is recorded with the key it presents (and proves).
func (g *Registry) link(r join.Registration) (int64, []store.Op, error) {
	cur, o, err := ReadRelay(g.cfg.Store, r.Name)
	if err != nil {
		return 0, nil, err
	}
	now := g.cfg.Now()
	key := pki.KeyIDOfDER(r.PublicKey)
	if cur == nil {
		if err := g.checkProof(r, r.PublicKey, 0, now); err != nil {
			return 0, nil, err
		}
		rec := newRelay(r, now)
		rec.ProofTime = r.ProofTime
		op, err := recordOp(rec, nil)
		if err != nil {
			return 0, nil, err
		}
		g.log.Info("recorded a relay that joined before the registry", "relay", r.Name, "path", strings.Join(r.Path, "/"))
		return rec.Generation, []store.Op{op}, nil
	}
	switch {
	case cur.Key != key:
		return 0, nil, fmt.Errorf("%w: relay %q linked at %s with key %.12s, but it joined (at %s) with key %.12s",
			ErrKeyMismatch, r.Name, strings.Join(r.Path, "/"), key, strings.Join(cur.JoinedPath, "/"), cur.Key)
	case cur.Role != r.Role.String():
		return 0, nil, fmt.Errorf("%w: relay %q linked as a %s, but it joined as a %s", ErrKeyMismatch, r.Name, r.Role, cur.Role)
	case slices.Equal(cur.Home, r.Path):
		return cur.Generation, nil, nil
	}
	if err := g.checkProof(r, cur.PublicKey, cur.ProofTime, now); err != nil {
		return 0, nil, err
	}
	rec := *cur
	rec.Home, rec.Generation, rec.ProofTime = r.Path, max(now.UnixNano(), cur.Generation+1), r.ProofTime
	op, err := recordOp(rec, o)
	if err != nil {
		return 0, nil, err
	}
	g.log.Info("relay linked at a new home", "relay", r.Name, "home", strings.Join(r.Path, "/"), "was", strings.Join(cur.Home, "/"))
	return rec.Generation, []store.Op{op}, nil
}

// checkProof checks r's link proof: signed by pub, of r.Path, within
// proofSkew of now and after last.
func (g *Registry) checkProof(r join.Registration, pub []byte, last int64, now time.Time) error {
	at := time.Unix(0, r.ProofTime)
	switch {
	case len(r.Proof) == 0:
		return fmt.Errorf("%w: relay %q linked at %s without a link proof (an older relay: upgrade it)", ErrKeyMismatch, r.Name, strings.Join(r.Path, "/"))
	case at.Before(now.Add(-proofSkew)) || at.After(now.Add(proofSkew)):
		return fmt.Errorf("%w: relay %q's link proof is dated %s, too far from the root's clock: check the clocks",
			ErrKeyMismatch, r.Name, at.UTC().Format(time.RFC3339))
	case r.ProofTime <= last:
		return fmt.Errorf("%w: relay %q's link proof at %s is not newer than the one that last moved it", ErrKeyMismatch, r.Name, strings.Join(r.Path, "/"))
	}
	if err := pki.VerifyLinkProof(pub, r.Path, r.ProofTime, r.Proof); err != nil {
		return fmt.Errorf("%w: relay %q at %s: %v", ErrKeyMismatch, r.Name, strings.Join(r.Path, "/"), err)
	}
	return nil
}

// recordOp writes rec: a create when cur is nil, else an update of cur.
func recordOp(rec Relay, cur *store.Object) (store.Op, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return store.Op{}, err
	}
	if cur == nil {
		return store.Op{Type: store.OpCreate, Key: RelayKey(rec.Metadata.Name), Data: data}, nil
	}
	return store.Op{Type: store.OpUpdate, Key: cur.Key, Data: data, ExpectRevision: cur.Revision}, nil
}

// RecordToken writes the record of a token with claims directly into st
// (a root's store, in this process): what "relay token create" does
// through the kube API, for tests and simulations.
func RecordToken(ctx context.Context, st *store.Store, c pki.JoinClaims) error {
	s := TokenSecret(c)
	s.CreationTimestamp.Time = time.Now().UTC().Truncate(time.Second)
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = st.Create(ctx, TokenKey(c.ID), data)
	return err
}
