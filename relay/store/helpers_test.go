package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

var (
	pods    = Resource{Resource: "pods"}
	secrets = Resource{Resource: "secrets"}
	deploys = Resource{Group: "apps", Resource: "deployments"}
)

// waitFor bounds every wait in these tests; none is expected to get close.
const waitFor = 10 * time.Second

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s := New(opts)
	t.Cleanup(s.Close)
	return s
}

func key(space string, res Resource, ns, name string) Key {
	return Key{Space: space, Resource: res, Namespace: ns, Name: name}
}

// body returns an object's JSON with the given uid, labels and spec.
func body(uid string, labels map[string]string, spec any) []byte {
	meta := map[string]any{"uid": uid}
	if labels != nil {
		meta["labels"] = labels
	}
	b, err := json.Marshal(map[string]any{"metadata": meta, "spec": spec})
	if err != nil {
		panic(err)
	}
	return b
}

func mustCreate(t testing.TB, s *Store, k Key, data []byte) *Object {
	t.Helper()
	o, err := s.Create(context.Background(), k, data)
	if err != nil {
		t.Fatalf("create %s: %v", k, err)
	}
	return o
}

func mustUpdate(t testing.TB, s *Store, k Key, data []byte) *Object {
	t.Helper()
	o, err := s.Update(context.Background(), k, data, 0)
	if err != nil {
		t.Fatalf("update %s: %v", k, err)
	}
	return o
}

func mustDelete(t testing.TB, s *Store, k Key) *Object {
	t.Helper()
	o, err := s.Delete(context.Background(), k, 0, "")
	if err != nil {
		t.Fatalf("delete %s: %v", k, err)
	}
	return o
}

func mustWatch(t testing.TB, s *Store, opts WatchOptions) Watcher {
	t.Helper()
	w, err := s.Watch(context.Background(), opts)
	if err != nil {
		t.Fatalf("watch %+v: %v", opts, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// next returns the next event of w, failing if w ends or nothing comes.
func next(t testing.TB, w Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// ended drains w until it ends and returns its Err.
func ended(t testing.TB, w Watcher) error {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
		case <-timeout:
			t.Fatal("watch did not end")
		}
	}
}

// collect returns the changes w delivers until a bookmark at rev or later,
// which proves that every change up to rev has been delivered.
func collect(t testing.TB, w Watcher, rev int64) []Event {
	t.Helper()
	var evs []Event
	for {
		ev := next(t, w)
		if ev.Type == Bookmark {
			if ev.Revision >= rev {
				return evs
			}
			continue
		}
		evs = append(evs, ev)
	}
}

// dump lists every object of the given spaces, as comparable strings.
func dump(t testing.TB, s *Store, spaces ...string) []string {
	t.Helper()
	var out []string
	for _, sp := range spaces {
		res, err := s.List(ListOptions{Space: sp})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Items {
			out = append(out, describe(o))
		}
	}
	return out
}

func describe(o *Object) string {
	return fmt.Sprintf("%s rev=%d create=%d uid=%q labels=%v fields=%v data=%s",
		o.Key, o.Revision, o.CreateRevision, o.UID, o.Labels, o.Fields, o.Data)
}
