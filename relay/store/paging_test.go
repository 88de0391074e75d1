package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// fakeClock is the clock of paging retention in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newPagingStore returns a store whose paging retention runs on a fake
// clock.
func newPagingStore(t testing.TB, opts Options) (*Store, *fakeClock) {
	s := newStore(t, opts)
	c := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.now = c.now
	return s, c
}

// retainedRevs returns the revisions of the states s retains.
func retainedRevs(s *Store) []int64 {
	s.pagesMu.Lock()
	defer s.pagesMu.Unlock()
	var out []int64
	for _, p := range s.pages {
		out = append(out, p.rev)
	}
	return out
}

// mustPage lists opts and fails the test on error.
func mustPage(t testing.TB, s *Store, opts ListOptions) ListResult {
	t.Helper()
	res, err := s.List(opts)
	if err != nil {
		t.Fatalf("list %+v: %v", opts, err)
	}
	return res
}

// fillPods creates n pods in space ws over 3 namespaces, with app=even or
// app=odd, in one txn, and returns their keys.
func fillPods(t testing.TB, s *Store, n int) []Key {
	t.Helper()
	ops := make([]Op, n)
	keys := make([]Key, n)
	for i := range ops {
		keys[i] = key("ws", pods, fmt.Sprint("ns", i%3), fmt.Sprintf("p%03d", i))
		ops[i] = Op{Type: OpCreate, Key: keys[i], Data: body("u", map[string]string{"app": []string{"even", "odd"}[i%2]}, i)}
	}
	if _, err := s.Txn(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	return keys
}

// logged is one successful write of the paging writer.
type logged struct {
	rev int64
	key Key
	obj *Object // nil for a delete
}

// TestListPagingConsistentUnderWrites pages through 250 objects, 100 at a
// time, while a goroutine creates, updates and deletes objects: every page
// carries the first page's revision and the pages together are exactly the
// selection in the state at that revision.
func TestListPagingConsistentUnderWrites(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	keys := fillPods(t, s, 250)
	for i := range 20 { // a second table, for lists of every resource
		mustCreate(t, s, key("ws", secrets, fmt.Sprint("ns", i%3), fmt.Sprint("s", i)), body("u", map[string]string{"app": "even"}, i))
	}
	base := map[Key]*Object{}
	for _, o := range mustPage(t, s, ListOptions{Space: "ws"}).Items {
		base[o.Key] = o
	}

	// The writer: random creates (next to existing keys, so before and
	// after any page boundary), updates and deletes of pods, until stopped.
	var (
		wlog    []logged // the writer's successful writes, in order
		writers sync.WaitGroup
	)
	stopped := make(chan struct{})
	writers.Go(func() {
		rng := rand.New(rand.NewPCG(5, 6))
		for n := 0; ; n++ {
			select {
			case <-stopped:
				return
			default:
			}
			op := Op{Type: OpType(1 + rng.IntN(3)), Key: keys[rng.IntN(len(keys))]}
			switch op.Type {
			case OpCreate:
				op.Key.Name = fmt.Sprintf("%s-%d", op.Key.Name, n)
				op.Data = body("u", map[string]string{"app": "even"}, n)
			case OpUpdate:
				op.Data = body("u", map[string]string{"app": "odd"}, n)
			}
			res, err := s.Txn(ctx, op)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				t.Error(err)
				return
			case op.Type == OpDelete:
				wlog = append(wlog, logged{rev: res.Revision, key: op.Key})
			default:
				wlog = append(wlog, logged{rev: res.Revision, key: op.Key, obj: res.Objects[0]})
			}
		}
	})

	type round struct {
		opts      ListOptions
		rev       int64
		items     []*Object
		remaining []int64 // per page: its Remaining plus the items up to it
	}
	var rounds []round
	for i, opts := range []ListOptions{
		{Space: "ws", Resource: pods, Limit: 100},
		{Space: "ws", Limit: 100},
		{Space: "ws", Resource: pods, Namespace: "ns1", Limit: 30},
		{Space: "ws", Label: labels.SelectorFromSet(labels.Set{"app": "even"}), Limit: 40},
		{Space: "ws", Resource: pods, Limit: 100},
	} {
		r := round{opts: opts}
		first := true
		for {
			page := mustPage(t, s, opts)
			if first {
				r.rev, first = page.Revision, false
			} else if page.Revision != r.rev {
				t.Fatalf("round %d: page at revision %d, first page at %d", i, page.Revision, r.rev)
			}
			if int64(len(page.Items)) > opts.Limit {
				t.Fatalf("round %d: %d items, limit %d", i, len(page.Items), opts.Limit)
			}
			r.items = append(r.items, page.Items...)
			r.remaining = append(r.remaining, page.Remaining+int64(len(r.items)))
			if page.Continue == "" {
				break
			}
			// Make sure writes land between pages.
			wctx, cancel := context.WithTimeout(ctx, waitFor)
			if err := s.WaitForRevision(wctx, s.Revision()+3); err != nil {
				t.Fatal(err)
			}
			cancel()
			opts.After = page.Continue
		}
		rounds = append(rounds, r)
	}
	close(stopped)
	writers.Wait()
	if t.Failed() {
		return
	}

	for i, r := range rounds {
		// The state at r.rev: base, then the writes up to r.rev.
		state := maps.Clone(base)
		for _, l := range wlog {
			if l.rev > r.rev {
				break
			}
			if l.obj == nil {
				delete(state, l.key)
			} else {
				state[l.key] = l.obj
			}
		}
		var want []*Object
		for _, o := range state {
			if selected(r.opts, o) {
				want = append(want, o)
			}
		}
		slices.SortFunc(want, func(a, b *Object) int { return compareKeys(a.Key, b.Key) })
		if !slices.Equal(r.items, want) {
			t.Errorf("round %d at revision %d (%+v):\npages %v\nwant  %v", i, r.rev, r.opts, keysOf(r.items), keysOf(want))
		}
		for p, n := range r.remaining {
			if n != int64(len(want)) {
				t.Errorf("round %d, page %d: remaining counts %d items in all, want %d", i, p, n, len(want))
			}
		}
		if r.rev >= s.Revision() {
			t.Errorf("round %d: no write after its first page", i)
		}
	}
	if len(wlog) == 0 {
		t.Fatal("the writer wrote nothing")
	}
}

