package session

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/proxy"
)

// DefaultMaxProxyStreams is how many proxy streams a parent opens at once
// on one child's link unless DownlinkConfig.MaxProxyStreams says otherwise.
const DefaultMaxProxyStreams = 1024

// proxyVersion is the link protocol version that carries proxy streams.
const proxyVersion = 5

// OpenProxy opens a proxy stream toward destination on the link of the
// child it is below (proxy.Opener): the connected child that claims it,
// the most recently seen if several do. It refuses at once, with a
// *proxy.Error, a destination no child claims (NotFound), one whose child
// or edge is disconnected, saying when it was last seen, or whose child's
// link is too old for proxy streams (Unavailable), and a link that carries
// DownlinkConfig.MaxProxyStreams streams already (TooManyStreams).
func (d *Downlink) OpenProxy(ctx context.Context, destination string) (link.Stream, error) {
	via, dest, linked := d.claimant(destination)
	var conn link.Conn
	var version uint32
	if via != nil {
		d.mu.Lock()
		conn, version = via.conn, via.version
		d.mu.Unlock()
	}
	if via == nil || !linked {
		return nil, d.unreachable(destination, via != nil, dest)
	}
	if version < proxyVersion {
		return nil, proxy.Errorf(proxy.Unavailable, "destination %s is below relay %s, whose link speaks protocol %d; reaching it needs %d",
			destination, via.id.Name, version, proxyVersion)
	}
	limit := int32(d.cfg.MaxProxyStreams)
	if limit <= 0 {
		limit = DefaultMaxProxyStreams
	}
	if via.proxyStreams.Add(1) > limit {
		via.proxyStreams.Add(-1)
		via.proxyRefused.Add(1)
		return nil, proxy.Errorf(proxy.TooManyStreams, "the link to %s carries %d proxy streams, its limit", via.id.Name, limit)
	}
	st, err := conn.OpenStream(ctx, link.StreamProxy)
	if err != nil {
		via.proxyStreams.Add(-1)
		return nil, proxy.Errorf(proxy.Unavailable, "destination %s: opening a stream to %s: %v", destination, via.id.Name, err)
	}
	return &countedStream{Stream: st, n: &via.proxyStreams}, nil
}

// claimant returns the child that destination is below: the connected
// one that claims it, the most recently seen if several do (nil if none),
// its claim, and whether that child's link to this relay is up and the
// child says the destination is connected.
func (d *Downlink) claimant(destination string) (via *childState, dest wire.Destination, linked bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.children {
		for _, a := range c.announced {
			if a.Name != destination {
				continue
			}
			if _, gone := d.hidden[c.id.Name][a.Name]; gone {
				continue
			}
			up := c.conn != nil && a.Connected
			if via == nil || up && !linked || up == linked && a.LastSeen > dest.LastSeen {
				via, dest, linked = c, a, up
			}
		}
	}
	return via, dest, linked
}

// unreachable says why destination cannot be reached through a link of
// this relay: claimed (known says whether by a child of this process,
// whose claim is dest) but disconnected; linked to another replica of
// this root, which a replica learns from the route and link records they
// share (the error names it); or unknown.
func (d *Downlink) unreachable(destination string, known bool, dest wire.Destination) error {
	if rec, replica, ok := d.recorded(destination); ok {
		if replica != "" && replica != d.replica() {
			return &proxy.Error{Code: proxy.Unavailable, Replica: replica,
				Message: fmt.Sprintf("destination %s is linked to replica %s of the root", destination, replica)}
		}
		if !known {
			known, dest = true, rec
		}
	}
	if !known {
		return proxy.Errorf(proxy.NotFound, "destination %s is not below %s", destination, d.cfg.Name)
	}
	return proxy.Errorf(proxy.Unavailable, "destination %s is disconnected (%s)", destination, lastSeen(dest.LastSeen))
}

// recorded finds destination in the route records (claims superseded
// left out): a claim of it, and the replica holding the link of a child
// that claims it connected, if any.
func (d *Downlink) recorded(destination string) (claim wire.Destination, replica string, ok bool) {
	routes, err := d.cfg.Mailboxes.Routes()
	if err != nil {
		return claim, "", false
	}
	sup, err := d.cfg.Mailboxes.Superseded(nil)
	if err != nil {
		return claim, "", false
	}
	for child, rds := range routes {
		if _, gone := sup[child][destination]; gone {
			continue
		}
		for _, rd := range rds {
			if rd.Name != destination {
				continue
			}
			claim, ok = wire.Destination{Name: rd.Name, Connected: rd.Connected, LastSeen: rd.LastSeen}, true
			if link, _, err := readLink(d.cfg.Store, linkKey(d.space(), child)); err == nil && link.Connected && rd.Connected {
				return claim, link.Replica, true
			}
		}
	}
	return claim, "", ok
}

// lastSeen says when a destination was last heard from.
func lastSeen(unixNano int64) string {
	if unixNano == 0 {
		return "never seen"
	}
	t := time.Unix(0, unixNano)
	return "last seen " + t.UTC().Format(time.RFC3339) + ", " + time.Since(t).Round(time.Second).String() + " ago"
}

// countedStream is a proxy stream counted against its link's limit until
// it is closed or aborted.
type countedStream struct {
	link.Stream
	n    *atomic.Int32
	once sync.Once
}

func (s *countedStream) release() { s.once.Do(func() { s.n.Add(-1) }) }

func (s *countedStream) Close() error {
	s.release()
	return s.Stream.Close()
}

func (s *countedStream) Abort() {
	s.release()
	s.Stream.Abort()
}

// serveProxies hands the proxy streams the parent opens on conn to
// UplinkConfig.ServeProxy while the link lasts, each in the goroutine that
// read its kind; other kinds, or every stream when ServeProxy is nil, are
// closed. No goroutine waits for the next stream.
func (u *Uplink) serveProxies(ctx context.Context, conn link.Conn) {
	conn.ServeStreams(func(st link.Stream, kind link.StreamKind) {
		if kind != link.StreamProxy || u.cfg.ServeProxy == nil {
			st.Close()
			return
		}
		u.cfg.ServeProxy(ctx, st)
	})
}
