package syncer

import (
	"sync"
	"time"
)

// workQueue is the worker's queue, with the semantics of client-go's
// rate-limited work queue (util/workqueue) without its goroutines: an item
// is queued at most once however often it is added; an item added while
// it is processed is queued again when Done is called; AddAfter and
// AddRateLimited wait on a timer (time.AfterFunc), not in a goroutine of
// their own, and an item waiting twice is added at the earlier time.
// AddRateLimited waits RetryMin·2^n after the item's n-th failure since it
// was last forgotten, at most RetryMax.
//
// It is not client-go's because that one cannot be had without goroutines:
// its delaying queue always runs a waiting loop with a 10 s heartbeat
// ticker, part of the per-edge goroutines halved in docs/simulations.md
// ("Per-edge fixed cost", item 4).
//
// It is safe for concurrent use.
type workQueue struct {
	min, max time.Duration

	mu         sync.Mutex
	cond       sync.Cond
	queue      []item
	dirty      map[item]struct{} // queued, or to queue again when Done
	processing map[item]struct{}
	waiting    map[item]*waitingItem
	failures   map[item]int
	shutDown   bool
}

type waitingItem struct {
	at    time.Time
	timer *time.Timer
}

func newWorkQueue(min, max time.Duration) *workQueue {
	q := &workQueue{
		min: min, max: max,
		dirty:      map[item]struct{}{},
		processing: map[item]struct{}{},
		waiting:    map[item]*waitingItem{},
		failures:   map[item]int{},
	}
	q.cond.L = &q.mu
	return q
}

// Add queues it unless it is queued already.
func (q *workQueue) Add(it item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(it)
}

func (q *workQueue) addLocked(it item) {
	if q.shutDown {
		return
	}
	if _, ok := q.dirty[it]; ok {
		return
	}
	q.dirty[it] = struct{}{}
	if _, ok := q.processing[it]; ok {
		return
	}
	q.queue = append(q.queue, it)
	q.cond.Signal()
}

// Get waits for an item and marks it processing; quit is true once the
// queue is shut down and empty.
func (q *workQueue) Get() (it item, quit bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 && !q.shutDown {
		q.cond.Wait()
	}
	if len(q.queue) == 0 {
		return item{}, true
	}
	it = q.queue[0]
	q.queue[0] = item{}
	q.queue = q.queue[1:]
	if len(q.queue) == 0 {
		q.queue = nil // let the backing array go
	}
	q.processing[it] = struct{}{}
	delete(q.dirty, it)
	return it, false
}

// Done ends the processing of it, queueing it again if it was added
// meanwhile.
func (q *workQueue) Done(it item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, it)
	if _, ok := q.dirty[it]; ok {
		q.queue = append(q.queue, it)
		q.cond.Signal()
	}
}

// busy reports whether an item is queued or processing (items waiting on
// a timer do not count).
func (q *workQueue) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue) > 0 || len(q.processing) > 0
}

// AddAfter adds it after d.
func (q *workQueue) AddAfter(it item, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown {
		return
	}
	if d <= 0 {
		q.addLocked(it)
		return
	}
	at := time.Now().Add(d)
	if w := q.waiting[it]; w != nil {
		if !at.Before(w.at) {
			return
		}
		w.timer.Stop()
	}
	w := &waitingItem{at: at}
	w.timer = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.waiting[it] == w {
			delete(q.waiting, it)
			q.addLocked(it)
		}
	})
	q.waiting[it] = w
}

// AddRateLimited adds it after its backoff: one more failure.
func (q *workQueue) AddRateLimited(it item) {
	q.mu.Lock()
	n := q.failures[it]
	q.failures[it] = n + 1
	q.mu.Unlock()
	d := q.min
	for i := 0; i < n && d < q.max; i++ {
		d *= 2
	}
	q.AddAfter(it, min(d, q.max))
}

// Forget clears the failures of it.
func (q *workQueue) Forget(it item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, it)
}

// ShutDown makes Get return quit once the queue is empty, and drops what
// waits.
func (q *workQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutDown = true
	for it, w := range q.waiting {
		w.timer.Stop()
		delete(q.waiting, it)
	}
	q.cond.Broadcast()
}
