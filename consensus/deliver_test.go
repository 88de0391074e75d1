package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// Deliver reaches the leader's Config.Deliver from every replica, the
// leader included, and names the leader that took the message; the
// leader's error comes back as ErrDeliverRefused. Nothing is logged. After
// leadership is handed to another replica (TransferLeadership), and again
// after that leader is closed, a survivor's message reaches the new leader,
// under its ID.
func TestDeliver(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // by receiving node: payloads
	c := newTestCluster(t, 3, newTestFSMAsStore, func(cfg *Config) {
		id := cfg.NodeID
		cfg.Deliver = func(_ context.Context, payload []byte) error {
			if string(payload) == "refuse" {
				return errors.New("no thanks")
			}
			mu.Lock()
			got[id] = append(got[id], string(payload))
			mu.Unlock()
			return nil
		}
	})
	leader := c.waitLeader(15 * time.Second)
	leaderID := c.nodes[leader].cfg.NodeID
	before := c.nodes[leader].node.AppliedIndex()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var want []string
	for i, tn := range c.nodes {
		msg := fmt.Sprintf("from %d", i)
		id, err := tn.node.Deliver(ctx, []byte(msg))
		if err != nil || id != leaderID {
			t.Fatalf("Deliver from %s: %q, %v; want the leader %s", tn.cfg.NodeID, id, err, leaderID)
		}
		want = append(want, msg)
	}
	mu.Lock()
	delivered := fmt.Sprint(got)
	ok := slices.Equal(got[leaderID], want) && len(got) == 1
	mu.Unlock()
	if !ok {
		t.Fatalf("delivered %s, want %v at %s only", delivered, want, leaderID)
	}
	if after := c.nodes[leader].node.AppliedIndex(); after != before {
		t.Fatalf("the log moved from %d to %d: a message was logged", before, after)
	}
	follower := (leader + 1) % 3
	if _, err := c.nodes[follower].node.Deliver(ctx, []byte("refuse")); !errors.Is(err, ErrDeliverRefused) {
		t.Fatalf("a refused message: %v, want ErrDeliverRefused", err)
	}

	// Leadership handed to another replica: a follower's message reaches
	// it, under its ID.
	to := (leader + 2) % 3
	if err := c.nodes[follower].node.TransferLeadership(c.nodes[to].cfg.NodeID); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("TransferLeadership on a follower: %v, want ErrNotLeader", err)
	}
	if err := c.nodes[leader].node.TransferLeadership(c.nodes[to].cfg.NodeID); err != nil {
		t.Fatal(err)
	}
	poll.True(t, c.nodes[to].cfg.NodeID+" leading", func() bool {
		return c.nodes[to].node.IsLeader() && !c.nodes[leader].node.IsLeader()
	})
	if id, err := c.nodes[follower].node.Deliver(ctx, []byte("transferred")); err != nil || id != c.nodes[to].cfg.NodeID {
		t.Fatalf("Deliver after the transfer: %q, %v; want %s", id, err, c.nodes[to].cfg.NodeID)
	}

	leader = to
	c.kill(leader)
	next := c.waitLeader(15 * time.Second)
	survivor := c.live()[0]
	if survivor == next {
		survivor = c.live()[1]
	}
	id, err := c.nodes[survivor].node.Deliver(ctx, []byte("after"))
	if err != nil || id != c.nodes[next].cfg.NodeID {
		t.Fatalf("Deliver after the failover: %q, %v; want the new leader %s", id, err, c.nodes[next].cfg.NodeID)
	}
	mu.Lock()
	last := slices.Clone(got[id])
	mu.Unlock()
	if len(last) == 0 || last[len(last)-1] != "after" {
		t.Fatalf("the new leader got %v", last)
	}
}
