package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// Request is what a proxy stream opens with: where it goes and on whose
// behalf.
type Request struct {
	// Destination is the SyncTarget name of the destination.
	Destination string
	// ID names the request in logs and in the root's audit log.
	ID string
	// User, UID, Groups and Extra are the user the root authenticated
	// (after impersonation), for the edge to impersonate at its cluster.
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Code classifies an Error.
type Code int

const (
	// Internal: a relay on the way failed.
	Internal Code = iota
	// NotFound: no relay on the way knows the destination.
	NotFound
	// Unavailable: the destination is known, but the link toward it is
	// down, or its relay speaks no proxy streams.
	Unavailable
	// TooManyStreams: the link toward the destination carries as many
	// proxy streams as its parent allows.
	TooManyStreams
)

// Error is a relay's refusal of a proxy stream.
type Error struct {
	Code    Code
	Message string
	// Replica, when set, names the replica of the root that holds the
	// link toward the destination (an Opener of another replica says so):
	// the request can be passed to it.
	Replica string
}

func (e *Error) Error() string { return "proxy: " + e.Message }

// Errorf returns an *Error of code c.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

var codes = map[Code]wire.ErrorCode{
	Internal: wire.CodeInternal, NotFound: wire.CodeNotFound,
	Unavailable: wire.CodeUnavailable, TooManyStreams: wire.CodeTooManyStreams,
}

func fromWire(m *wire.Error) *Error {
	for c, wc := range codes {
		if wc == m.Code {
			return &Error{Code: c, Message: m.Message}
		}
	}
	return &Error{Code: Internal, Message: m.Message}
}

// Opener opens a proxy stream on the link toward a destination
// (session.Downlink). Its errors are *Error where the cause is known.
type Opener interface {
	OpenProxy(ctx context.Context, destination string) (link.Stream, error)
}

// Dial opens a proxy stream toward req.Destination through o and returns
// its Conn at once: bytes written now travel behind ProxyOpen. A refusal on
// the way is returned by the Conn's first Read (and fails its writes) as
// an *Error.
func Dial(ctx context.Context, o Opener, req Request) (*Conn, error) {
	st, err := o.OpenProxy(ctx, req.Destination)
	if err != nil {
		return nil, err
	}
	c := newConn(st, req, true)
	if err := c.send(openMessage(req)); err != nil {
		st.Close()
		return nil, err
	}
	go c.readLoop(wire.NewReader(st, nil))
	return c, nil
}

func openMessage(r Request) *wire.ProxyOpen {
	return &wire.ProxyOpen{Destination: r.Destination, ID: r.ID, User: r.User, UID: r.UID, Groups: r.Groups, Extra: r.Extra}
}

func requestOf(m *wire.ProxyOpen) Request {
	return Request{Destination: m.Destination, ID: m.ID, User: m.User, UID: m.UID, Groups: m.Groups, Extra: m.Extra}
}

// openTimeout bounds the wait for ProxyOpen on a stream a parent opened.
const openTimeout = 10 * time.Second

// readOpen reads the ProxyOpen a stream starts with.
func readOpen(in link.Stream) (*wire.Reader, Request, error) {
	if d, ok := in.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now().Add(openTimeout))
		defer d.SetReadDeadline(time.Time{})
	}
	r := wire.NewReader(in, nil)
	open, err := wire.Expect[*wire.ProxyOpen](r)
	if err != nil {
		return nil, Request{}, fmt.Errorf("proxy: reading ProxyOpen: %w", err)
	}
	return r, requestOf(open), nil
}

// Forward passes a proxy stream its parent opened on to the child that
// leads to its destination (through o), and copies bytes both ways until
// either end closes. A stream o cannot open is refused toward the parent
// with o's error.
func Forward(ctx context.Context, in link.Stream, o Opener, log *slog.Logger) {
	defer in.Close()
	r, req, err := readOpen(in)
	if err != nil {
		log.Info("refusing a proxy stream", "error", err)
		return
	}
	out, err := o.OpenProxy(ctx, req.Destination)
	if err != nil {
		refuse(in, err)
		return
	}
	defer out.Close()
	w := wire.NewWriter(out, nil)
	if err := w.Write(openMessage(req)); err == nil {
		err = w.Flush()
	}
	if err != nil {
		refuse(in, Errorf(Unavailable, "destination %s: opening the stream below: %v", req.Destination, err))
		return
	}
	splice(in, r.Rest(), out)
}

// splice copies down to out and out to up. A direction whose source ends
// is half-closed at its destination; one whose destination stops taking
// bytes (its reader went away) is read on and dropped, so that the other
// direction still delivers what it carries; one whose source fails (its
// writer went away) aborts both streams.
func splice(up link.Stream, down io.Reader, out link.Stream) {
	var wg sync.WaitGroup
	pass := func(dst link.Stream, src io.Reader) {
		w := &errWriter{w: dst}
		_, err := io.Copy(w, src)
		switch {
		case err == nil:
			_ = dst.CloseWrite()
		case w.err != nil:
			_, _ = io.Copy(io.Discard, src)
		default:
			up.Abort()
			out.Abort()
		}
	}
	wg.Go(func() { pass(out, down) })
	wg.Go(func() { pass(up, out) })
	wg.Wait()
}

// errWriter remembers the error of its writer.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// refuse answers a proxy stream with err (an *Error, or Internal) and
// closes it once the opener has, or after a while: the opener may still
// be writing what it sent behind ProxyOpen.
func refuse(in link.Stream, err error) {
	var pe *Error
	if !errors.As(err, &pe) {
		pe = &Error{Code: Internal, Message: err.Error()}
	}
	w := wire.NewWriter(in, nil)
	if w.Write(&wire.Error{Code: codes[pe.Code], Message: pe.Message}) == nil && w.Flush() == nil {
		_ = in.CloseWrite()
		drain := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, in); close(drain) }()
		select {
		case <-drain:
		case <-time.After(openTimeout):
		}
	}
}

// Accept takes a proxy stream its parent opened at the edge serving
// destination self: it answers ProxyReady and returns the stream's Conn,
// whose Request says whom for. A stream for another destination is
// refused (NotFound).
func Accept(in link.Stream, self string) (*Conn, error) {
	r, req, err := readOpen(in)
	if err != nil {
		in.Close()
		return nil, err
	}
	if req.Destination != self {
		refuse(in, Errorf(NotFound, "destination %s is not served by edge %s", req.Destination, self))
		in.Close()
		return nil, fmt.Errorf("proxy: a stream for destination %s at edge %s", req.Destination, self)
	}
	c := newConn(in, req, false)
	if err := c.send(&wire.ProxyReady{}); err != nil {
		in.Close()
		return nil, err
	}
	go c.readLoop(r)
	return c, nil
}

type addr string

func (a addr) Network() string { return "canopy-proxy" }
func (a addr) String() string  { return string(a) }
