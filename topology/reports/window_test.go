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
	w.Note()
	if !w.Pending() {
		t.Fatal("not pending after Note")
	}
	// A report every 100 ms keeps the burst open: each waits one window,
	// until MaxWaits windows after the first.
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
	// The next report starts a new burst, which waits a whole window.
	now = t0.Add(5 * time.Second)
	w.Note()
	if got := w.wait(now); got != window {
		t.Errorf("first report of a new burst: wait %v, want %v", got, window)
	}
}

func TestWindowFires(t *testing.T) {
	w := NewWindow(10 * time.Millisecond)
	defer w.Stop()
	start := time.Now()
	w.Note()
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatal("C did not fire")
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Errorf("fired after %v, before its window", d)
	}
	w.Fired()
	select {
	case <-w.C():
		t.Error("fired again without a Note")
	case <-time.After(30 * time.Millisecond):
	}
}
