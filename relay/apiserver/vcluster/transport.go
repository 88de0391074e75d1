package vcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	rw := &pipeResponseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				rw.finish(fmt.Errorf("vcluster: handler panic: %v", p))
				return
			}
			rw.finish(nil)
		}()
		t.handler.ServeHTTP(rw, sreq)
	}()
	select {
	case <-rw.ready:
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
		Body:          &pipeBody{pr: pr, cancel: cancel},
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
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *pipeBody) Close() error {
	b.cancel()
	return b.pr.Close()
}

// pipeResponseWriter is the handler's side. The header is sent (ready is
// closed) on WriteHeader, the first Write, Flush or when the handler
// returns; writes then go straight into the pipe, so a handler blocks until
// the client reads (or closes the body).
type pipeResponseWriter struct {
	header http.Header
	pw     *io.PipeWriter

	mu    sync.Mutex
	code  int
	sent  http.Header // snapshot of header at WriteHeader
	ready chan struct{}
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
	close(w.ready)
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
	w.mu.Unlock()
	if err != nil {
		w.pw.CloseWithError(err)
		return
	}
	w.pw.Close()
}
