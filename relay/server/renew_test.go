package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// chainOf returns the certificate chain in c's data directory, leaf first.
func chainOf(t *testing.T, c *Child) []*x509.Certificate {
	t.Helper()
	cert, _, err := pki.LoadChildIdentity(c.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	out := []*x509.Certificate{cert.Leaf}
	for _, der := range cert.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ic)
	}
	return out
}

// linkOf is what a parent's downlink says of its child name.
func linkOf(children []session.ChildStatus, name string) (session.ChildStatus, error) {
	for _, c := range children {
		if c.Identity.Name == name {
			return c, nil
		}
	}
	return session.ChildStatus{}, fmt.Errorf("no child %s", name)
}

// links returns what the root says of the region's link and the region of
// the edge's.
func links(root *Root, region *Child) (rl, el session.ChildStatus, err error) {
	if rl, err = linkOf(root.Children(), "region"); err != nil {
		return
	}
	el, err = linkOf(region.Downlink().Children(), "edge")
	return
}

// placeOn writes a ConfigMap for dest into the root's downsync space and
// waits until edge holds it.
func placeOn(t *testing.T, root *Root, edge *Child, name string) {
	t.Helper()
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:%q}}}`,
		name, edgev1alpha1.DestinationsAnnotation, edge.cfg.Name)
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
	if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, name+" at "+edge.cfg.Name, func() bool { return slices.Contains(inbox(edge), "configmaps/default/"+name) })
}

// A root issues 20-second certificates, and its region 20-second
// certificates capped at its own, and both the region and its edge renew
// theirs 14 seconds before expiry: over their links, without a restart,
// with the same keys. The links stay up past the expiry of the
// certificates they were opened with (no reconnect, the parents still see
// the original certificates) and carry placements; the edge's renewed
// chain holds the region's renewed certificate. Cut and healed, both links
// open again with certificates renewed over the link (the originals have
// expired by then), and placements still reach the edge.
func TestCertificatesRenewOverTheLink(t *testing.T) {
	const validity, renewBefore = 20 * time.Second, 14 * time.Second
	mn := memnet.NewSeeded(7)
	t.Cleanup(func() { _ = mn.Close() })
	lcfg := link.DefaultConfig()
	lcfg.KeepAlivePeriod, lcfg.MaxIdleTimeout = 250*time.Millisecond, 2*time.Second
	net := NewNetwork(mn, lcfg)
	root, err := Open(Config{Name: "root", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.2.1:7443", Network: net,
		ChildCertValidity: validity}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, "root", root.Serve)
	<-root.Ready()
	token := joinToken(t, root)
	region := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "region", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.4.1:7443", Network: net, InMemory: true, RenewBefore: renewBefore, ChildCertValidity: validity})
	poll.True(t, "the region serving", func() bool { return region.LinkAddr() != "" })
	region0 := chainOf(t, region)[0]
	edge := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "edge", DataDir: t.TempDir(), Parents: []string{region.LinkAddr()},
		JoinToken: token, Network: net, InMemory: true, RenewBefore: renewBefore})
	poll.True(t, "the edge linked", edge.Uplink().Connected)
	edge0 := chainOf(t, edge)[0]
	if edge0.NotAfter.After(region0.NotAfter) {
		t.Fatalf("the edge's certificate expires at %s, after its region's (%s)", edge0.NotAfter, region0.NotAfter)
	}

	// Both renew, the edge under the renewed region.
	poll.Until(t, "the region and the edge renewed, the edge under the renewed region", func() error {
		r, e := chainOf(t, region), chainOf(t, edge)
		switch {
		case region.Uplink().Renewals() == 0 || r[0].Equal(region0):
			return errors.New("the region has not renewed")
		case edge.Uplink().Renewals() == 0 || e[0].Equal(edge0):
			return errors.New("the edge has not renewed")
		case len(e) != 2 || e[1].Equal(region0):
			return errors.New("the edge's chain holds the region's original certificate")
		}
		return nil
	})
	for _, c := range []struct {
		relay *Child
		was   *x509.Certificate
	}{{region, region0}, {edge, edge0}} {
		now := chainOf(t, c.relay)[0]
		if !now.PublicKey.(*ecdsa.PublicKey).Equal(c.was.PublicKey) {
			t.Errorf("%s has another key after renewing", c.relay.cfg.Name)
		}
		if !now.NotAfter.After(c.was.NotAfter) || now.Subject.String() != c.was.Subject.String() || now.URIs[0].String() != c.was.URIs[0].String() {
			t.Errorf("%s renewed: %s %s until %s (was %s %s until %s)", c.relay.cfg.Name, now.Subject, now.URIs, now.NotAfter, c.was.Subject, c.was.URIs, c.was.NotAfter)
		}
	}
	placeOn(t, root, edge, "after-renewal")

	// The links outlive the certificates they were opened with.
	linksUp := func() error {
		rl, el, err := links(root, region)
		if err != nil {
			return err
		}
		switch {
		case !rl.Connected || rl.Links != 1 || region.Uplink().Reconnects() != 0:
			return fmt.Errorf("the region's link: connected %v, %d links, %d reconnects", rl.Connected, rl.Links, region.Uplink().Reconnects())
		case !el.Connected || el.Links != 1 || edge.Uplink().Reconnects() != 0:
			return fmt.Errorf("the edge's link: connected %v, %d links, %d reconnects", el.Connected, el.Links, edge.Uplink().Reconnects())
		case !rl.Certificate.Equal(region0) || !el.Certificate.Equal(edge0):
			return errors.New("a parent sees another certificate than the link was opened with")
		}
		return nil
	}
	poll.Holds(t, "both links up, on their first handshake, until the original certificates expire", time.Until(region0.NotAfter)+time.Second, linksUp)
	if time.Now().Before(edge0.NotAfter) {
		t.Fatal("the edge's original certificate outlived its region's")
	}
	placeOn(t, root, edge, "after-expiry")

	// Cut both links; once the parents see them gone, heal.
	rootAddr, regionUp := root.LinkAddr(), region.dialTransport.Conn.LocalAddr().String()
	regionDown, edgeUp := region.LinkAddr(), edge.dialTransport.Conn.LocalAddr().String()
	for _, p := range [][2]string{{rootAddr, regionUp}, {regionDown, edgeUp}} {
		if err := mn.Partition(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the parents to see both links down", func() error {
		rl, el, err := links(root, region)
		if err != nil {
			return err
		}
		if rl.Connected || el.Connected {
			return fmt.Errorf("region connected %v, edge connected %v", rl.Connected, el.Connected)
		}
		return nil
	})
	for _, p := range [][2]string{{rootAddr, regionUp}, {regionDown, edgeUp}} {
		if err := mn.Heal(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "both links again, with the renewed certificates", func() error {
		rl, el, err := links(root, region)
		if err != nil {
			return err
		}
		switch {
		case !rl.Connected || !el.Connected:
			return fmt.Errorf("region connected %v, edge connected %v", rl.Connected, el.Connected)
		case rl.Links < 2 || el.Links < 2:
			return fmt.Errorf("region %d links, edge %d links", rl.Links, el.Links)
		case rl.Certificate.Equal(region0) || el.Certificate.Equal(edge0):
			return errors.New("a child linked with its original certificate")
		case !rl.Certificate.NotAfter.After(time.Now()) || !el.Certificate.NotAfter.After(time.Now()):
			return errors.New("a child linked with an expired certificate")
		}
		return nil
	})
	placeOn(t, root, edge, "after-relink")
	t.Logf("renewals: region %d, edge %d", region.Uplink().Renewals(), edge.Uplink().Renewals())
}
