package store

import "sync"

// Memo returns f(o), computing it once for this version and key, however
// many goroutines ask: a relay whose thousands of children are sent the
// same version derives what they share from it (its parsed list of
// destinations, its encoding less one field) once, not once per child. The
// value lives as long as the version does.
//
// key names what is derived, as a context key does: a value of a type of
// the caller's own. f must depend on the version alone, and must not call
// Memo on o with the same key. Callers must not modify what Memo returns.
func (o *Object) Memo(key any, f func(*Object) any) any {
	m := o.memo.Load()
	if m == nil {
		o.memo.CompareAndSwap(nil, new(sync.Map))
		m = o.memo.Load()
	}
	e, ok := m.Load(key)
	if !ok {
		e, _ = m.LoadOrStore(key, new(memoEntry))
	}
	me := e.(*memoEntry)
	me.once.Do(func() { me.v = f(o) })
	return me.v
}

type memoEntry struct {
	once sync.Once
	v    any
}
