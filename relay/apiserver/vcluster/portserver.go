package vcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// portHandler is the tiny HTTP server behind every container port a
// simulated pod declares: it answers any request with one line naming the
// pod, the port and the request, once it has read the request's body
// (net.Pipe is unbuffered: a client still writing it would otherwise
// find the connection closed).
func portHandler(pod *corev1.Pod, port int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from %s/%s port %d: %s %s\n", pod.Namespace, pod.Name, port, r.Method, r.URL.RequestURI())
	})
}

// declaresPort reports whether one of pod's containers declares port.
func declaresPort(pod *corev1.Pod, port int32) bool {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				return true
			}
		}
	}
	return false
}

// refused is the error of a connection to a port nothing listens on.
func refused(op, network, addr string) error {
	return &net.OpError{Op: op, Net: network, Addr: pipeAddr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// pipeTransport is an http.Transport whose connections are in-process
// pipes: dialing addr serves the pipe's other end with the handler that
// route returns for addr (an error refuses the dial). Nothing listens; each
// connection costs the goroutines of its http.Server while it is open.
func pipeTransport(route func(addr string) (http.Handler, error)) *http.Transport {
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h, err := route(addr)
			if err != nil {
				return nil, err
			}
			client, server := net.Pipe()
			go serveConn(server, h)
			return client, nil
		},
	}
}

// serveConn serves HTTP on c with h until c is closed (by the server, the
// client, or whoever hijacked it).
func serveConn(c net.Conn, h http.Handler) {
	l := &connListener{conn: &closeNotifyConn{Conn: c, closed: make(chan struct{})}}
	srv := &http.Server{Handler: h, ErrorLog: discardLog}
	_ = srv.Serve(l)
}

// discardLog silences the in-process servers' connection errors (a
// client going away mid-response).
var discardLog = log.New(io.Discard, "", 0)

// connListener hands out one connection, then blocks until it is closed.
type connListener struct {
	conn *closeNotifyConn
	once sync.Once
}

func (l *connListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.conn.closed
	return nil, net.ErrClosed
}

func (l *connListener) Close() error   { return nil }
func (l *connListener) Addr() net.Addr { return pipeAddr("pipe") }

// closeNotifyConn closes closed when it is closed.
type closeNotifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

type pipeAddr string

func (a pipeAddr) Network() string { return "tcp" }
func (a pipeAddr) String() string  { return string(a) }

// forwardPort copies between stream and the tiny HTTP server of pod's
// port until either side ends; a port the pod does not declare refuses
// the connection, as a kubelet's port-forward to a closed port does.
func forwardPort(pod *corev1.Pod, port int32, stream io.ReadWriteCloser) error {
	if !declaresPort(pod, port) {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s/%s, IPv4: %w",
			port, pod.Namespace, pod.Name, refused("dial", "tcp4", "127.0.0.1:"+strconv.Itoa(int(port))))
	}
	client, server := net.Pipe()
	go serveConn(server, portHandler(pod, port))
	// The copy toward the server ends when the caller closes stream
	// after this returns, or when the client closes its end.
	go func() {
		_, _ = io.Copy(client, stream)
		client.Close()
	}()
	_, err := io.Copy(stream, client)
	client.Close()
	if errors.Is(err, io.ErrClosedPipe) {
		err = nil
	}
	return err
}
