package poll

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and ends
// only the goroutine that called it, as testing's does the test's.
type recorder struct {
	testing.TB
	failed atomic.Bool
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(string, ...any) {
	r.failed.Store(true)
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own and waits for it.
func (r *recorder) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Until(t, "third call", func() error {
		if n.Add(1) < 3 {
			return errors.New("early")
		}
		return nil
	}, Every(time.Millisecond))
	if got := n.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3", got)
	}
}

func TestFirstPausesAreShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n atomic.Int32
	err := Wait(ctx, func() error {
		if n.Add(1) < 4 {
			return errors.New("early")
		}
		return nil
	}, Every(time.Hour))
	if err != nil {
		t.Fatalf("Wait with an hour's interval = %v, want the fourth call to end it after a few milliseconds", err)
	}
}

func TestWaitGivesTheLastError(t *testing.T) {
	err := Wait(context.Background(), func() error { return errors.New("still 2 of 3") },
		For(30*time.Millisecond), Every(5*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "still 2 of 3") {
		t.Fatalf("Wait = %v, want the condition's last error", err)
	}
}

func TestWaitEndsAtStop(t *testing.T) {
	exited := errors.New("the process exited")
	var n atomic.Int32
	err := Wait(context.Background(), func() error {
		n.Add(1)
		return Stop(exited)
	}, For(time.Hour))
	if err != exited || n.Load() != 1 {
		t.Fatalf("Wait = %v after %d calls, want the stopping error after one", err, n.Load())
	}
}

func TestWaitStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Wait(ctx, func() error { return errors.New("never") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
}

func TestTrueFailsWhenTheTimeoutPasses(t *testing.T) {
	r := &recorder{TB: t}
	r.run(func() {
		True(r, "never true", func() bool { return false }, For(20*time.Millisecond), Every(5*time.Millisecond))
	})
	if !r.failed.Load() {
		t.Fatal("True did not fail the test when the condition never held")
	}
}

func TestHoldsFailsAtTheFirstError(t *testing.T) {
	r := &recorder{TB: t}
	var n atomic.Int32
	r.run(func() {
		Holds(r, "stays under 3", time.Second, func() error {
			if n.Add(1) >= 3 {
				return errors.New("reached 3")
			}
			return nil
		}, Every(time.Millisecond))
	})
	if !r.failed.Load() || n.Load() != 3 {
		t.Fatalf("Holds: failed=%v after %d calls, want a failure at the third", r.failed.Load(), n.Load())
	}
	ok := &recorder{TB: t}
	ok.run(func() {
		Holds(ok, "always", 20*time.Millisecond, func() error { return nil }, Every(5*time.Millisecond))
	})
	if ok.failed.Load() {
		t.Fatal("Holds failed a condition that held throughout")
	}
}
