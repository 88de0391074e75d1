package store

import (
	"context"
	"errors"
	"fmt"
)

// ErrReadOnly refuses a write to a read-only Space (View, or ReadOnly
// without a reason of its own).
var ErrReadOnly = errors.New("store: read-only space")

// Space is the objects of one space, as a server of the space's kube API
// reads and writes them (DESIGN.md section 3). Its implementation today is
// the embedded store (Store.Space); ReadOnly and View wrap any Space.
//
// Name is the space whose objects these are: the keys and options passed
// to the other methods name it in their Space field, and so do the keys of
// what they return (the embedded store's reads read Name whatever the
// Space field says; its Txn refuses a key of another space). Revisions are
// the implementation's own (the embedded store's are its Log's indexes).
// Implementations are safe for concurrent use.
type Space interface {
	Reader
	Name() string
	// Txn applies ops, all on keys of this space (an OpCheck's may be of
	// any space of the same store), atomically at one revision
	// (Store.Txn), or refuses them with Writable's error.
	Txn(ctx context.Context, ops ...Op) (Result, error)
	// Writable returns nil when the space takes writes, and otherwise the
	// error with which Txn refuses every one: a server refuses a write
	// request with it before doing anything else.
	Writable() error
	// Stats describes the store that holds the space (Stats.OldestRevision
	// is where a watch may resume from).
	Stats() Stats
}

// Space returns the embedded store's space name. It costs nothing: the
// space need not exist, and a Space holds no state of its own.
func (s *Store) Space(name string) Space { return storeSpace{s: s, name: name} }

// storeSpace is one space of a Store: it names its own space in every key
// and option it passes on, so that it reaches no other.
type storeSpace struct {
	s    *Store
	name string
}

func (sp storeSpace) Name() string    { return sp.name }
func (sp storeSpace) Writable() error { return nil }
func (sp storeSpace) Revision() int64 { return sp.s.Revision() }
func (sp storeSpace) Stats() Stats    { return sp.s.Stats() }
func (sp storeSpace) Get(k Key) (*Object, error) {
	k.Space = sp.name
	return sp.s.Get(k)
}

func (sp storeSpace) List(opts ListOptions) (ListResult, error) {
	opts.Space = sp.name
	return sp.s.List(opts)
}

// Watch watches the space; WatchOptions.Also may name keys of this space
// only.
func (sp storeSpace) Watch(ctx context.Context, opts WatchOptions) (Watcher, error) {
	opts.Space = sp.name
	if err := sp.own(opts.Also); err != nil {
		return nil, err
	}
	if opts.Addressed != nil {
		if err := sp.own([]Key{opts.Addressed.Set}); err != nil {
			return nil, err
		}
	}
	return sp.s.Watch(ctx, opts)
}

func (sp storeSpace) WaitForRevision(ctx context.Context, rev int64) error {
	return sp.s.WaitForRevision(ctx, rev)
}

func (sp storeSpace) Txn(ctx context.Context, ops ...Op) (Result, error) {
	for i, op := range ops {
		if op.Key.Space != sp.name && op.Type != OpCheck {
			return Result{}, &OpError{Index: i, Key: op.Key, Err: fmt.Errorf("%w: a key of space %q in a Txn of space %q", ErrInvalid, op.Key.Space, sp.name)}
		}
	}
	return sp.s.Txn(ctx, ops...)
}

func (sp storeSpace) own(keys []Key) error {
	for _, k := range keys {
		if k.Space != sp.name {
			return fmt.Errorf("%w: watch of space %q names key %s of another space", ErrInvalid, sp.name, k)
		}
	}
	return nil
}

// StoreOf returns the Store that holds sp's objects when sp is one of its
// spaces (Store.Space), or one wrapped by ReadOnly or View; nil for any
// other Space. A server whose reads of its Store must be confirmed with a
// leader (a replicated root) asks it to know which spaces share that
// Store's revisions.
func StoreOf(sp Space) *Store {
	for {
		switch s := sp.(type) {
		case storeSpace:
			return s.s
		case readOnly:
			sp = s.Space
		case view:
			sp = s.Space
		default:
			return nil
		}
	}
}

// ReadOnly is sp refusing every write with err (ErrReadOnly when err is
// nil); reads are sp's.
func ReadOnly(sp Space, err error) Space {
	if err == nil {
		err = ErrReadOnly
	}
	return readOnly{Space: sp, err: err}
}

type readOnly struct {
	Space
	err error
}

func (r readOnly) Writable() error                            { return r.err }
func (r readOnly) Txn(context.Context, ...Op) (Result, error) { return Result{}, r.err }

// View is the objects of sp for which match is true, as of each call: a
// read-only view (writes fail with ErrReadOnly) with sp's name and
// revisions. A get of an object outside it is ErrNotFound; lists and
// watches select as ListOptions.Match does, so an object that moves out
// of the view is watched as Deleted. match must be cheap and must not call
// a store.
func View(sp Space, match func(*Object) bool) Space {
	return view{Space: sp, match: match}
}

type view struct {
	Space
	match func(*Object) bool
}

func (v view) Writable() error                            { return ErrReadOnly }
func (v view) Txn(context.Context, ...Op) (Result, error) { return Result{}, ErrReadOnly }

func (v view) Get(k Key) (*Object, error) {
	o, err := v.Space.Get(k)
	if err == nil && !v.match(o) {
		return nil, fmt.Errorf("%w: %s (outside the view)", ErrNotFound, k)
	}
	return o, err
}

func (v view) List(opts ListOptions) (ListResult, error) {
	opts.Match = both(opts.Match, v.match)
	return v.Space.List(opts)
}

func (v view) Watch(ctx context.Context, opts WatchOptions) (Watcher, error) {
	opts.Match = both(opts.Match, v.match)
	return v.Space.Watch(ctx, opts)
}

// both is a match function true where a and b are (a may be nil).
func both(a, b func(*Object) bool) func(*Object) bool {
	if a == nil {
		return b
	}
	return func(o *Object) bool { return a(o) && b(o) }
}
