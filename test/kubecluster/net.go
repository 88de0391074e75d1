package kubecluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

var (
	portsMu sync.Mutex
	// portsGiven are the ports handed out in this test binary: a port is
	// free when chosen but taken only once its process binds it, and
	// another cluster starting meanwhile must not be given it again.
	portsGiven = map[int]bool{}
)

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago and were never returned before in this process.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var (
		ports     []int
		listeners []net.Listener
	)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for len(ports) < n {
		// Holding every listener open until the end keeps the kernel from
		// handing out one port twice.
		l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portsGiven[port] {
			continue
		}
		portsGiven[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// getOK GETs url and returns nil on a 200 response.
func getOK(ctx context.Context, client *http.Client, url string) error {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// insecureClient probes the health endpoints of the controller manager and
// the scheduler, which serve self-signed certificates on 127.0.0.1.
func insecureClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a test process
	}}
}
