package consensus

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// TestForwardGoAway: a closing leader answers the requests it took on and
// tells the follower that later ones were never read, so they can be sent
// elsewhere without risk of applying twice.
func TestForwardGoAway(t *testing.T) {
	release := make(chan struct{})
	taken := make(chan []byte, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := newForwardServer(ctx, func(ctx context.Context, kind byte, payload []byte) forwardResponse {
		taken <- payload
		<-release
		return forwardResponse{status: statusOK, index: uint64(len(payload))}
	})
	client := newForwardClient(func(string, time.Duration) (net.Conn, error) {
		a, b := net.Pipe()
		go srv.serve(b)
		return a, nil
	})
	defer client.close()

	type result struct {
		r   forwardResponse
		err error
	}
	first := make(chan result, 1)
	go func() {
		r, err := client.call(context.Background(), "leader", kindPropose, []byte("first"))
		first <- result{r, err}
	}()
	if got := <-taken; string(got) != "first" {
		t.Fatalf("took %q", got)
	}
	closed := make(chan struct{})
	go func() { srv.close(); close(closed) }()
	poll.True(t, "the follower sees the goaway", func() bool {
		client.mu.Lock()
		defer client.mu.Unlock()
		return client.conns["leader"] == nil
	})

	// A request after the goaway is refused as never sent; the request
	// taken on before it is still answered.
	if _, err := client.call(context.Background(), "leader", kindPropose, []byte("second")); !errors.As(err, new(errNotSent)) {
		t.Fatalf("call after goaway: %v, want errNotSent", err)
	}
	close(release)
	if r := <-first; r.err != nil || r.r.status != statusOK || r.r.index != 5 {
		t.Fatalf("first call: %+v, %v", r.r, r.err)
	}
	<-closed
	select {
	case p := <-taken:
		t.Fatalf("server took %q after closing", p)
	default:
	}
}
