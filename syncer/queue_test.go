package syncer

import (
	"testing"
	"time"
)

// The work queue keeps client-go's semantics: an item is queued once, one
// added while processed comes back at Done, the earlier of two delays
// wins, and ShutDown drops what waits.
func TestWorkQueue(t *testing.T) {
	q := newWorkQueue(time.Millisecond, 4*time.Millisecond)
	a, b := item{op: opSync}, item{op: opProbe}
	get := func(want item) {
		t.Helper()
		if got, quit := q.Get(); quit || got != want {
			t.Fatalf("Get = %v, %v; want %v", got, quit, want)
		}
	}
	q.Add(a)
	q.Add(b)
	q.Add(a)
	get(a)
	get(b)
	q.Add(a) // while processing: not queued yet
	if n := len(q.queue); n != 0 {
		t.Fatalf("%d queued while a is processed", n)
	}
	q.Done(a)
	get(a)
	q.Done(a)
	q.Done(b)

	q.AddAfter(a, time.Hour)
	q.AddAfter(a, 10*time.Millisecond) // earlier: replaces the hour
	q.AddAfter(a, time.Hour)           // later: ignored
	start := time.Now()
	get(a)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("AddAfter 10ms took %v", d)
	}
	q.Done(a)

	// Backoff doubles from min to max; Forget starts it again.
	r := newWorkQueue(time.Hour, 4*time.Hour)
	for n, want := range []time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour, 4 * time.Hour, 0, time.Hour} {
		if want == 0 {
			r.Forget(b)
			continue
		}
		r.AddRateLimited(b)
		r.mu.Lock()
		w := r.waiting[b]
		delete(r.waiting, b)
		r.mu.Unlock()
		w.timer.Stop()
		if at := time.Until(w.at); at > want || at < want-time.Minute {
			t.Fatalf("step %d: waits %v, want %v", n, at, want)
		}
	}
	r.ShutDown()

	q.AddAfter(a, time.Hour)
	q.ShutDown()
	if len(q.waiting) != 0 {
		t.Fatal("ShutDown kept a waiting item")
	}
	if _, quit := q.Get(); !quit {
		t.Fatal("Get after ShutDown did not quit")
	}
}
