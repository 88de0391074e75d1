package session

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/test/poll"
)

// A parent closes a link's control stream only once nothing writes it:
// quic-go forbids a Close concurrent with a Write. The parent here tells
// its child of new siblings every millisecond, each Write on the control
// stream lasting a millisecond, and the test ends the link twenty times;
// a Close during a Write is counted.
func TestControlStreamClosedAfterItsWriters(t *testing.T) {
	ln := &watchedListener{conns: make(chan link.Conn, 64)}
	var n atomic.Int64
	root := startRootWith(t, func(c *DownlinkConfig) {
		ln.Listener = c.Listener
		c.Listener = ln
		c.Siblings = func() ([]string, <-chan struct{}) {
			changed := make(chan struct{})
			time.AfterFunc(time.Millisecond, func() { close(changed) })
			// Addresses the child never dials: its parent answers first.
			return []string{fmt.Sprintf("127.0.0.1:%d", 20000+n.Add(1)%1000)}, changed
		}
	})
	startEdge(t, root.addr, t.TempDir(), root.token, newStore(t))
	for i := range 20 {
		var conn link.Conn
		select {
		case conn = <-ln.conns:
		case <-time.After(15 * time.Second):
			t.Fatalf("link %d: the child did not connect", i)
		}
		poll.True(t, "the child told of siblings", func() bool { return ln.writes.Load() > int64(5*(i+1)) })
		_ = conn.Close("test: link ends")
	}
	// The last closes happen once their writers end: none may hit a
	// Write in the 200 ms that follow either.
	poll.Holds(t, "no control stream closed during a Write", 200*time.Millisecond, func() error {
		if got := ln.closedWhileWriting.Load(); got != 0 {
			return fmt.Errorf("%d closed during a Write, over %d writes", got, ln.writes.Load())
		}
		return nil
	})
}

// watchedListener hands out links whose control streams count the
// Closes made while a Write is under way.
type watchedListener struct {
	Listener
	conns              chan link.Conn
	writes             atomic.Int64
	closedWhileWriting atomic.Int64
}

func (l *watchedListener) Accept(ctx context.Context) (link.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	w := &watchedConn{Conn: c, l: l}
	select {
	case l.conns <- w:
	default:
	}
	return w, nil
}

type watchedConn struct {
	link.Conn
	l *watchedListener
}

func (c *watchedConn) AcceptStream(ctx context.Context) (link.Stream, link.StreamKind, error) {
	st, kind, err := c.Conn.AcceptStream(ctx)
	if err == nil && kind == link.StreamControl {
		st = &watchedStream{Stream: st, l: c.l}
	}
	return st, kind, err
}

type watchedStream struct {
	link.Stream
	l       *watchedListener
	writing atomic.Int32
}

func (s *watchedStream) Write(p []byte) (int, error) {
	s.writing.Add(1)
	defer s.writing.Add(-1)
	s.l.writes.Add(1)
	time.Sleep(time.Millisecond) // a slow peer: the window a Close must not hit
	return s.Stream.Write(p)
}

func (s *watchedStream) Close() error {
	if s.writing.Load() > 0 {
		s.l.closedWhileWriting.Add(1)
	}
	return s.Stream.Close()
}