// selected reports whether List with opts selects o (Space, Resource,
// Namespace and Label only).
func selected(opts ListOptions, o *Object) bool {
	k := o.Key
	return k.Space == opts.Space &&
		(opts.Resource.Resource == "" || k.Resource == opts.Resource) &&
		(opts.Namespace == "" || k.Namespace == opts.Namespace) &&
		(opts.Label == nil || opts.Label.Matches(o.Labels))
}

// TestListPagingAgainstFirstRevision is the example of kube's docs: what
// changes between pages does not show.
func TestListPagingAgainstFirstRevision(t *testing.T) {
	s := newStore(t, Options{})
	for i := range 10 {
		mustCreate(t, s, key("ws", pods, "ns", fmt.Sprintf("p%d", i)), body("u", nil, i))
	}
	page := mustPage(t, s, ListOptions{Space: "ws", Resource: pods, Limit: 3})
	p3, err := s.Get(key("ws", pods, "ns", "p3"))
	if err != nil {
		t.Fatal(err)
	}
	// The last item listed goes away, one item before and one after the
	// position come in, one after is updated: the next page does not see
	// any of it.
	mustDelete(t, s, key("ws", pods, "ns", "p2"))
	mustCreate(t, s, key("ws", pods, "ns", "p0a"), body("u", nil, 0))
	mustCreate(t, s, key("ws", pods, "ns", "p2a"), body("u", nil, 0))
	mustUpdate(t, s, key("ws", pods, "ns", "p3"), body("u", nil, 33))
	next := mustPage(t, s, ListOptions{Space: "ws", Resource: pods, Limit: 3, After: page.Continue})
	if got, want := keysOf(next.Items), []string{"ws/pods/ns/p3", "ws/pods/ns/p4", "ws/pods/ns/p5"}; !slices.Equal(got, want) {
		t.Fatalf("next page %v, want %v", got, want)
	}
	if next.Items[0] != p3 {
		t.Fatalf("p3 at revision %d, want the version at %d", next.Items[0].Revision, p3.Revision)
	}
	if next.Remaining != 4 || next.Revision != page.Revision || next.Revision == s.Revision() {
		t.Fatalf("remaining %d, revision %d (first page %d, store %d)", next.Remaining, next.Revision, page.Revision, s.Revision())
	}
	// A new list sees the current state.
	if got := mustPage(t, s, ListOptions{Space: "ws", Resource: pods, Limit: 3}); got.Revision != s.Revision() || got.Remaining != 8 {
		t.Fatalf("new list at %d with %d remaining", got.Revision, got.Remaining)
	}
}

