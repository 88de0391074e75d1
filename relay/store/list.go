package store

import (
	"encoding/base64"
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// continueVersion leads every continue token.
const continueVersion = 1

// List returns the objects selected by opts, consistent at the returned
// Revision, ordered by resource (group, then name), namespace and name. The
// objects are shared: do not modify them.
//
// With a Limit, at most Limit items are returned; when more match, Continue
// is set and Remaining counts them. A next page (After = Continue) lists the
// objects after the last one returned in the state at its own revision, so
// objects created or deleted between pages are seen or not according to
// their position.
func (s *Store) List(opts ListOptions) (ListResult, error) {
	var after *Key
	if opts.After != "" {
		k, err := decodeContinue(opts.After)
		if err != nil {
			return ListResult{}, err
		}
		if opts.Resource.Resource != "" && k.Resource != opts.Resource {
			return ListResult{}, fmt.Errorf("%w: continue token of another resource", ErrInvalid)
		}
		after = &k
	}
	l := lister{
		ns:    opts.Namespace,
		limit: int(max(opts.Limit, 0)),
		after: after,
	}
	if opts.Label != nil && !opts.Label.Empty() {
		l.label = opts.Label
	}
	if opts.Field != nil && !opts.Field.Empty() {
		l.field = opts.Field
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ListResult{}, ErrClosed
	}
	if opts.Resource.Resource != "" {
		if ref, ok := s.tables.Get(tableRef{space: opts.Space, res: opts.Resource}); ok {
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
		if after != nil {
			from = after.Resource
		}
		spaceTables(s.tables, opts.Space, from, func(ref tableRef) bool {
			l.table(ref)
			return true
		})
	}

	res := ListResult{Items: l.items, Revision: s.rev}
	if l.remaining > 0 {
		res.Continue = encodeContinue(l.items[len(l.items)-1].Key)
		res.Remaining = int64(l.remaining)
	}
	return res, nil
}

// lister collects one page of a List and counts what remains.
type lister struct {
	ns        string
	label     labels.Selector // nil: everything
	field     fields.Selector // nil: everything
	limit     int             // 0: no limit
	after     *Key            // list only after this key
	items     []*Object
	remaining int
}

func (l *lister) full() bool { return l.limit > 0 && len(l.items) == l.limit }

// selectsAll reports whether every object of a table is selected.
func (l *lister) selectsAll() bool { return l.ns == "" && l.label == nil && l.field == nil }

// table lists the selected objects of one table.
func (l *lister) table(ref tableRef) {
	resumes := l.after != nil && ref.res == l.after.Resource
	// Without a selector and with the whole table in range, what remains
	// of it once the page is full is a subtraction, not a scan.
	countable := l.selectsAll() && !resumes
	start := entry{ns: l.ns}
	if resumes {
		// The least key after the last one listed.
		if next := (entry{ns: l.after.Namespace, name: l.after.Name + "\x00"}); entryLess(start, next) {
			start = next
		}
	}
	visited := 0
	ref.t.objs.AscendGreaterOrEqual(start, func(e entry) bool {
		if l.ns != "" && e.ns != l.ns {
			return false
		}
		if countable && l.full() {
			l.remaining += ref.t.objs.Len() - visited
			return false
		}
		visited++
		o := e.obj
		switch {
		case l.label != nil && !l.label.Matches(o.Labels),
			l.field != nil && !l.field.Matches(o.Fields):
		case l.full():
			l.remaining++
		default:
			l.items = append(l.items, o)
		}
		return true
	})
}

// encodeContinue returns the opaque token of a list position: the version,
// then k's resource, namespace and name.
func encodeContinue(k Key) string {
	var e encoder
	e.byte(continueVersion)
	e.resource(k.Resource)
	e.str(k.Namespace)
	e.str(k.Name)
	return base64.RawURLEncoding.EncodeToString(e.buf)
}

// decodeContinue decodes a token of encodeContinue into a Key without Space.
func decodeContinue(tok string) (Key, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return Key{}, fmt.Errorf("%w: continue token: %v", ErrInvalid, err)
	}
	d := decoder{buf: b}
	if v := d.byte(); d.err == nil && v != continueVersion {
		return Key{}, fmt.Errorf("%w: continue token version %d", ErrInvalid, v)
	}
	k := Key{Resource: d.resource(), Namespace: d.str(), Name: d.str()}
	if d.err == nil && len(d.buf) > 0 {
		d.fail()
	}
	if d.err != nil {
		return Key{}, fmt.Errorf("%w: continue token: %v", ErrInvalid, d.err)
	}
	return k, nil
}
