package server

import (
	"net"
	"testing"
)

func TestAPIURLs(t *testing.T) {
	for _, c := range []struct {
		listen, apiAddr, raftAddr string
		self, advertised          string
	}{
		{"127.0.0.1:6443", "127.0.0.1:6443", "", "https://127.0.0.1:6443", "https://127.0.0.1:6443"},
		{"127.0.0.1:6443", "127.0.0.1:6443", "10.0.0.5:7001", "https://127.0.0.1:6443", "https://127.0.0.1:6443"},
		{"[::]:6443", "0.0.0.0:6443", "", "https://127.0.0.1:6443", "https://127.0.0.1:6443"},
		{"[::]:6443", "0.0.0.0:6443", "10.0.0.5:7001", "https://127.0.0.1:6443", "https://10.0.0.5:6443"},
		{"[::]:6443", "[::]:6443", "[fd00::5]:7001", "https://[::1]:6443", "https://[fd00::5]:6443"},
		{"[::]:6443", ":6443", "", "https://127.0.0.1:6443", "https://127.0.0.1:6443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		self, advertised := apiURLs(addr, c.apiAddr, c.raftAddr)
		if self != c.self || advertised != c.advertised {
			t.Errorf("apiURLs(%s, %q, %q) = %s, %s; want %s, %s", c.listen, c.apiAddr, c.raftAddr, self, advertised, c.self, c.advertised)
		}
	}
}