// pageAt lists a first page of pods in ws, limit 1, and returns its token.
func pageAt(t testing.TB, s *Store) string {
	t.Helper()
	res := mustPage(t, s, ListOptions{Space: "ws", Resource: pods, Limit: 1})
	if res.Continue == "" || res.Revision != s.Revision() {
		t.Fatalf("first page %+v at store revision %d", res, s.Revision())
	}
	return res.Continue
}

// nextPage lists the page after tok, as pageAt's next page.
func nextPage(s *Store, tok string) (ListResult, error) {
	return s.List(ListOptions{Space: "ws", Resource: pods, Limit: 1, After: tok})
}

func TestListPagingExpiresByTime(t *testing.T) {
	s, clock := newPagingStore(t, Options{PagingRetention: time.Minute})
	keys := fillPods(t, s, 3)
	tok := pageAt(t, s)
	rev := s.Revision()
	mustUpdate(t, s, keys[1], body("u", nil, "x"))

	clock.advance(time.Minute - time.Nanosecond)
	res, err := nextPage(s, tok)
	if err != nil || res.Revision != rev {
		t.Fatalf("within retention: %+v, %v", res, err)
	}
	// Next pages do not extend retention.
	clock.advance(time.Nanosecond)
	if _, err := nextPage(s, res.Continue); !errors.Is(err, ErrExpired) {
		t.Fatalf("after retention: %v, want ErrExpired", err)
	}
	if _, err := nextPage(s, tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("after retention: %v, want ErrExpired", err)
	}

	// Writes drop expired states, lists or not.
	pageAt(t, s)
	mustUpdate(t, s, keys[1], body("u", nil, "y"))
	if got := retainedRevs(s); len(got) != 1 {
		t.Fatalf("retained %v", got)
	}
	clock.advance(time.Minute)
	mustUpdate(t, s, keys[1], body("u", nil, "z"))
	if got := retainedRevs(s); len(got) != 0 {
		t.Fatalf("retained %v after expiry and a write", got)
	}

	// A token of the current revision needs no retained state: the state
	// is the current one.
	tok = pageAt(t, s)
	clock.advance(time.Hour)
	if res, err := nextPage(s, tok); err != nil || res.Revision != s.Revision() {
		t.Fatalf("token of the current revision: %+v, %v", res, err)
	}
}

func TestListPagingExpiresByCount(t *testing.T) {
	s, _ := newPagingStore(t, Options{PagingStates: 3})
	keys := fillPods(t, s, 3)
	var toks []string
	var revs []int64
	for i := range 4 {
		toks = append(toks, pageAt(t, s))
		revs = append(revs, s.Revision())
		mustUpdate(t, s, keys[0], body("u", nil, i))
	}
	if got := retainedRevs(s); !slices.Equal(got, revs[1:]) {
		t.Fatalf("retained %v, want %v", got, revs[1:])
	}
	if _, err := nextPage(s, toks[0]); !errors.Is(err, ErrExpired) {
		t.Fatalf("oldest token: %v, want ErrExpired", err)
	}
	for i, tok := range toks[1:] {
		if res, err := nextPage(s, tok); err != nil || res.Revision != revs[i+1] {
			t.Fatalf("token %d: %+v, %v", i+1, res, err)
		}
	}
}

