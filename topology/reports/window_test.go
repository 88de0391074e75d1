package reports

import (
	"testing"
	"time"
)

func TestWindowWait(t *testing.T) {
	const window = 200 * time.Millisecond
	w := NewWindow(window)
	defer w.Stop()
	t0 := time.Unix(1000, 0)
	now := t0
	w.now = func() time.Time { return now }
	if w.Pending() {
		t.Fatal("a new Window is pending")
	}
	// The first burst begins after a quiet window: it is merged
	// window/LeadDivisor after its first report, whatever comes meanwhile.
	w.Note()
	if !w.Pending() {
		t.Fatal("not pending after Note")
	}
	now = t0.Add(5 * time.Millisecond)
	w.Note()
	if got, want := w.wait(now), window/LeadDivisor-5*time.Millisecond; got != want {
		t.Errorf("a report 5 ms into a burst after a quiet window: wait %v, want %v", got, want)
	}
	now = t0.Add(window / LeadDivisor)
	w.Fired()
	// The next, right after: a report every 100 ms keeps the burst open:
	// each waits one window, until MaxWaits windows after the first.
	t0 = now
	w.Note()
	for i, want := range []time.Duration{window, window, window, window, window, window, window, window, window, 100 * time.Millisecond, 0, 0} {
		now = t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if got := w.wait(now); got != want {
			t.Errorf("%v after the first report: wait %v, want %v", now.Sub(t0), got, want)
		}
	}
	w.Fired()
	if w.Pending() {
		t.Fatal("pending after Fired")
	}
	// A burst a window or more after the last merge is merged soon.
	now = t0.Add(5 * time.Second)
	w.Note()
	if got := w.wait(now); got != window/LeadDivisor {
		t.Errorf("first report of a burst after a quiet window: wait %v, want %v", got, window/LeadDivisor)
	}
}

func TestWindowFires(t *testing.T) {
	w := NewWindow(10 * time.Millisecond)
	defer w.Stop()
	fires := func(what string, atLeast time.Duration) {
		t.Helper()
		start := time.Now()
		w.Note()
		select {
		case <-w.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: C did not fire", what)
		}
		if d := time.Since(start); d < atLeast {
			t.Errorf("%s: fired after %v, before %v", what, d, atLeast)
		}
		w.Fired()
	}
	fires("a burst after a quiet window", time.Millisecond) // 10 ms / LeadDivisor
	fires("a burst right after a merge", 10*time.Millisecond)
	select {
	case <-w.C():
		t.Error("fired again without a Note")
	case <-time.After(30 * time.Millisecond):
	}
}
