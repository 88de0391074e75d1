package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/test/poll"
)

// pipeStream is one end of an in-memory link.Stream pair; read counts the
// bytes its reader took.
type pipeStream struct {
	r    *io.PipeReader
	w    *io.PipeWriter
	read *atomic.Int64
}

func streamPair() (*pipeStream, *pipeStream) {
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	return &pipeStream{r: ar, w: aw, read: new(atomic.Int64)}, &pipeStream{r: br, w: bw, read: new(atomic.Int64)}
}

func (p *pipeStream) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read.Add(int64(n))
	return n, err
}
func (p *pipeStream) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeStream) CloseWrite() error           { return p.w.Close() }
func (p *pipeStream) Close() error {
	p.w.Close()
	return p.r.Close()
}
func (p *pipeStream) Abort() {
	p.w.CloseWithError(errors.New("aborted"))
	p.r.CloseWithError(errors.New("aborted"))
}

var _ link.Stream = (*pipeStream)(nil)

// openerFunc adapts a function to Opener.
type openerFunc func(ctx context.Context, dest string) (link.Stream, error)

func (f openerFunc) OpenProxy(ctx context.Context, dest string) (link.Stream, error) {
	return f(ctx, dest)
}

// tree is root → region → edge: Dial at the root goes through a Forward at
// the region to an Accept at the edge, which hands its Conn to serve.
type tree struct {
	edgeLink *pipeStream // the region's end of its link stream to the edge
	refuse   error       // what the region's opener answers instead
	accepted chan *Conn
}

func newTree(t *testing.T, serve func(*Conn)) (*tree, Opener) {
	tr := &tree{accepted: make(chan *Conn, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	toEdge := openerFunc(func(ctx context.Context, dest string) (link.Stream, error) {
		if tr.refuse != nil {
			return nil, tr.refuse
		}
		region, edge := streamPair()
		tr.edgeLink = region
		wg.Go(func() {
			c, err := Accept(edge, "edge-1")
			if err != nil {
				return
			}
			tr.accepted <- c
			serve(c)
		})
		return region, nil
	})
	root := openerFunc(func(_ context.Context, dest string) (link.Stream, error) {
		rootEnd, regionEnd := streamPair()
		wg.Go(func() { Forward(ctx, regionEnd, toEdge, slog.Default()) })
		return rootEnd, nil
	})
	return tr, root
}

func echo(c *Conn) {
	defer c.Close()
	_, _ = io.Copy(c, c)
}

// Bytes cross two tiers both ways, beyond the window, with the user the
// root named; a half-close reaches the other end as EOF.
func TestStreamThroughTheTree(t *testing.T) {
	_, root := newTree(t, echo)
	req := Request{Destination: "edge-1", ID: "r1", User: "alice", Groups: []string{"devs"}, Extra: map[string][]string{"k": {"v"}}}
	c, err := Dial(context.Background(), root, req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3*wire.ProxyWindow/16+5)
	go func() {
		if _, err := c.Write(payload); err != nil {
			t.Error(err)
		}
		_ = c.CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo: %d bytes of %d, %v", len(got), len(payload), err)
	}
}

// The edge sees the request as the root sent it.
func TestAcceptGivesTheRequest(t *testing.T) {
	tr, root := newTree(t, echo)
	req := Request{Destination: "edge-1", ID: "r2", User: "alice", UID: "u", Groups: []string{"a", "b"}, Extra: map[string][]string{"x": {"1", "2"}}}
	c, err := Dial(context.Background(), root, req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	edge := <-tr.accepted
	if got := edge.Request(); fmt.Sprint(got) != fmt.Sprint(req) {
		t.Errorf("edge got %+v, want %+v", got, req)
	}
}

// A relay on the way that cannot reach the destination answers with its
// reason, which the root reads as an *Error; writes fail rather than wait
// for credit that never comes.
func TestRefusalReachesTheRoot(t *testing.T) {
	for _, want := range []*Error{Errorf(Unavailable, "edge-1 last seen 5m ago"), Errorf(TooManyStreams, "100 streams"), Errorf(NotFound, "no edge-9")} {
		tr, root := newTree(t, echo)
		tr.refuse = want
		c, err := Dial(context.Background(), root, Request{Destination: "edge-1", ID: "r3"})
		if err != nil {
			t.Fatal(err)
		}
		// The request goes out before the answer comes back, more than
		// a window of it.
		_, werr := c.Write(make([]byte, 2*wire.ProxyWindow))
		_, rerr := c.Read(make([]byte, 10))
		var got *Error
		if !errors.As(rerr, &got) || got.Code != want.Code || got.Message != want.Message {
			t.Errorf("Read: %v, want %v", rerr, want)
		}
		if werr == nil {
			t.Error("Write of twice the window succeeded on a refused stream")
		}
		c.Close()
	}
}

// A stream whose reader stopped holds at most its window at the reading
// end, and nothing in the link: the reader's goroutine took every byte the
// writer's credit allowed off the link stream, and the writer waits for
// credit, not for the link.
func TestStalledReaderHoldsOnlyItsWindow(t *testing.T) {
	tr, root := newTree(t, func(c *Conn) {
		defer c.Close()
		_, _ = c.Write(make([]byte, 10*wire.ProxyWindow)) // blocks: nobody reads
	})
	c, err := Dial(context.Background(), root, Request{Destination: "edge-1", ID: "r4"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-tr.accepted
	// Nobody reads c. The region's end of the edge link took the window
	// plus frame headers off the link, and no more.
	poll.True(t, "the window crossed the link", func() bool { return tr.edgeLink.read.Load() >= wire.ProxyWindow })
	limit := int64(wire.ProxyWindow + 64*(wire.ProxyWindow/maxChunk+2))
	poll.Holds(t, "no more than the window crosses", 300*time.Millisecond, func() error {
		if n := tr.edgeLink.read.Load(); n > limit {
			return fmt.Errorf("%d bytes crossed the link, window %d", n, wire.ProxyWindow)
		}
		return nil
	})
	// Reading resumes the stream.
	n, err := io.CopyN(io.Discard, c, 3*wire.ProxyWindow)
	if err != nil || n != 3*wire.ProxyWindow {
		t.Fatalf("read %d after the stall: %v", n, err)
	}
}

// A deadline in the past wakes a blocked Read, as net.Conn's do
// (http.Server relies on it).
func TestReadDeadline(t *testing.T) {
	_, root := newTree(t, func(c *Conn) { defer c.Close(); _, _ = io.Copy(io.Discard, c) })
	c, err := Dial(context.Background(), root, Request{Destination: "edge-1", ID: "r5"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); errc <- err }()
	time.AfterFunc(20*time.Millisecond, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v, want a deadline error", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v, want a deadline error", err)
	}
}

// HTTP, the edge's business on these streams, works over them.
func TestHTTPOverStreams(t *testing.T) {
	l := &chanListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s as %s", r.Method, r.URL.Path, r.Context().Value(reqKey{}).(Request).User)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, reqKey{}, c.(*Conn).Request())
		},
	}
	go srv.Serve(l)
	defer srv.Close()
	_, root := newTree(t, l.put)
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return Dial(ctx, root, Request{Destination: "edge-1", ID: "r6", User: "bob"})
	}}
	resp, err := (&http.Client{Transport: tr}).Get("http://edge-1/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "GET /api/v1/pods as bob" {
		t.Errorf("body %q", body)
	}
}

// chanListener is a net.Listener of the Conns put on it.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *chanListener) put(c *Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return addr("test") }

type reqKey struct{}
