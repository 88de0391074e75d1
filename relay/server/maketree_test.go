package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// testTree is a whole tree built by makeTree.
type testTree struct {
	root *Root
	// parents maps every relay below the root to its parent (nil for the
	// root's children), edges lists the leaves.
	parents map[*Child]*Child
	edges   []*Child
	// under lists the edge names below each child of the root.
	under map[string][]string
}

// makeTree builds root → fanouts[0] children → ... → edges (the last
// level), every relay real and in this process, its links over net (nil:
// loopback UDP). Regions and edges keep their stores in memory.
func makeTree(t testing.TB, net *Network, fanouts ...int) *testTree {
	t.Helper()
	r := startTestRootOn(t, net)
	tt := &testTree{root: r, parents: map[*Child]*Child{}, under: map[string][]string{}}
	token := joinToken(t, r)
	regionAddr := 0
	var grow func(parent *Child, parentAddr string, top string, depth int)
	grow = func(parent *Child, parentAddr string, top string, depth int) {
		for i := range fanouts[depth] {
			name := fmt.Sprintf("n%d", i)
			if parent != nil {
				name = fmt.Sprintf("%s-%d", parent.cfg.Name, i)
			}
			cfg := ChildConfig{Name: name, DataDir: t.TempDir(), Parents: []string{parentAddr}, JoinToken: token, InMemory: true, Network: net}
			last := depth == len(fanouts)-1
			if last {
				cfg.Role, cfg.VirtualCluster = pki.RoleEdge, false
			} else {
				regionAddr++
				cfg.Role, cfg.LinkAddr = pki.RoleRegion, "127.0.0.1:0"
				if net != nil {
					cfg.LinkAddr = fmt.Sprintf("127.0.4.%d:7443", regionAddr)
				}
			}
			c := startTestChild(t, cfg)
			tt.parents[c] = parent
			top := top
			if parent == nil {
				top = name
			}
			if last {
				tt.edges = append(tt.edges, c)
				tt.under[top] = append(tt.under[top], name)
				continue
			}
			poll.True(t, name+" serving", func() bool { return c.LinkAddr() != "" })
			grow(c, c.LinkAddr(), top, depth+1)
		}
	}
	grow(nil, r.LinkAddr(), "", 0)
	poll.True(t, "every edge announced at the root", func() bool {
		dests, _ := r.down.Subtree()
		if len(dests) != len(tt.edges) {
			return false
		}
		for _, d := range dests {
			if !d.Connected {
				return false
			}
		}
		return true
	})
	return tt
}

// converged reports whether every edge's inbox equals what its parent
// holds for it (the root's or its region's mailbox).
func (tt *testTree) converged() error {
	for _, e := range tt.edges {
		parentStore, space, mb := tt.root.Store(), layout.DownsyncSpace, tt.root.mailboxes
		if p := tt.parents[e]; p != nil {
			parentStore, space, mb = p.Store(), layout.InboxSpace, p.Mailboxes()
		}
		want, err := tree.RoutedContentHash(parentStore, space, mb.Routing(e.cfg.Name))
		if err != nil {
			return err
		}
		got, err := tree.ContentHash(e.Store(), layout.InboxSpace)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("edge %s differs from its mailbox", e.cfg.Name)
		}
	}
	return nil
}

