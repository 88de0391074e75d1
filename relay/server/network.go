package server

import (
	"crypto/tls"
	"fmt"
	"sync"

	"github.com/quic-go/quic-go"

	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
)

// Network places relays on an in-memory packet network instead of the
// host's sockets: link addresses (--link-addr, --parent) are addresses of
// the network, and every link is QUIC over it, with whatever latency,
// loss and partitions the network is given. Simulations and tests use it
// to run whole trees in one process. It is safe for concurrent use.
type Network struct {
	Net *memnet.Network
	// Link holds the link timeouts of relays on this network.
	Link link.Config

	mu   sync.Mutex
	next int
}

// NewNetwork wraps n; cfg's zero fields take link defaults.
func NewNetwork(n *memnet.Network, cfg link.Config) *Network {
	return &Network{Net: n, Link: cfg}
}

// transport gives a relay an endpoint of its own to dial from.
func (n *Network) transport(name string) (*quic.Transport, error) {
	n.mu.Lock()
	n.next++
	addr := fmt.Sprintf("127.0.3.%d:%d", 1+n.next/60000, 1024+n.next%60000)
	n.mu.Unlock()
	pc, err := n.Net.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("server: network endpoint for %s: %w", name, err)
	}
	return &quic.Transport{Conn: pc}, nil
}

// listenConfig is a parent's listener on addr of the network.
func (n *Network) listenConfig(addr string, tlsCfg *tls.Config) (link.ListenConfig, error) {
	pc, err := n.Net.Listen(addr)
	if err != nil {
		return link.ListenConfig{}, fmt.Errorf("server: --link-addr %s: %w", addr, err)
	}
	return link.ListenConfig{TLS: tlsCfg, PacketConn: pc, DisableTCP: true, Config: n.Link}, nil
}
