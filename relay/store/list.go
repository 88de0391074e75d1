package store

import (
	"encoding/base64"
	"fmt"
	"math"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Continue token versions. A version 1 token held only a position, listed
// against the current state; it names no retained state, so it is expired.
const (
	continueV1      = 1
	continueVersion = 2
)

// List returns the objects selected by opts, consistent at the returned
// Revision, ordered by resource (group, then name), namespace and name. The
// objects are shared: do not modify them.
//
// With a Limit, at most Limit items are returned; when more match, Continue
// is set and Remaining counts them. A paged list is consistent at the
// revision of its first page, as kube's are: the store retains the state the
// first page was listed from (see Options.PagingRetention), every next page
// (After = Continue) is served from it and carries its Revision, so the
// pages together are exactly the selection at that revision, whatever was
// written between them. A continue token whose state is no longer retained
// fails with ErrExpired (list again without it), unless the store is still
// at that revision.
//
// A List never waits for watch delivery; a next page served from a retained
// state does not even wait for Apply's commit.
func (s *Store) List(opts ListOptions) (ListResult, error) {
	l := lister{
		space: opts.Space,
		res:   opts.Resource,
		ns:    opts.Namespace,
		limit: int(max(opts.Limit, 0)),
	}
	if opts.Label != nil && !opts.Label.Empty() {
		l.label = opts.Label
	}
	if opts.Field != nil && !opts.Field.Empty() {
		l.field = opts.Field
	}
	l.match = opts.Match
	if opts.After != "" {
		c, err := decodeContinue(opts.After)
		if err != nil {
			return ListResult{}, err
		}
		if string(c.space) != opts.Space || opts.Resource.Resource != "" && c.key.Resource != opts.Resource {
			return ListResult{}, fmt.Errorf("%w: continue token of another space or resource", ErrInvalid)
		}
		l.after = &c
		if tables := s.retained(c.rev); tables != nil {
			// The retained tables are never modified: no lock.
			return l.list(tables, c.rev), nil
		}
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ListResult{}, ErrClosed
	}
	if l.after != nil && l.after.rev != s.rev {
		return ListResult{}, fmt.Errorf("%w: the state at revision %d of this continue token is no longer kept; list again without it",
			ErrExpired, l.after.rev)
	}
	res := l.list(s.tables, s.rev)
	if res.Continue != "" {
		s.retain()
	}
	return res, nil
}

// cursor is what a continue token says: where a paged list stopped and the
// revision of the state it is listed from.
type cursor struct {
	rev int64
	// key is the last key listed; decodeContinue leaves its Space empty
	// and sets space instead, which costs no allocation.
	key   Key
	space []byte
	// off is the number of entries of key's table up to and including key
	// in the state at rev, when the page that ended there counted them (it
	// selected every object); 0 when unknown. It lets the next page count
	// what remains by subtraction.
	off int
}

// lister collects one page of a List and counts what remains.
type lister struct {
	space     string
	res       Resource // Resource == "": every resource
	ns        string
	label     labels.Selector // nil: everything
	field     fields.Selector // nil: everything
	match     func(*Object) bool
	limit     int     // 0: no limit
	after     *cursor // list only after this key
	items     []*Object
	remaining int
	lastOff   int // cursor.off of the last item listed
}

// list lists one page from tables, the state at rev.
func (l *lister) list(tables *btree.BTreeG[tableRef], rev int64) ListResult {
	if l.res.Resource != "" {
		if ref, ok := tables.Get(tableRef{space: l.space, res: l.res}); ok {
			if l.selectsAll() {
				n := ref.t.objs.Len()
				if l.limit > 0 {
					n = min(n, l.limit)
				}
				l.items = make([]*Object, 0, n)
			}
			l.table(ref)
		}
	} else {
		var from Resource
		if l.after != nil {
			from = l.after.key.Resource
		}
		spaceTables(tables, l.space, from, func(ref tableRef) bool {
			l.table(ref)
			return true
		})
	}

	res := ListResult{Items: l.items, Revision: rev}
	if l.remaining > 0 {
		last := l.items[len(l.items)-1].Key
		res.Continue = encodeContinue(cursor{rev: rev, key: last, off: l.lastOff})
		res.Remaining = int64(l.remaining)
	}
	return res
}

func (l *lister) full() bool { return l.limit > 0 && len(l.items) == l.limit }

// selectsAll reports whether every object of a table is selected.
func (l *lister) selectsAll() bool { return l.ns == "" && l.label == nil && l.field == nil }

// table lists the selected objects of one table.
func (l *lister) table(ref tableRef) {
	// counted: visited is the number of entries of the table before the
	// current one. Without a selector, what remains of the table once the
	// page is full is then a subtraction, not a scan.
	counted := l.selectsAll()
	visited := 0
	start := entry{ns: l.ns}
	if l.after != nil && ref.res == l.after.key.Resource {
		// The least key after the last one listed.
		if next := (entry{ns: l.after.key.Namespace, name: l.after.key.Name + "\x00"}); entryLess(start, next) {
			start = next
		}
		visited = l.after.off
		counted = counted && visited > 0
	}
	listed := len(l.items)
	ref.t.objs.AscendGreaterOrEqual(start, func(e entry) bool {
		if l.ns != "" && e.ns != l.ns {
			return false
		}
		if counted && l.full() {
			// At least e remains, whatever a forged token said.
			l.remaining += max(ref.t.objs.Len()-visited, 1)
			return false
		}
		visited++
		o := e.obj
		switch {
		case l.label != nil && !l.label.Matches(o.Labels),
			l.field != nil && !l.field.Matches(o.Fields),
			l.match != nil && !l.match(o):
		case l.full():
			l.remaining++
		default:
			l.items = append(l.items, o)
		}
		return true
	})
	if len(l.items) > listed {
		// When counted, every entry visited was listed: the last one
		// listed is entry number visited of the table.
		l.lastOff = 0
		if counted {
			l.lastOff = visited
		}
	}
}

// encodeContinue returns the opaque token of c: the version, c's revision,
// key (space, resource, namespace, name) and offset.
func encodeContinue(c cursor) string {
	k := c.key
	e := encoder{buf: make([]byte, 0, 40+len(k.Space)+len(k.Resource.Group)+len(k.Resource.Resource)+len(k.Namespace)+len(k.Name))}
	e.byte(continueVersion)
	e.varint(c.rev)
	e.key(k)
	e.uvarint(uint64(c.off))
	return base64.RawURLEncoding.EncodeToString(e.buf)
}

// decodeContinue decodes a token of encodeContinue. A malformed token is
// ErrInvalid; a well-formed token of version 1 is ErrExpired.
func decodeContinue(tok string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: continue token: %v", ErrInvalid, err)
	}
	d := decoder{buf: b}
	var c cursor
	switch v := d.byte(); {
	case d.err != nil:
	case v == continueV1:
		d.resource()
		d.str()
		d.str()
	case v == continueVersion:
		c.rev = d.varint()
		c.space = d.bytes()
		c.key = Key{Resource: d.resource(), Namespace: d.str(), Name: d.str()}
		off := d.uvarint()
		if d.err == nil && (c.rev <= 0 || off > math.MaxInt) {
			d.fail()
		}
		c.off = int(off)
	default:
		return cursor{}, fmt.Errorf("%w: continue token version %d", ErrInvalid, v)
	}
	if d.err == nil && len(d.buf) > 0 {
		d.fail()
	}
	if d.err != nil {
		return cursor{}, fmt.Errorf("%w: continue token: %v", ErrInvalid, d.err)
	}
	if b[0] == continueV1 {
		return cursor{}, fmt.Errorf("%w: continue token of an earlier version; list again without it", ErrExpired)
	}
	return c, nil
}
