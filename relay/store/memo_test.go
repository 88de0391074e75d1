package store

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Memo computes a value once per version and key, however many
// goroutines ask at once; another key or version computes its own.
func TestMemo(t *testing.T) {
	type k1 struct{}
	type k2 struct{}
	o, other := &Object{Revision: 1}, &Object{Revision: 2}
	var calls atomic.Int32
	f := func(o *Object) any { calls.Add(1); return o.Revision * 10 }
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if v := o.Memo(k1{}, f); v != int64(10) {
				t.Errorf("Memo = %v, want 10", v)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("computed %d times, want once", n)
	}
	if v := o.Memo(k2{}, func(*Object) any { return "other" }); v != "other" {
		t.Fatalf("second key: %v", v)
	}
	if v := other.Memo(k1{}, f); v != int64(20) || calls.Load() != 2 {
		t.Fatalf("other version: %v after %d calls", v, calls.Load())
	}
}
