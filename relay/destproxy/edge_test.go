package destproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveConn serves one connection with no listener waiting, and once the
// server is closed, closes the next connection at once.
func TestServeConn(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	get := func() (*http.Response, error) {
		client, server := net.Pipe()
		defer client.Close()
		_ = client.SetDeadline(time.Now().Add(10 * time.Second))
		serveConn(srv, server)
		req, _ := http.NewRequest(http.MethodGet, "http://edge/", nil)
		req.Close = true
		if err := req.Write(client); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(client), req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		if err == nil && string(body) != "ok" {
			t.Errorf("body %q", body)
		}
		return resp, err
	}
	if _, err := get(); err != nil {
		t.Fatalf("served connection: %v", err)
	}
	srv.Close()
	if resp, err := get(); err == nil {
		t.Fatalf("a connection after Close was served: %s", resp.Status)
	}
}
