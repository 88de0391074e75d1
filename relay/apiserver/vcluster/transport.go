package vcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/pprof"
	"strconv"
	"sync"
)

// InprocTransport is an http.RoundTripper that serves every request by
// calling an http.Handler in the caller's process: no sockets, no
// serialization beyond what the handler itself does. The handler runs in a
// goroutine of its own and its response streams to the caller through an
// io.Pipe, so long-running responses (watches) work: RoundTrip returns as
// soon as the handler has written its header or flushed, and every Flush
// makes what was written so far readable.
//
// A handler that hijacks the connection (an upgrade to SPDY or WebSocket:
// exec, attach, port-forward) gets one end of a net.Pipe; the response it
// writes there is read back as the RoundTrip's response, and for 101
// Switching Protocols the body is the pipe's other end, an
// io.ReadWriteCloser, as net/http's Transport returns it (so that
// httputil.ReverseProxy carries upgrades through it).
//
// The request's context cancels the handler; so does closing the response
// body. InprocTransport is safe for concurrent use.
type InprocTransport struct {
	handler http.Handler
}

// NewInprocTransport returns a transport that serves requests with h.
func NewInprocTransport(h http.Handler) *InprocTransport {
	return &InprocTransport{handler: h}
}

var _ http.RoundTripper = (*InprocTransport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *InprocTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	sreq := serverRequest(ctx, req)
	pr, pw := io.Pipe()
	rw := &pipeResponseWriter{ctx: ctx, header: http.Header{}, pw: pw, ready: make(chan struct{}), hijacked: make(chan net.Conn, 1)}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				rw.finish(fmt.Errorf("vcluster: handler panic: %v", p))
				return
			}
			rw.finish(nil)
		}()
		pprof.Do(ctx, profileLabels, func(context.Context) { t.handler.ServeHTTP(rw, sreq) })
	}()
	select {
	case <-rw.ready:
	case conn := <-rw.hijacked:
		pr.Close()
		return upgradedResponse(req, conn, cancel)
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	resp := &http.Response{
		Status:        strconv.Itoa(rw.code) + " " + http.StatusText(rw.code),
		StatusCode:    rw.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rw.sent,
		Body:          &pipeBody{r: pr, close: func() error { cancel(); return pr.Close() }},
		ContentLength: -1,
		Request:       req,
	}
	if cl := rw.sent.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			resp.ContentLength = n
		}
	}
	return resp, nil
}

// upgradedResponse reads the response a hijacking handler wrote on conn;
// the body of a 101 is the connection itself.
func upgradedResponse(req *http.Request, conn net.Conn, cancel context.CancelFunc) (*http.Response, error) {
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		cancel()
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &upgradedBody{Reader: br, conn: conn, cancel: cancel}
		return resp, nil
	}
	resp.Body = &pipeBody{r: resp.Body, close: func() error { cancel(); return conn.Close() }}
	return resp, nil
}

// upgradedBody is the client's end of an upgraded connection.
type upgradedBody struct {
	*bufio.Reader
	conn   net.Conn
	cancel context.CancelFunc
}

func (b *upgradedBody) Write(p []byte) (int, error) { return b.conn.Write(p) }

func (b *upgradedBody) Close() error {
	b.cancel()
	return b.conn.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// serverRequest turns a client request into what an http.Server would hand
// its handler: a path-only URL, RequestURI, Host, a non-nil Body.
func serverRequest(ctx context.Context, req *http.Request) *http.Request {
	r := req.Clone(ctx)
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	r.RequestURI = req.URL.RequestURI()
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.RemoteAddr = "inproc"
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if r.Body == nil {
		r.Body = http.NoBody
	}
	return r
}

// pipeBody is the response body: closing it stops the handler.
type pipeBody struct {
	r     io.Reader
	close func() error
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *pipeBody) Close() error { return b.close() }

// pipeResponseWriter is the handler's side. The header is sent (ready is
// closed) on WriteHeader, the first Write, Flush or when the handler
// returns; writes then go straight into the pipe, so a handler blocks until
// the client reads (or closes the body). A 101 is held until the handler
// hijacks the connection (hijacked), then written on it, as net/http does.
type pipeResponseWriter struct {
	ctx      context.Context // the request's
	header   http.Header
	pw       *io.PipeWriter
	hijacked chan net.Conn

	mu        sync.Mutex
	code      int
	sent      http.Header // snapshot of header at WriteHeader
	ready     chan struct{}
	readyOnce sync.Once
	conn      net.Conn // the handler's end, once hijacked
}

var _ http.Hijacker = (*pipeResponseWriter)(nil)

// Hijack implements http.Hijacker.
func (w *pipeResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.mu.Lock()
	if w.conn != nil {
		w.mu.Unlock()
		return nil, nil, http.ErrHijacked
	}
	if w.sent != nil && w.code != http.StatusSwitchingProtocols {
		w.mu.Unlock()
		return nil, nil, errors.New("vcluster: hijack after the response was sent")
	}
	client, server := net.Pipe()
	w.conn = server
	var head []byte
	if w.sent != nil {
		// The 101 written before hijacking goes out first.
		var b bytes.Buffer
		fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", w.code, http.StatusText(w.code))
		_ = w.sent.Write(&b)
		b.WriteString("\r\n")
		head = b.Bytes()
	}
	w.mu.Unlock()
	w.hijacked <- client
	if head != nil {
		// A client gone before reading it must not block the handler.
		stop := context.AfterFunc(w.ctx, func() { server.Close() })
		_, err := server.Write(head)
		stop()
		if err != nil {
			return nil, nil, err
		}
	}
	return server, bufio.NewReadWriter(bufio.NewReader(server), bufio.NewWriter(server)), nil
}

func (w *pipeResponseWriter) Header() http.Header { return w.header }

func (w *pipeResponseWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *pipeResponseWriter) writeHeaderLocked(code int) {
	if w.sent != nil {
		return
	}
	if code < 100 || code > 999 {
		code = http.StatusInternalServerError
	}
	w.code = code
	w.sent = w.header.Clone()
	w.sent.Del("Transfer-Encoding")
	if code != http.StatusSwitchingProtocols {
		w.readyOnce.Do(func() { close(w.ready) })
	}
}

func (w *pipeResponseWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.writeHeaderLocked(http.StatusOK)
	w.mu.Unlock()
	return w.pw.Write(b)
}

// Flush implements http.Flusher. Writes are never buffered, so it only
// sends the header.
func (w *pipeResponseWriter) Flush() {
	w.mu.Lock()
	w.writeHeaderLocked(http.StatusOK)
	w.mu.Unlock()
}

// finish ends the response when the handler returns.
func (w *pipeResponseWriter) finish(err error) {
	code := http.StatusOK
	if err != nil {
		code = http.StatusInternalServerError
	}
	w.mu.Lock()
	w.writeHeaderLocked(code)
	if w.conn == nil {
		// A 101 never hijacked is answered as it is, without a body.
		w.readyOnce.Do(func() { close(w.ready) })
	}
	w.mu.Unlock()
	if err != nil {
		w.pw.CloseWithError(err)
		return
	}
	w.pw.Close()
}
