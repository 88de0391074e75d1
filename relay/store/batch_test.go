package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Commands applied in batches give what applying them one by one gives:
// each its own result, the same objects, and the same events in the same
// order to a watcher.
func TestApplyBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	res := Resource{Resource: "things"}
	var cmds [][]byte
	for range 400 {
		var ops []Op
		for range 1 + rng.IntN(3) {
			k := key(fmt.Sprintf("s%d", rng.IntN(3)), res, "ns", fmt.Sprintf("o%d", rng.IntN(8)))
			switch rng.IntN(4) {
			case 0:
				ops = append(ops, Op{Type: OpCreate, Key: k, Data: body("", nil, rng.IntN(100))})
			case 1:
				ops = append(ops, Op{Type: OpUpdate, Key: k, Data: body("", nil, rng.IntN(100))})
			case 2:
				ops = append(ops, Op{Type: OpUpdate, Key: k, Data: body("", nil, 1), ExpectRevision: int64(rng.IntN(len(cmds) + 2))})
			default:
				ops = append(ops, Op{Type: OpDelete, Key: k})
			}
		}
		if rng.IntN(20) == 0 {
			cmds = append(cmds, []byte("not a command"))
			continue
		}
		cmds = append(cmds, encodeCommand(ops))
	}

	one, batched := newStore(t, Options{WatcherQueue: 1 << 14}), newStore(t, Options{WatcherQueue: 1 << 14})
	watch := func(s *Store) Watcher {
		w, err := s.Watch(context.Background(), WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	w1, w2 := watch(one), watch(batched)

	var want, got []string
	for i, c := range cmds {
		want = append(want, resultText(one.Apply(uint64(2*i+1), c)))
	}
	for i := 0; i < len(cmds); {
		n := min(1+rng.IntN(40), len(cmds)-i)
		entries := make([]Entry, n)
		for j := range entries {
			entries[j] = Entry{Index: uint64(2*(i+j) + 1), Cmd: cmds[i+j]}
		}
		for _, r := range batched.ApplyBatch(entries) {
			got = append(got, resultText(r))
		}
		i += n
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("command %d: batched %s, one by one %s", i, got[i], want[i])
		}
	}
	if one.Revision() != batched.Revision() {
		t.Fatalf("revision %d batched, %d one by one", batched.Revision(), one.Revision())
	}
	l1, _ := one.List(ListOptions{})
	l2, _ := batched.List(ListOptions{})
	if fmt.Sprint(versionsOf(l1.Items)) != fmt.Sprint(versionsOf(l2.Items)) {
		t.Fatalf("objects differ:\n%v\n%v", versionsOf(l1.Items), versionsOf(l2.Items))
	}
	// Every command that succeeded produced events; compare them all.
	for n := 0; ; n++ {
		e1, ok1 := tryNext(w1)
		e2, ok2 := tryNext(w2)
		if !ok1 && !ok2 {
			if n == 0 {
				t.Fatal("no events")
			}
			return
		}
		if ok1 != ok2 || e1.Type != e2.Type || e1.Revision != e2.Revision || e1.Object.Key != e2.Object.Key {
			t.Fatalf("event %d: batched %v %v, one by one %v %v", n, ok2, e2, ok1, e1)
		}
	}
}

func versionsOf(items []*Object) []string {
	var out []string
	for _, o := range items {
		out = append(out, fmt.Sprintf("%s@%d:%s", o.Key, o.Revision, o.Data))
	}
	return out
}

// tryNext returns w's next event, or false when none comes soon: the
// events of commands already applied are queued by then.
func tryNext(w Watcher) (Event, bool) {
	select {
	case ev, ok := <-w.Events():
		return ev, ok
	case <-time.After(200 * time.Millisecond):
		return Event{}, false
	}
}

// resultText is a result as text: its revision and versions, or its error.
func resultText(r any) string {
	if res, ok := r.(Result); ok {
		var objs []*Object
		for _, o := range res.Objects {
			if o != nil {
				objs = append(objs, o)
			}
		}
		return fmt.Sprint(res.Revision, versionsOf(objs))
	}
	return fmt.Sprint(r)
}
