package server

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Two sibling regions found by gossip, four edges configured with the
// first only: the edges learn the second from their parent; when the
// first stops, they re-home to it, the root shows root/r2/<edge>, every
// inbox converges to what r2 routes, later changes arrive there, and no
// edge's syncer applies again what it had applied.
func TestSiblingRegionsTakeOverEdges(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	r1, stopR1, r2 := startSiblingRegions(t, root, token)

	names := []string{"e1", "e2", "e3", "e4"}
	edges := map[string]*Child{}
	for _, name := range names {
		edges[name] = startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
			Parents: []string{r1.LinkAddr()}, JoinToken: token, VirtualCluster: true, InMemory: true})
	}
	put := func(name, dest string) {
		t.Helper()
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:%q}},"data":{"k":"v"}}`,
			name, edgev1alpha1.DestinationsAnnotation, dest)
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
		if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		put("cm-"+name, name)
	}
	inv := inventoryClient(t, root)
	pathOf := func(name string) string {
		st, err := inv.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		path, _, _ := unstructured.NestedString(st.Object, "status", "path")
		if connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected"); !connected {
			return ""
		}
		return path
	}
	converged := func(region *Child, n int) func() bool {
		return func() bool {
			for _, name := range names {
				e := edges[name]
				want, err1 := tree.RoutedContentHash(region.Store(), layout.InboxSpace, region.Mailboxes().Routing(name))
				got, err2 := tree.ContentHash(e.Store(), layout.InboxSpace)
				lr, err3 := e.Store().List(store.ListOptions{Space: layout.InboxSpace})
				if err1 != nil || err2 != nil || err3 != nil || want != got || len(lr.Items) != n ||
					e.syncer.Stats().Managed != n || e.syncer.Stats().InSync != n {
					return false
				}
			}
			return true
		}
	}
	for _, name := range names {
		poll.True(t, name+" under r1", func() bool { return pathOf(name) == "root/r1/"+name })
		poll.True(t, name+" to learn r2", func() bool { return slices.Equal(edges[name].Uplink().Siblings(), []string{r2.LinkAddr()}) })
	}
	poll.True(t, "edges converged under r1", converged(r1, 1))
	applies := map[string]int64{}
	for _, name := range names {
		applies[name] = edges[name].syncer.Stats().Applies
	}

	stopR1()
	for _, name := range names {
		poll.True(t, name+" under r2", func() bool { return pathOf(name) == "root/r2/"+name })
	}
	poll.True(t, "edges converged under r2", converged(r2, 1))
	for _, name := range names {
		if st := edges[name].syncer.Stats(); st.Applies != applies[name] || st.Deletes != 0 {
			t.Errorf("%s: %d applies and %d deletes after re-homing, want none (%d applies before)", name, st.Applies-applies[name], st.Deletes, applies[name])
		}
		if got := edges[name].Uplink().Siblings(); len(got) != 0 {
			t.Errorf("%s still knows siblings %v; r2 has none left", name, got)
		}
	}
	for _, name := range names {
		put("after-"+name, name)
	}
	poll.True(t, "changes after the move", converged(r2, 2))
}

// startSiblingRegion starts region name under root, gossiping with the
// regions at join, and waits until it serves; stop stops it.
func startSiblingRegion(t testing.TB, root *Root, token, name string, join ...string) (c *Child, stop func()) {
	t.Helper()
	c, err := OpenChild(ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Join: join, InMemory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop = serveInBackground(t, name, c.Serve)
	poll.True(t, name+" serving", func() bool { return c.Uplink().Connected() && c.LinkAddr() != "" && c.Siblings() != nil })
	return c, stop
}

// startSiblingRegions starts regions r1 and r2 under root, gossiping, and
// waits until each knows the other; stopR1 stops r1.
func startSiblingRegions(t testing.TB, root *Root, token string) (r1 *Child, stopR1 func(), r2 *Child) {
	t.Helper()
	r1, stopR1 = startSiblingRegion(t, root, token, "r1")
	r2, _ = startSiblingRegion(t, root, token, "r2", r1.Siblings().PeerAddr())
	poll.True(t, "r1 and r2 to find each other", func() bool {
		a, _ := r1.Siblings().Addrs()
		b, _ := r2.Siblings().Addrs()
		return slices.Equal(a, []string{r2.LinkAddr()}) && slices.Equal(b, []string{r1.LinkAddr()})
	})
	return r1, stopR1, r2
}