// Root → 3 regions → 3 edges each, every link over an in-memory network
// with 5 ms latency and 5 % loss: objects addressed to every edge reach
// them all, and every edge's inbox equals its mailbox (content hashes).
func TestTreeOverLossyNetwork(t *testing.T) {
	mn := memnet.NewSeeded(11)
	t.Cleanup(func() { _ = mn.Close() })
	mn.SetDefault(memnet.Link{Latency: 5 * time.Millisecond, Loss: 0.05})
	cfg := link.DefaultConfig()
	cfg.KeepAlivePeriod, cfg.MaxIdleTimeout = 500*time.Millisecond, 5*time.Second
	tt := makeTree(t, NewNetwork(mn, cfg), 3, 3)
	if len(tt.edges) != 9 {
		t.Fatalf("%d edges, want 9", len(tt.edges))
	}
	for top, edges := range tt.under {
		for i := range 10 {
			name := fmt.Sprintf("cm-%s-%d", top, i)
			data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:%q}},"data":{"i":"%d"}}`,
				name, edgev1alpha1.DestinationsAnnotation, strings.Join(edges, ","), i)
			k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
			if _, err := tt.root.Store().Create(context.Background(), k, []byte(data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.True(t, "every edge holding its 10 objects", func() bool {
		for _, e := range tt.edges {
			list, err := e.Store().List(store.ListOptions{Space: layout.InboxSpace})
			if err != nil || len(list.Items) != 10 {
				return false
			}
		}
		return tt.converged() == nil
	})
}

// A region is cut off from the root while 1 000 changes are made to 50
// keys; after the partition heals, what the root sends it to catch up is
// the 50 latest values, not 1 000 events (DESIGN.md section 2).
func TestPartitionedRegionCatchesUpWithState(t *testing.T) {
	mn := memnet.NewSeeded(3)
	t.Cleanup(func() { _ = mn.Close() })
	cfg := link.DefaultConfig()
	cfg.KeepAlivePeriod, cfg.MaxIdleTimeout = 200*time.Millisecond, 1500*time.Millisecond
	tt := makeTree(t, NewNetwork(mn, cfg), 1, 1)
	region, edge := tt.parents[tt.edges[0]], tt.edges[0]
	const keys, updates, size = 50, 1000, 1000
	write := func(i int, v string) {
		// Incompressible-ish values, so bytes on the wire track content.
		payload := fmt.Sprintf("%x", sha256.Sum256([]byte(v)))
		for len(payload) < size {
			payload += fmt.Sprintf("%x", sha256.Sum256([]byte(payload)))
		}
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"k%d","namespace":"default","annotations":{%q:%q}},"data":{"v":%q}}`,
			i, edgev1alpha1.DestinationsAnnotation, edge.cfg.Name, payload[:size])
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: fmt.Sprintf("k%d", i)}
		if cur, err := tt.root.Store().Get(k); err == nil {
			_, err = tt.root.Store().Update(context.Background(), k, []byte(data), cur.Revision)
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := tt.root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		write(i, "initial")
	}
	poll.True(t, "the edge to hold the 50 keys", func() bool { return tt.converged() == nil && len(inbox(edge)) == keys })

	rootAddr, regionAddr := tt.root.LinkAddr(), region.dialTransport.Conn.LocalAddr().String()
	if err := mn.Partition(rootAddr, regionAddr); err != nil {
		t.Fatal(err)
	}
	regionLink := func() session.ChildStatus {
		for _, c := range tt.root.Children() {
			if c.Identity.Name == region.cfg.Name {
				return c
			}
		}
		t.Fatal("the root does not know the region")
		return session.ChildStatus{}
	}
	poll.True(t, "the root to see the region gone", func() bool { return !regionLink().Connected })
	for u := range updates {
		write(u%keys, fmt.Sprint("update-", u))
	}
	latest := 0
	lr, _ := tt.root.Store().List(store.ListOptions{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}})
	for _, o := range lr.Items {
		latest += len(o.Data)
	}
	before := regionLink().Down
	if err := mn.Heal(rootAddr, regionAddr); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the edge to converge after the partition", func() bool {
		return regionLink().Connected && tt.converged() == nil && regionLink().Down.LagRevisions == 0
	})
	after := regionLink().Down
	bytes, objs := after.BytesSent-before.BytesSent, after.Objects-before.Objects
	t.Logf("catch-up after %d changes to %d keys: %d objects, %d bytes on the root's link (latest values: %d bytes)", updates, keys, objs, bytes, latest)
	if objs != keys {
		t.Fatalf("the root sent %d objects to catch up, want the %d latest values", objs, keys)
	}
	if limit := uint64(latest + latest/2); bytes > limit {
		t.Fatalf("the root sent %d bytes to catch up, want <= %d (1.5x the latest values)", bytes, limit)
	}
}
