package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestCRUD(t *testing.T) {
	s := newStore(t, Options{})
	k := key("ws", pods, "default", "a")
	v1 := body("uid-1", nil, "one")

	steps := []struct {
		name    string
		op      Op
		wantErr error
	}{
		{"update missing", Op{Type: OpUpdate, Key: k, Data: v1}, ErrNotFound},
		{"delete missing", Op{Type: OpDelete, Key: k}, ErrNotFound},
		{"create", Op{Type: OpCreate, Key: k, Data: v1}, nil},                                  // rev 3
		{"create again", Op{Type: OpCreate, Key: k, Data: v1}, ErrExists},                      // rev 4
		{"update stale", Op{Type: OpUpdate, Key: k, Data: v1, ExpectRevision: 2}, ErrConflict}, // rev 5
		{"update", Op{Type: OpUpdate, Key: k, Data: v1, ExpectRevision: 3}, nil},               // rev 6
		{"update any", Op{Type: OpUpdate, Key: k, Data: v1}, nil},                              // rev 7
		{"delete wrong uid", Op{Type: OpDelete, Key: k, ExpectUID: "uid-2"}, ErrConflict},      // rev 8
		{"delete stale", Op{Type: OpDelete, Key: k, ExpectRevision: 6}, ErrConflict},           // rev 9
		{"delete", Op{Type: OpDelete, Key: k, ExpectRevision: 7, ExpectUID: "uid-1"}, nil},     // rev 10
		{"delete again", Op{Type: OpDelete, Key: k}, ErrNotFound},                              // rev 11
		{"create after delete", Op{Type: OpCreate, Key: k, Data: body("uid-2", nil, 2)}, nil},  // rev 12
		{"update wrong uid", Op{Type: OpUpdate, Key: k, Data: v1, ExpectUID: "uid-1"}, ErrConflict},
	}
	for i, st := range steps {
		rev := int64(i + 1)
		res, err := s.Txn(context.Background(), st.op)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		if got := s.Revision(); got != rev {
			t.Fatalf("%s: revision %d, want %d (failed commands consume their index)", st.name, got, rev)
		}
		if err != nil {
			var opErr *OpError
			if !errors.As(err, &opErr) || opErr.Index != 0 || opErr.Key != k {
				t.Fatalf("%s: err %v is not an *OpError for op 0 on %s", st.name, err, k)
			}
			continue
		}
		if res.Revision != rev || len(res.Objects) != 1 {
			t.Fatalf("%s: result %+v", st.name, res)
		}
		o := res.Objects[0]
		got, getErr := s.Get(k)
		switch st.op.Type {
		case OpCreate, OpUpdate:
			if o.Revision != rev || getErr != nil || got != o {
				t.Fatalf("%s: wrote %+v, get %+v, %v", st.name, o, got, getErr)
			}
		case OpDelete:
			if o.Revision == rev || !errors.Is(getErr, ErrNotFound) {
				t.Fatalf("%s: deleted %+v, get %v", st.name, o, getErr)
			}
		}
	}

	o, err := s.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	if o.CreateRevision != 12 || o.UID != "uid-2" {
		t.Fatalf("recreated object: create revision %d, uid %q", o.CreateRevision, o.UID)
	}
}

func TestUpdateKeepsCreateRevision(t *testing.T) {
	s := newStore(t, Options{})
	k := key("ws", pods, "ns", "a")
	c := mustCreate(t, s, k, body("u", nil, 1))
	u := mustUpdate(t, s, k, body("u", nil, 2))
	if u.CreateRevision != c.Revision || u.Revision == c.Revision {
		t.Fatalf("create %d/%d, update %d/%d", c.Revision, c.CreateRevision, u.Revision, u.CreateRevision)
	}
}

