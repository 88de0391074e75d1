package procs

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// handedOut holds the ports FreeAddr gave, so that no two processes of
// one test binary are told the same one.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreeAddr returns a loopback address with a port that was free for TCP
// and UDP a moment ago (a relay's link listens on both). Ports come from
// below the kernel's ephemeral range (32768 and up on Linux), where an
// outgoing connection or another process's port 0 cannot take them
// between this check and the process's bind, and never twice from one
// test binary.
func FreeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		_ = ln.Close()
		if err != nil {
			continue
		}
		_ = pc.Close()
		handedOut.ports[port] = true
		return addr
	}
	t.Fatal("find a free port: none of 1000 tried below 32000 was free")
	return ""
}
