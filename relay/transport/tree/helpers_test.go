package tree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

var cms = store.Resource{Resource: "configmaps"}

const (
	mailbox = "mailbox-c1"
	inbox   = "inbox"
	waitFor = 20 * time.Second
)

func newStore(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	s := store.New(opts)
	s.SetLog(store.NewMemLog(s))
	t.Cleanup(s.Close)
	return s
}

func key(space, ns, name string) store.Key {
	return store.Key{Space: space, Resource: cms, Namespace: ns, Name: name}
}

// body returns a ConfigMap-like object whose value is v padded to size.
func body(name, v string, size int) []byte {
	for len(v) < size {
		v += fmt.Sprintf("-%x", len(v)*2654435761%1000003)
	}
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name, "uid": "uid-" + name},
		"data":     map[string]string{"v": v},
	})
	return b
}

// put creates or updates k and returns the revision written.
func put(t testing.TB, s *store.Store, k store.Key, data []byte) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Get(k); err == nil {
		o, err := s.Update(ctx, k, data, 0)
		if err != nil {
			t.Fatalf("update %s: %v", k, err)
		}
		return o.Revision
	}
	o, err := s.Create(ctx, k, data)
	if err != nil {
		t.Fatalf("create %s: %v", k, err)
	}
	return o.Revision
}

func del(t testing.TB, s *store.Store, k store.Key) int64 {
	t.Helper()
	if _, err := s.Delete(context.Background(), k, 0, ""); err != nil {
		t.Fatalf("delete %s: %v", k, err)
	}
	return s.Revision()
}

func hash(t testing.TB, r store.Reader, space string) string {
	t.Helper()
	h, err := ContentHash(r, space)
	if err != nil {
		t.Fatalf("hash %s: %v", space, err)
	}
	return h
}

// pipe is an in-memory stream pair. The parent end may be throttled (a
// delay per write) or cut after a number of bytes written.
type pipe struct {
	parent, child net.Conn
}

func newPipe() *pipe {
	a, b := net.Pipe()
	return &pipe{parent: a, child: b}
}

func (p *pipe) close() { p.parent.Close(); p.child.Close() }

// slowConn delays every write (throttling) and closes both ends of the pipe
// once limit bytes have been written (a crash mid-burst); limit 0: never.
type slowConn struct {
	net.Conn
	p       *pipe
	delay   time.Duration
	limit   int64
	written atomic.Int64
	// gate, when set, holds every write until it is closed: a child that
	// reads nothing for a while.
	gate chan struct{}
}

func (c *slowConn) Write(b []byte) (int, error) {
	if c.gate != nil {
		<-c.gate
	}
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	if c.limit > 0 {
		if n := c.written.Load(); n+int64(len(b)) > c.limit {
			k := int(max(c.limit-n, 0))
			if k > 0 {
				c.Conn.Write(b[:k])
			}
			c.written.Add(int64(k))
			c.p.close()
			return k, io.ErrClosedPipe
		}
	}
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// session is a running pair of Serve calls over one pipe.
type session struct {
	p    *pipe
	wg   sync.WaitGroup
	errs [2]error
}

func (s *session) cut() {
	s.p.close()
	s.wg.Wait()
}

// wait waits for both Serve calls to end on their own.
func (s *session) wait(t testing.TB) {
	t.Helper()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Serve calls did not end")
	}
}

// down connects snd and rcv; parentEnd, if set, wraps the parent's end.
func down(t testing.TB, snd *Sender, rcv *Receiver, wrap func(*pipe) io.ReadWriteCloser) *session {
	t.Helper()
	cursor, err := rcv.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	s := &session{p: newPipe()}
	var pe io.ReadWriteCloser = s.p.parent
	if wrap != nil {
		pe = wrap(s.p)
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.errs[0] = snd.Serve(context.Background(), pe, cursor) }()
	go func() { defer s.wg.Done(); s.errs[1] = rcv.Serve(context.Background(), s.p.child) }()
	t.Cleanup(s.cut)
	return s
}

// up connects rep and col, resuming after acked.
func up(t testing.TB, rep *Reporter, col *Collector, acked uint64) *session {
	t.Helper()
	s := &session{p: newPipe()}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.errs[0] = rep.Serve(context.Background(), s.p.child, acked) }()
	go func() { defer s.wg.Done(); s.errs[1] = col.Serve(context.Background(), s.p.parent) }()
	t.Cleanup(s.cut)
	return s
}

// converged waits until the inbox equals the mailbox and the cursor has
// reached the mailbox's last write.
func converged(t testing.TB, parent, child *store.Store, rcv *Receiver, rev int64) {
	t.Helper()
	want := hash(t, parent, mailbox)
	poll.Until(t, "inbox to converge", func() error {
		c, err := rcv.Cursor()
		switch {
		case err != nil:
			return err
		case c < uint64(rev):
			return fmt.Errorf("cursor at %d, want %d", c, rev)
		case hash(t, child, inbox) != want:
			return errors.New("the inbox differs from the mailbox")
		}
		return nil
	})
}