func TestResourceVersionWritten(t *testing.T) {
	s := newStore(t, Options{})
	in := []byte(`{"metadata":{"name":"a","resourceVersion":"999","labels":{"x":"y"}},"n":9007199254740993,"s":"<&>"}`)
	o := mustCreate(t, s, key("ws", pods, "", "a"), in)

	var got struct {
		Metadata struct {
			Name            string            `json:"name"`
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
		N json.Number `json:"n"`
		S string      `json:"s"`
	}
	d := json.NewDecoder(bytes.NewReader(o.Data))
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != strconv.FormatInt(o.Revision, 10) {
		t.Errorf("resourceVersion %q, revision %d", got.Metadata.ResourceVersion, o.Revision)
	}
	if got.Metadata.Name != "a" || got.Metadata.Labels["x"] != "y" || got.S != "<&>" {
		t.Errorf("fields changed: %s", o.Data)
	}
	if got.N != "9007199254740993" {
		t.Errorf("big number changed to %s", got.N)
	}
	if o.Labels["x"] != "y" || o.Fields["metadata.name"] != "a" || o.Fields["metadata.namespace"] != "" {
		t.Errorf("labels %v, fields %v", o.Labels, o.Fields)
	}
}

func TestDataCopied(t *testing.T) {
	s := newStore(t, Options{})
	buf := body("u", nil, "original")
	k := key("ws", pods, "ns", "a")
	o := mustCreate(t, s, k, buf)
	want := bytes.Clone(o.Data)
	for i := range buf {
		buf[i] = 'x'
	}
	if got, _ := s.Get(k); !bytes.Equal(got.Data, want) {
		t.Fatalf("stored data changed with the caller's buffer: %s", got.Data)
	}
}

func TestInvalid(t *testing.T) {
	k := key("ws", pods, "ns", "a")
	good := body("u", nil, nil)
	for _, tc := range []struct {
		name string
		ops  []Op
	}{
		{"not json", []Op{{Type: OpCreate, Key: k, Data: []byte("nope")}}},
		{"array", []Op{{Type: OpCreate, Key: k, Data: []byte("[]")}}},
		{"null", []Op{{Type: OpCreate, Key: k, Data: []byte("null")}}},
		{"empty", []Op{{Type: OpCreate, Key: k}}},
		{"no metadata", []Op{{Type: OpCreate, Key: k, Data: []byte(`{"spec":{}}`)}}},
		{"metadata not object", []Op{{Type: OpCreate, Key: k, Data: []byte(`{"metadata":1}`)}}},
		{"metadata null", []Op{{Type: OpCreate, Key: k, Data: []byte(`{"metadata":null}`)}}},
		{"uid not string", []Op{{Type: OpCreate, Key: k, Data: []byte(`{"metadata":{"uid":5}}`)}}},
		{"label not string", []Op{{Type: OpCreate, Key: k, Data: []byte(`{"metadata":{"labels":{"a":1}}}`)}}},
		{"no name", []Op{{Type: OpCreate, Key: key("ws", pods, "ns", ""), Data: good}}},
		{"no resource", []Op{{Type: OpCreate, Key: key("ws", Resource{Group: "g"}, "ns", "a"), Data: good}}},
		{"op type", []Op{{Type: 7, Key: k, Data: good}}},
		{"duplicate key", []Op{{Type: OpCreate, Key: k, Data: good}, {Type: OpDelete, Key: k}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Options{})
			_, err := s.Txn(context.Background(), tc.ops...)
			var opErr *OpError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &opErr) {
				t.Fatalf("err = %v, want an *OpError wrapping ErrInvalid", err)
			}
			if opErr.Index != len(tc.ops)-1 {
				t.Errorf("failed op %d, want %d", opErr.Index, len(tc.ops)-1)
			}
			// Apply decides the same when Txn's checks are bypassed.
			out := s.Apply(uint64(s.Revision()+1), encodeCommand(tc.ops))
			if err, _ := out.(error); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Apply = %v, want ErrInvalid", out)
			}
			if st := s.Stats(); st.Objects != 0 {
				t.Fatalf("%d objects stored", st.Objects)
			}
		})
	}
}