func TestListPagingSharesStates(t *testing.T) {
	s, clock := newPagingStore(t, Options{PagingRetention: time.Minute})
	keys := fillPods(t, s, 6)
	mustCreate(t, s, key("ws", secrets, "", "a"), body("u", nil, 0))
	mustCreate(t, s, key("ws", secrets, "", "b"), body("u", nil, 0))
	rev := s.Revision()

	gen := s.gen
	tok1 := pageAt(t, s)
	clock.advance(40 * time.Second)
	// Other lists at the same revision share the state.
	tok2 := mustPage(t, s, ListOptions{Space: "ws", Limit: 2}).Continue
	tok3 := mustPage(t, s, ListOptions{Space: "ws", Resource: secrets, Limit: 1}).Continue
	if got := retainedRevs(s); !slices.Equal(got, []int64{rev}) || s.gen != gen+1 {
		t.Fatalf("retained %v, generation %d -> %d", got, gen, s.gen)
	}
	mustDelete(t, s, keys[1])
	mustDelete(t, s, key("ws", secrets, "", "b"))
	// The last first page at a revision sets its retention: tok1 lives on.
	clock.advance(40 * time.Second)
	for _, tc := range []struct {
		tok  string
		opts ListOptions
		want []string
	}{
		{tok1, ListOptions{Space: "ws", Resource: pods, Limit: 1}, []string{"ws/pods/ns0/p003"}},
		{tok2, ListOptions{Space: "ws", Limit: 2}, []string{"ws/pods/ns1/p001", "ws/pods/ns1/p004"}},
		{tok3, ListOptions{Space: "ws", Resource: secrets, Limit: 1}, []string{"ws/secrets//b"}},
	} {
		tc.opts.After = tc.tok
		res := mustPage(t, s, tc.opts)
		if got := keysOf(res.Items); res.Revision != rev || !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v at %d, want %v at %d", tc.opts, got, res.Revision, tc.want, rev)
		}
	}
	clock.advance(20 * time.Second)
	if _, err := nextPage(s, tok1); !errors.Is(err, ErrExpired) {
		t.Fatalf("after retention: %v, want ErrExpired", err)
	}
}

func TestListPagingRestoreDropsStates(t *testing.T) {
	s, _ := newPagingStore(t, Options{})
	fillPods(t, s, 3)
	snap := snapshotBytes(t, s)
	mustCreate(t, s, key("ws", pods, "ns0", "p000a"), body("u", nil, 0))
	tok := pageAt(t, s)
	if err := s.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got := retainedRevs(s); len(got) != 0 {
		t.Fatalf("retained %v after Restore", got)
	}
	if _, err := nextPage(s, tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("token from before Restore: %v, want ErrExpired", err)
	}
	// Paging works on the restored state, which is then retained.
	tok = pageAt(t, s)
	mustCreate(t, s, key("ws", pods, "ns0", "p000a"), body("u", nil, 0))
	if res, err := nextPage(s, tok); err != nil || keysOf(res.Items)[0] != "ws/pods/ns1/p001" {
		t.Fatalf("%+v, %v", res, err)
	}

	s.Close()
	if got := retainedRevs(s); len(got) != 0 {
		t.Fatalf("retained %v after Close", got)
	}
	if _, err := nextPage(s, tok); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func TestListPagingTokens(t *testing.T) {
	s := newStore(t, Options{})
	fillPods(t, s, 3)
	tok := pageAt(t, s)

	var e encoder
	e.byte(continueV1)
	e.resource(pods)
	e.str("ns0")
	e.str("p000")
	v1 := base64.RawURLEncoding.EncodeToString(e.buf)
	if _, err := nextPage(s, v1); !errors.Is(err, ErrExpired) {
		t.Errorf("version 1 token: %v, want ErrExpired", err)
	}
	if _, err := nextPage(s, v1+"AA"); !errors.Is(err, ErrInvalid) {
		t.Errorf("version 1 token with trailing bytes: %v, want ErrInvalid", err)
	}
	for _, c := range []cursor{{rev: 0, key: key("ws", pods, "ns0", "p000")}, {rev: -1, key: key("ws", pods, "ns0", "p000")}} {
		if _, err := nextPage(s, encodeContinue(c)); !errors.Is(err, ErrInvalid) {
			t.Errorf("token at revision %d: %v, want ErrInvalid", c.rev, err)
		}
	}
	if _, err := s.List(ListOptions{Space: "other", Resource: pods, After: tok}); !errors.Is(err, ErrInvalid) {
		t.Errorf("token of another space: %v, want ErrInvalid", err)
	}
	// A forged offset can only make Remaining wrong: the list still ends
	// where the state does.
	c, err := decodeContinue(tok)
	if err != nil {
		t.Fatal(err)
	}
	c.key.Space, c.off = "ws", 1<<40
	var got []string
	for tok := encodeContinue(c); tok != ""; {
		res, err := nextPage(s, tok)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, keysOf(res.Items)...)
		tok = res.Continue
	}
	if want := []string{"ws/pods/ns1/p001", "ws/pods/ns2/p002"}; !slices.Equal(got, want) {
		t.Fatalf("with a forged offset: %v, want %v", got, want)
	}
}
