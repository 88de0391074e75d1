package placement

import (
	"context"

	"github.com/canopy-dev/canopy/relay/store"
)

// driver runs a Controller step by step, as its loop does (Run), so that
// a test or benchmark knows when it has caught up.
type driver struct {
	f    *fixture
	c    *Controller
	w    store.Watcher
	seen int64
}

// newDriver loads a controller on f's store and, if flush, does its first
// flush. Its watch starts after that flush: the first flush writes a copy
// per destination, which the watch would otherwise have to queue (the
// controller's own writes are no input).
func newDriver(f *fixture, flush bool) *driver {
	f.t.Helper()
	d := &driver{f: f, c: New(Config{Store: f.st, Inventory: inv, Downsync: down})}
	if err := d.c.load(); err != nil {
		f.t.Fatal(err)
	}
	if flush {
		if err := d.c.flush(context.Background()); err != nil {
			f.t.Fatal(err)
		}
	}
	d.seen = f.st.Revision()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := f.st.Watch(ctx, store.WatchOptions{Since: d.seen})
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	d.w = w
	f.t.Cleanup(func() { w.Stop(); cancel() })
	return d
}

// catchUp takes every event up to the store's revision, into the
// controller if observe; it reports whether the controller has work.
func (d *driver) catchUp(observe bool) bool {
	d.f.t.Helper()
	work := false
	for target := d.f.st.Revision(); d.seen < target; {
		ev, ok := <-d.w.Events()
		if !ok {
			d.f.t.Fatalf("the watch ended: %v", d.w.Err())
		}
		d.seen = max(d.seen, ev.Revision)
		work = observe && d.c.observe(ev) || work
	}
	return work
}

// settle flushes until the controller has caught up with the store and
// has nothing left to do.
func (d *driver) settle() {
	d.f.t.Helper()
	for work := true; work; {
		if err := d.c.flush(context.Background()); err != nil {
			d.f.t.Fatal(err)
		}
		work = d.catchUp(true)
	}
}
