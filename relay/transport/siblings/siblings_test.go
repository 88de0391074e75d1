package siblings

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/canopy-dev/canopy/test/poll"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Gossip admits only siblings: relays of the same tree under the same
// parent. One of another parent is refused (its join fails and it is
// never listed); one of another tree cannot even talk (memberlist's
// label). A sibling is listed with its link address, and forgotten when
// it leaves.
func TestSiblingGossipRefusesStrangers(t *testing.T) {
	open := func(name, tree, parent, link string, join ...string) *Gossip {
		t.Helper()
		s, err := Open(Config{Name: name, PeerAddr: "127.0.0.1:0", Join: join, LinkAddr: link,
			Tree: tree, Parent: parent, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(s *Gossip) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Start(ctx) }()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop
	}
	a := open("r1", "tree-1", "root", "127.0.0.1:7001")
	run(a)
	// Another parent's region: the join is refused.
	other := open("sub", "tree-1", "root/r1", "127.0.0.1:7002")
	t.Cleanup(func() { _ = other.ml.Shutdown() })
	if n, err := other.ml.Join([]string{a.PeerAddr()}); n > 0 || err == nil {
		t.Errorf("a region of another parent joined (%d, %v)", n, err)
	}
	// Another tree's region: not even heard.
	foreign := open("r9", "tree-2", "root", "127.0.0.1:7003")
	t.Cleanup(func() { _ = foreign.ml.Shutdown() })
	if n, err := foreign.ml.Join([]string{a.PeerAddr()}); n > 0 || err == nil {
		t.Errorf("a region of another tree joined (%d, %v)", n, err)
	}
	// A sibling listening on every interface is listed at its gossip host.
	b := open("r2", "tree-1", "root", "0.0.0.0:7004", a.PeerAddr())
	stopB := run(b)
	poll.True(t, "r1 to list r2", func() bool { got, _ := a.Addrs(); return slices.Equal(got, []string{"127.0.0.1:7004"}) })
	poll.True(t, "r2 to list r1", func() bool { got, _ := b.Addrs(); return slices.Equal(got, []string{"127.0.0.1:7001"}) })
	_, changed := a.Addrs()
	stopB()
	<-changed
	if got, _ := a.Addrs(); len(got) != 0 {
		t.Errorf("r1 lists %v after r2 left", got)
	}
	for _, s := range []*Gossip{other, foreign} {
		if got, _ := s.Addrs(); len(got) != 0 {
			t.Errorf("%s lists %v", s.cfg.Name, got)
		}
	}
	if got, _ := a.Addrs(); slices.Contains(got, "127.0.0.1:7002") || slices.Contains(got, "127.0.0.1:7003") {
		t.Errorf("r1 lists a stranger: %v", got)
	}
}