func TestTxnAllOrNothing(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	a, b, c := key("ws", pods, "ns", "a"), key("ws", pods, "ns", "b"), key("ws2", deploys, "", "c")
	oa := mustCreate(t, s, a, body("ua", nil, 1))

	_, err := s.Txn(ctx,
		Op{Type: OpCreate, Key: b, Data: body("ub", nil, 1)},
		Op{Type: OpUpdate, Key: a, Data: body("ua", nil, 2), ExpectRevision: oa.Revision + 1},
	)
	var opErr *OpError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &opErr) || opErr.Index != 1 {
		t.Fatalf("err = %v, want a conflict on op 1", err)
	}
	if _, err := s.Get(b); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b was created by a failed txn: %v", err)
	}

	res, err := s.Txn(ctx,
		Op{Type: OpCreate, Key: b, Data: body("ub", nil, 1)},
		Op{Type: OpCreate, Key: c, Data: body("uc", nil, 1)},
		Op{Type: OpDelete, Key: a, ExpectRevision: oa.Revision, ExpectUID: "ua"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != s.Revision() || len(res.Objects) != 3 {
		t.Fatalf("result %+v at revision %d", res, s.Revision())
	}
	for i, o := range res.Objects[:2] {
		if o.Revision != res.Revision || o.CreateRevision != res.Revision {
			t.Errorf("object %d at revision %d/%d, txn at %d", i, o.Revision, o.CreateRevision, res.Revision)
		}
	}
	if res.Objects[2] != oa {
		t.Errorf("delete returned %+v, want the last version of a", res.Objects[2])
	}

	// An empty txn is a barrier: it consumes an index and changes nothing.
	res, err = s.Txn(ctx)
	if err != nil || res.Revision != s.Revision() || len(res.Objects) != 0 {
		t.Fatalf("empty txn: %+v, %v", res, err)
	}
}

// An OpCheck makes its Txn conditional on a key it does not write: it
// fails as an update would, and otherwise adds no event and returns the
// current version.
func TestTxnCheck(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	rec, a := key("", deploys, "", "rec"), key("ws", pods, "ns", "a")
	orec := mustCreate(t, s, rec, body("ur", nil, 1))
	w := mustWatch(t, s, WatchOptions{Space: "", Resource: deploys})

	for _, c := range []struct {
		check Op
		want  error
	}{
		{Op{Type: OpCheck, Key: rec, ExpectRevision: orec.Revision + 1}, ErrConflict},
		{Op{Type: OpCheck, Key: rec, ExpectUID: "other"}, ErrConflict},
		{Op{Type: OpCheck, Key: key("", deploys, "", "none")}, ErrNotFound},
	} {
		_, err := s.Space("ws").Txn(ctx, Op{Type: OpCreate, Key: a, Data: body("ua", nil, 1)}, c.check)
		var opErr *OpError
		if !errors.Is(err, c.want) || !errors.As(err, &opErr) || opErr.Index != 1 {
			t.Errorf("check %+v: %v, want %v on op 1", c.check, err, c.want)
		}
		if _, err := s.Get(a); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a was created by a failed txn: %v", err)
		}
	}

	res, err := s.Space("ws").Txn(ctx,
		Op{Type: OpCreate, Key: a, Data: body("ua", nil, 1)},
		Op{Type: OpCheck, Key: rec, ExpectRevision: orec.Revision, ExpectUID: "ur"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects[1] != orec {
		t.Errorf("check returned %+v, want the current version", res.Objects[1])
	}
	if _, err := s.Get(a); err != nil {
		t.Errorf("a: %v", err)
	}
	// Only a check names another space: a write there is refused.
	if _, err := s.Space("ws").Txn(ctx, Op{Type: OpUpdate, Key: rec, Data: body("ur", nil, 2)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("update of another space: %v, want ErrInvalid", err)
	}
	// The checked key saw no event; the next event of its space is b's.
	bo := mustCreate(t, s, key("", deploys, "", "b"), body("ub", nil, 1))
	if ev := next(t, w); ev.Object != bo {
		t.Errorf("event %s %v, want b added", ev.Type, ev.Object.Key)
	}
}

// gapLog applies commands at indexes 10 apart, like a Raft log whose other
// entries are not commands.
type gapLog struct {
	fsm  FSM
	last uint64
}

func (l *gapLog) Propose(_ context.Context, cmd []byte) (any, error) {
	l.last += 10
	return l.fsm.Apply(l.last, cmd), nil
}

func TestRevisionIsLogIndex(t *testing.T) {
	s := newStore(t, Options{})
	s.SetLog(&gapLog{fsm: s})
	a := mustCreate(t, s, key("ws", pods, "ns", "a"), body("u", nil, 1))
	b := mustCreate(t, s, key("other", secrets, "ns", "b"), body("u", nil, 1))
	if a.Revision != 10 || b.Revision != 20 || s.Revision() != 20 {
		t.Fatalf("revisions %d, %d, store at %d", a.Revision, b.Revision, s.Revision())
	}
	if err, _ := s.Apply(20, encodeCommand(nil)).(error); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply at an old index = %v", err)
	}
	if err, _ := s.Apply(1<<63, encodeCommand(nil)).(error); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply at an overflowing index = %v", err)
	}
	if s.Revision() != 20 {
		t.Fatalf("rejected Applies moved the revision to %d", s.Revision())
	}
}

func TestWaitForRevision(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	done := make(chan error)
	go func() { done <- s.WaitForRevision(ctx, 3) }()
	for i := range 3 {
		select {
		case err := <-done:
			t.Fatalf("returned %v at revision %d", err, s.Revision())
		default:
		}
		mustCreate(t, s, key("ws", pods, "ns", strconv.Itoa(i)), body("u", nil, i))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		t.Fatal("WaitForRevision did not return")
	}
	if err := s.WaitForRevision(ctx, 2); err != nil {
		t.Fatalf("past revision: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := s.WaitForRevision(short, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}

	go func() { done <- s.WaitForRevision(ctx, 100) }()
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestClose(t *testing.T) {
	s := New(Options{})
	k := key("ws", pods, "ns", "a")
	mustCreate(t, s, k, body("u", nil, 1))
	w := mustWatch(t, s, WatchOptions{Space: "ws"})
	s.Close()
	s.Close()

	if err := ended(t, w); !errors.Is(err, ErrClosed) {
		t.Errorf("watcher: %v", err)
	}
	ctx := context.Background()
	if _, err := s.Get(k); !errors.Is(err, ErrClosed) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.List(ListOptions{Space: "ws"}); !errors.Is(err, ErrClosed) {
		t.Errorf("List: %v", err)
	}
	if _, err := s.Watch(ctx, WatchOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch: %v", err)
	}
	if _, err := s.Create(ctx, k, body("u", nil, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Create: %v", err)
	}
	if err, _ := s.Apply(100, encodeCommand(nil)).(error); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply: %v", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot: %v", err)
	}
}

func TestStats(t *testing.T) {
	s := newStore(t, Options{HistorySize: 2})
	a := mustCreate(t, s, key("ws", pods, "ns", "a"), body("u", nil, 1))
	b := mustCreate(t, s, key("ws", pods, "ns", "b"), body("u", nil, "longer"))
	mustWatch(t, s, WatchOptions{})
	st := s.Stats()
	want := Stats{Objects: 2, Bytes: int64(len(a.Data) + len(b.Data)), Watchers: 1, Revision: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	mustDelete(t, s, a.Key)
	st = s.Stats()
	want = Stats{Objects: 1, Bytes: int64(len(b.Data)), Watchers: 1, Revision: 3, OldestRevision: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

// TestRandomOpsMatchModel applies random transactions and checks every
// outcome and the final state against a plain map.
func TestRandomOpsMatchModel(t *testing.T) {
	type version struct {
		rev, create int64
		uid         string
	}
	rng := rand.New(rand.NewPCG(1, 2))
	s := newStore(t, Options{HistorySize: 64})
	model := map[Key]version{}
	var keys []Key
	for _, sp := range []string{"", "a", "b"} {
		for _, res := range []Resource{pods, deploys} {
			for _, ns := range []string{"", "x"} {
				keys = append(keys, key(sp, res, ns, "n1"), key(sp, res, ns, "n2"))
			}
		}
	}

	for range 2000 {
		var ops []Op
		used := map[Key]bool{}
		for range 1 + rng.IntN(3) {
			k := keys[rng.IntN(len(keys))]
			if used[k] {
				continue
			}
			used[k] = true
			op := Op{Type: OpType(1 + rng.IntN(3)), Key: k}
			if op.Type != OpDelete {
				op.Data = body(fmt.Sprint("uid", rng.IntN(2)), nil, rng.Int())
			}
			if cur, ok := model[k]; ok && op.Type != OpCreate {
				switch rng.IntN(4) {
				case 0:
					op.ExpectRevision = cur.rev
				case 1:
					op.ExpectRevision = cur.rev - 1
				case 2:
					op.ExpectUID = fmt.Sprint("uid", rng.IntN(2))
				}
			}
			ops = append(ops, op)
		}

		rev := s.Revision() + 1
		var wantErr error
		next := map[Key]*version{}
		for _, op := range ops {
			cur, ok := model[op.Key]
			switch {
			case op.Type == OpCreate && ok:
				wantErr = ErrExists
			case op.Type != OpCreate && !ok:
				wantErr = ErrNotFound
			case op.Type != OpCreate && (op.ExpectRevision != 0 && op.ExpectRevision != cur.rev ||
				op.ExpectUID != "" && op.ExpectUID != cur.uid):
				wantErr = ErrConflict
			case op.Type == OpCreate:
				var meta struct{ Metadata struct{ UID string } }
				json.Unmarshal(op.Data, &meta)
				next[op.Key] = &version{rev: rev, create: rev, uid: meta.Metadata.UID}
			case op.Type == OpUpdate:
				var meta struct{ Metadata struct{ UID string } }
				json.Unmarshal(op.Data, &meta)
				next[op.Key] = &version{rev: rev, create: cur.create, uid: meta.Metadata.UID}
			default:
				next[op.Key] = nil
			}
			if wantErr != nil {
				break
			}
		}
		_, err := s.Txn(context.Background(), ops...)
		if !errors.Is(err, wantErr) {
			t.Fatalf("txn %+v: err = %v, want %v", ops, err, wantErr)
		}
		if err == nil {
			for k, v := range next {
				if v == nil {
					delete(model, k)
				} else {
					model[k] = *v
				}
			}
		}
	}

	n := 0
	for _, sp := range []string{"", "a", "b"} {
		res, err := s.List(ListOptions{Space: sp})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Items {
			want, ok := model[o.Key]
			if !ok || want != (version{o.Revision, o.CreateRevision, o.UID}) {
				t.Fatalf("%s: stored %d/%d/%s, model %+v (present %v)", o.Key, o.Revision, o.CreateRevision, o.UID, want, ok)
			}
			n++
		}
	}
	if n != len(model) || s.Stats().Objects != n {
		t.Fatalf("listed %d objects, model has %d, stats %d", n, len(model), s.Stats().Objects)
	}
}

// stuckLog never commits: Propose waits for its context.
type stuckLog struct{ calls atomic.Int32 }

func (l *stuckLog) Propose(ctx context.Context, _ []byte) (any, error) {
	l.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestTxnContext(t *testing.T) {
	s := newStore(t, Options{})
	l := &stuckLog{}
	s.SetLog(l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Create(ctx, key("ws", pods, "ns", "a"), body("u", nil, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if l.calls.Load() != 1 || s.Revision() != 0 {
		t.Fatalf("%d proposals, revision %d", l.calls.Load(), s.Revision())
	}
}

// Versions gives the version of a key current at a revision and those
// written since, from the history.
func TestVersions(t *testing.T) {
	s := newStore(t, Options{})
	a, b := key("vs", pods, "ns", "a"), key("vs", pods, "ns", "b")
	mustCreate(t, s, a, body("a1", nil, 1)) // 1
	mustCreate(t, s, b, body("b", nil, 1))  // 2
	mustUpdate(t, s, a, body("a1", nil, 2)) // 3
	mustDelete(t, s, a)                     // 4
	mustCreate(t, s, a, body("a2", nil, 1)) // 5
	mustUpdate(t, s, b, body("b", nil, 2))  // 6
	revs := func(objs ...*Object) []int64 {
		var out []int64
		for _, o := range objs {
			out = append(out, o.Revision)
		}
		return out
	}
	for _, tc := range []struct {
		k     Key
		rev   int64
		at    int64 // 0: none
		later []int64
	}{
		{a, 0, 0, []int64{1, 3, 5}},
		{a, 1, 1, []int64{3, 5}},
		{a, 3, 3, []int64{5}},
		{a, 4, 0, []int64{5}},
		{a, 5, 5, nil},
		{b, 2, 2, []int64{6}},
		{b, 6, 6, nil},
		{key("vs", pods, "ns", "never"), 0, 0, nil},
	} {
		at, later, err := s.Versions(tc.k, tc.rev)
		if err != nil {
			t.Fatalf("%s at %d: %v", tc.k.Name, tc.rev, err)
		}
		gotAt := int64(0)
		if at != nil {
			gotAt = at.Revision
		}
		if gotAt != tc.at || !slices.Equal(revs(later...), tc.later) {
			t.Errorf("%s at %d: %d then %v, want %d then %v", tc.k.Name, tc.rev, gotAt, revs(later...), tc.at, tc.later)
		}
	}

	small := newStore(t, Options{HistorySize: 2})
	for i := range 4 {
		if i == 0 {
			mustCreate(t, small, a, body("a", nil, i))
		} else {
			mustUpdate(t, small, a, body("a", nil, i))
		}
	}
	if _, _, err := small.Versions(a, 0); !errors.Is(err, ErrExpired) {
		t.Fatalf("before the history: %v, want ErrExpired", err)
	}
}
