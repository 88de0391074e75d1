package store

import (
	"context"
	"errors"
	"testing"
)

// A space of the store reads and writes its own objects only.
func TestStoreSpaceIsOneSpace(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	mustCreate(t, s, key("a", pods, "ns", "p"), body("1", nil, nil))
	mustCreate(t, s, key("b", pods, "ns", "p"), body("2", nil, nil))
	a := s.Space("a")
	if a.Name() != "a" || a.Writable() != nil {
		t.Fatalf("space a: name %q, writable %v", a.Name(), a.Writable())
	}
	if o, err := a.Get(key("b", pods, "ns", "p")); err != nil || o.Key.Space != "a" {
		t.Fatalf("get through space a: %v, %v; want a's object", o, err)
	}
	if l, err := a.List(ListOptions{Space: "b", Resource: pods}); err != nil || len(l.Items) != 1 || l.Items[0].Key.Space != "a" {
		t.Fatalf("list through space a: %v, %v; want a's one object", l.Items, err)
	}
	_, err := a.Txn(ctx, Op{Type: OpCreate, Key: key("a", pods, "ns", "q"), Data: body("3", nil, nil)},
		Op{Type: OpCreate, Key: key("b", pods, "ns", "q"), Data: body("4", nil, nil)})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a Txn of space a with a key of b: %v, want ErrInvalid", err)
	}
	if _, err := s.Get(key("a", pods, "ns", "q")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused Txn wrote: %v", err)
	}
	if _, err := a.Watch(ctx, WatchOptions{Also: []Key{key("b", pods, "ns", "p")}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a watch of space a following a key of b: %v, want ErrInvalid", err)
	}
	w, err := a.Watch(ctx, WatchOptions{Space: "b", Resource: pods})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustUpdate(t, s, key("b", pods, "ns", "p"), body("2", nil, "b"))
	mustUpdate(t, s, key("a", pods, "ns", "p"), body("1", nil, "a"))
	if ev := next(t, w); ev.Object.Key.Space != "a" {
		t.Fatalf("space a's watcher got %s", ev.Object.Key)
	}
	if StoreOf(a) != s || StoreOf(ReadOnly(View(a, func(*Object) bool { return true }), nil)) != s {
		t.Fatal("StoreOf does not find the store of its spaces")
	}
}

// ReadOnly refuses writes with its reason and reads through.
func TestReadOnlySpace(t *testing.T) {
	s := newStore(t, Options{})
	mustCreate(t, s, key("a", pods, "ns", "p"), body("1", nil, nil))
	why := errors.New("only the link writes here")
	for _, c := range []struct {
		sp   Space
		want error
	}{{ReadOnly(s.Space("a"), why), why}, {ReadOnly(s.Space("a"), nil), ErrReadOnly}} {
		if err := c.sp.Writable(); !errors.Is(err, c.want) {
			t.Errorf("Writable: %v, want %v", err, c.want)
		}
		_, err := c.sp.Txn(context.Background(), Op{Type: OpDelete, Key: key("a", pods, "ns", "p")})
		if !errors.Is(err, c.want) {
			t.Errorf("Txn: %v, want %v", err, c.want)
		}
		if _, err := c.sp.Get(key("a", pods, "ns", "p")); err != nil {
			t.Errorf("Get: %v", err)
		}
	}
}

// A View shows the objects of its source that match, and follows objects
// moving in and out of it.
func TestViewSpace(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	inView := func(o *Object) bool { return o.Labels["show"] == "yes" }
	show := map[string]string{"show": "yes"}
	mustCreate(t, s, key("src", pods, "ns", "in"), body("1", show, nil))
	mustCreate(t, s, key("src", pods, "ns", "out"), body("2", nil, nil))
	v := View(s.Space("src"), inView)
	if v.Name() != "src" || !errors.Is(v.Writable(), ErrReadOnly) {
		t.Fatalf("view: name %q, writable %v", v.Name(), v.Writable())
	}
	if _, err := v.Txn(ctx, Op{Type: OpDelete, Key: key("src", pods, "ns", "in")}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("a write through the view: %v, want ErrReadOnly", err)
	}
	if _, err := v.Get(key("src", pods, "ns", "in")); err != nil {
		t.Fatalf("get in the view: %v", err)
	}
	if _, err := v.Get(key("src", pods, "ns", "out")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get outside the view: %v, want ErrNotFound", err)
	}
	named := func(o *Object) bool { return o.Key.Name != "in" }
	for _, c := range []struct {
		match func(*Object) bool
		want  int
	}{{nil, 1}, {named, 0}} {
		l, err := v.List(ListOptions{Resource: pods, Match: c.match})
		if err != nil || len(l.Items) != c.want {
			t.Fatalf("list of the view: %d items (%v), want %d", len(l.Items), err, c.want)
		}
	}
	w, err := v.Watch(ctx, WatchOptions{Resource: pods})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustUpdate(t, s, key("src", pods, "ns", "in"), body("1", nil, nil))
	mustUpdate(t, s, key("src", pods, "ns", "out"), body("2", show, nil))
	for _, want := range []struct {
		typ  EventType
		name string
	}{{Deleted, "in"}, {Added, "out"}} {
		if ev := next(t, w); ev.Type != want.typ || ev.Object.Key.Name != want.name {
			t.Fatalf("view watch: %s %s, want %s %s", ev.Type, ev.Object.Key.Name, want.typ, want.name)
		}
	}
}
