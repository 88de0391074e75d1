package inproc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/server"
)

// stopWithin and readyWithin bound the root's stop at the test's end and
// its start.
const (
	stopWithin  = 15 * time.Second
	readyWithin = 30 * time.Second
)

// StartRoot opens a root relay called name on the data directory dir, its
// API and link on random loopback ports, and serves it until the test
// ends. It returns once the root is ready; log (nil: discarded) gets the
// root's log.
func StartRoot(t testing.TB, name, dir string, log *slog.Logger) *server.Root {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, err := server.Open(server.Config{Name: name, DataDir: dir, APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}, log)
	if err != nil {
		t.Fatalf("open root %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("root %s stopped with error: %v", name, err)
			}
		case <-time.After(stopWithin):
			t.Errorf("root %s did not stop within %v", name, stopWithin)
		}
	})
	select {
	case <-r.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("root %s stopped before it was ready: %v", name, err)
	case <-time.After(readyWithin):
		t.Fatalf("root %s not ready within %v", name, readyWithin)
	}
	return r
}
