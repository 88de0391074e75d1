package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startTestRoot(t testing.TB) *Root { return startTestRootOn(t, nil) }

// startTestRootOn starts a root whose links run over net (nil: loopback).
func startTestRootOn(t testing.TB, net *Network) *Root {
	t.Helper()
	cfg := Config{Name: "root", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}
	if net != nil {
		cfg.LinkAddr, cfg.Network = "127.0.2.1:7443", net
	}
	r, err := Open(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, "root", r.Serve)
	<-r.Ready()
	return r
}

// startStoppableRoot starts a root, as startTestRoot does, and returns
// what reopenRoot needs to start it again: its configuration and a stop.
func startStoppableRoot(t testing.TB) (*Root, Config, func()) {
	t.Helper()
	cfg := Config{Name: "root", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}
	r, err := Open(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, "root", r.Serve)
	<-r.Ready()
	return r, cfg, stop
}

// reopenRoot stops root and opens it again, serving, on its data
// directory and addresses.
func reopenRoot(t testing.TB, cfg Config, root *Root, stop func()) *Root {
	t.Helper()
	stop()
	cfg.APIAddr, cfg.LinkAddr = root.Addr(), root.LinkAddr()
	r, err := Open(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, "root again", r.Serve)
	<-r.Ready()
	return r
}

func startTestChild(t testing.TB, cfg ChildConfig) *Child {
	t.Helper()
	c := startChildOnly(t, cfg)
	serveInBackground(t, cfg.Name, c.Serve)
	return c
}

// startChildOnly opens a child relay without serving it.
func startChildOnly(t testing.TB, cfg ChildConfig) *Child {
	t.Helper()
	c, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveInBackground runs serve until the returned stop (or the test's end)
// cancels it; an error from serve fails the test.
func serveInBackground(t testing.TB, name string, serve func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s stopped with: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func joinToken(t testing.TB, r *Root) string {
	t.Helper()
	tok, err := r.IssueJoinToken(t.Context(), pki.JoinLimits{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A root, a region under it and an edge (with a virtual cluster) under the
// region: every link is joined with one token and mutually authenticated,
// and what the admin writes into the root's downsync space, through the
// kube API, reaches the region's inbox through its mailbox (a view).
func TestTreeDepthTwo(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	region := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "region-a", DataDir: t.TempDir(),
		Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0"})
	poll.True(t, "region connected", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	edge := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "edge-1", DataDir: t.TempDir(),
		Parents: []string{region.LinkAddr()}, JoinToken: token, VirtualCluster: true})
	poll.True(t, "edge connected", func() bool { return edge.Uplink().Connected() })

	children := root.Children()
	if len(children) != 1 || children[0].Identity.String() != "root/region-a" || !children[0].Connected {
		t.Fatalf("root children = %+v", children)
	}
	poll.True(t, "region sees its child", func() bool {
		d := region.Downlink()
		if d == nil {
			return false
		}
		cs := d.Children()
		return len(cs) == 1 && cs[0].Identity.String() == "root/region-a/edge-1" && cs[0].Connected
	})

	// Per-link metrics are on the root's /metrics.
	poll.True(t, "link metrics", func() bool {
		body, err := adminClient(t, root, "default").CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		return err == nil && strings.Contains(string(body), `canopy_link_connected{child="region-a"} 1`) &&
			strings.Contains(string(body), `canopy_link_bytes_total{child="region-a",direction="out",stream="downsync"}`)
	})

	// The admin writes into the downsync space through the kube API (its
	// context is in the admin kubeconfig), targeting edge-1 and a
	// destination nobody announced; the region's mailbox, a view at the
	// root, shows the first ten, and its inbox receives them.
	cs := adminClient(t, root, layout.DownsyncSpace)
	for i := range 12 {
		dest := "edge-1"
		if i >= 10 {
			dest = "nowhere"
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i),
			Annotations: map[string]string{edgev1alpha1.DestinationsAnnotation: dest}}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, "the region's inbox to equal its mailbox at the root", func() bool {
		want, err1 := tree.RoutedContentHash(root.Store(), layout.DownsyncSpace, root.Routing("region-a"))
		got, err2 := tree.ContentHash(region.Store(), layout.InboxSpace)
		n, _ := region.Store().List(store.ListOptions{Space: layout.InboxSpace, Resource: store.Resource{Resource: "configmaps"}})
		return err1 == nil && err2 == nil && want == got && len(n.Items) == 10
	})
	poll.True(t, "the admin kubeconfig to list the region's mailbox", func() bool {
		cfg, err := clientcmd.LoadFromFile(root.KubeconfigPath())
		return err == nil && cfg.Contexts[layout.MailboxSpace("region-a")] != nil
	})
	mb := adminClient(t, root, layout.MailboxSpace("region-a"))
	list, err := mb.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 10 {
		t.Fatalf("the mailbox view lists %d ConfigMaps (%v), want 10", len(list.Items), err)
	}
	if _, err := mb.CoreV1().ConfigMaps("default").Get(context.Background(), "cm-11", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get of an object outside the view: %v, want NotFound", err)
	}
	direct := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "direct"}}
	if _, err := mb.CoreV1().ConfigMaps("default").Create(context.Background(), direct, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a write into a mailbox view: %v, want Forbidden", err)
	}

	// Subtree announcements reach the root with their paths.
	edge2 := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "edge-2", DataDir: t.TempDir(),
		Parents: []string{region.LinkAddr()}, JoinToken: token, VirtualCluster: true, Labels: map[string]string{"zone": "b"}})
	poll.True(t, "the root to see both edges with their paths", func() bool {
		dests, _ := root.down.Subtree()
		return len(dests) == 2 && strings.Join(dests[0].Path, "/") == "region-a/edge-1" &&
			strings.Join(dests[1].Path, "/") == "region-a/edge-2" && dests[1].Labels["zone"] == "b"
	})
	// ... and the inventory space shows them as SyncTargets.
	inv := inventoryClient(t, root)
	poll.True(t, "SyncTargets in the inventory", func() bool {
		st, err := inv.Get(context.Background(), "edge-2", metav1.GetOptions{})
		if err != nil {
			return false
		}
		path, _, _ := unstructured.NestedString(st.Object, "status", "path")
		connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
		return path == "root/region-a/edge-2" && connected && st.GetLabels()["zone"] == "b"
	})

	// Objects addressed to destinations are routed by the region to the
	// children that hold them, and only there.
	targets := map[string]string{"to-1": "edge-1", "to-2": "edge-2", "to-both": "edge-1,edge-2", "to-none": "edge-9"}
	for name, dests := range targets {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{edgev1alpha1.DestinationsAnnotation: dests}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inboxNames := func(c *Child) string {
		list, _ := c.Store().List(store.ListOptions{Space: layout.InboxSpace, Resource: store.Resource{Resource: "configmaps"}})
		var names []string
		for _, it := range list.Items {
			if strings.HasPrefix(it.Key.Name, "to-") {
				names = append(names, it.Key.Name)
			}
		}
		return strings.Join(names, ",")
	}
	poll.True(t, "routed inboxes", func() bool {
		return inboxNames(edge) == "to-1,to-both" && inboxNames(edge2) == "to-2,to-both"
	})
	// Each edge receives the object's destinations trimmed to its own
	// subtree: what crosses a link grows with the subtree, not the fleet.
	for c, want := range map[*Child]string{edge: "edge-1", edge2: "edge-2"} {
		o, err := c.Store().Get(store.Key{Space: layout.InboxSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "to-both"})
		if err != nil {
			t.Fatal(err)
		}
		if got := mailbox.Targets(o); len(got) != 1 || got[0] != want {
			t.Fatalf("%s holds to-both with destinations %v, want [%s]", c.cfg.Name, got, want)
		}
	}

	// Re-addressing moves the object: it leaves edge-1 and reaches edge-2.
	cm, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), "to-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[edgev1alpha1.DestinationsAnnotation] = "edge-2"
	if _, err := cs.CoreV1().ConfigMaps("default").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "re-routed inboxes", func() bool {
		return inboxNames(edge) == "to-both" && inboxNames(edge2) == "to-1,to-2,to-both"
	})
}

// Depth 4: root → r1 → r2 → r3 → edge. Nothing assumes three tiers: each
// region joins with the same token, announces its subtree and routes by
// destination.
func TestTreeDepthFour(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	parent := root.LinkAddr()
	for _, name := range []string{"r1", "r2", "r3"} {
		r := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(),
			Parents: []string{parent}, JoinToken: token, LinkAddr: "127.0.0.1:0"})
		poll.True(t, name+" serving", func() bool { return r.Uplink().Connected() && r.LinkAddr() != "" })
		parent = r.LinkAddr()
	}
	edge := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "deep-edge", DataDir: t.TempDir(),
		Parents: []string{parent}, JoinToken: token, VirtualCluster: true})
	poll.True(t, "the root to see the edge four tiers down", func() bool {
		dests, _ := root.down.Subtree()
		return len(dests) == 1 && strings.Join(dests[0].Path, "/") == "r1/r2/r3/deep-edge" && dests[0].Connected
	})
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep","namespace":"default","annotations":{"` +
		edgev1alpha1.DestinationsAnnotation + `":"deep-edge"}},"data":{"k":"v"}}`
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "deep"}
	if _, err := root.Store().Create(context.Background(), k, []byte(obj)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the object to reach the edge's inbox", func() bool {
		_, err := edge.Store().Get(store.Key{Space: layout.InboxSpace, Resource: k.Resource, Namespace: "default", Name: "deep"})
		return err == nil
	})
}

func inventoryClient(t *testing.T, root *Root) dynamic.ResourceInterface {
	t.Helper()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: root.KubeconfigPath()},
		&clientcmd.ConfigOverrides{CurrentContext: "inventory"})
	rc, err := cc.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return dc.Resource(edgev1alpha1.SyncTargetsGVR)
}

func adminClient(t testing.TB, root *Root, space string) *kubernetes.Clientset {
	t.Helper()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: root.KubeconfigPath()},
		&clientcmd.ConfigOverrides{CurrentContext: space})
	rc, err := cc.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	// No client-side rate limit (client-go's default is 5 per second):
	// benchmarks measure the server.
	rc.QPS, rc.Burst = 1e6, 1e6
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// An edge's inbox is on its disk: restarted while its parent is down, it
// still holds its last desired state (and keeps trying to reconnect).
func TestEdgeKeepsInboxWhileParentIsDown(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	dataDir := t.TempDir()
	cfg := ChildConfig{Role: pki.RoleEdge, Name: "edge-1", DataDir: dataDir, Parents: []string{root.LinkAddr()}, JoinToken: token, VirtualCluster: true}

	c, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, "edge-1", c.Serve)
	poll.True(t, "edge connected", func() bool { return c.Uplink().Connected() })
	for i := range 5 {
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: fmt.Sprintf("cm-%d", i)}
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default","annotations":{%q:"edge-1"}}}`, i, edgev1alpha1.DestinationsAnnotation)
		if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	var want string
	poll.True(t, "inbox synced", func() bool {
		want, _ = tree.RoutedContentHash(root.Store(), layout.DownsyncSpace, root.Routing("edge-1"))
		got, err := tree.ContentHash(c.Store(), layout.InboxSpace)
		n, _ := c.Store().List(store.ListOptions{Space: layout.InboxSpace})
		return err == nil && got == want && len(n.Items) == 5
	})
	stop()

	// The parent is now unreachable: an address nothing listens on.
	cfg.Parents, cfg.JoinToken = []string{"127.0.0.1:1"}, ""
	c2 := startTestChild(t, cfg)
	got, err := tree.ContentHash(c2.Store(), layout.InboxSpace)
	if err != nil || got != want {
		t.Fatalf("inbox after an offline restart: %v, hash %s want %s", err, got, want)
	}
	if c2.Uplink().Connected() {
		t.Fatal("connected to a parent that does not exist")
	}
}

// A destination re-homes: its edge, joined under region r1, restarts with
// r2 as its parent. r2 serves it with the certificate it has (no token),
// the root's inventory shows the new path, and the edge's inbox converges
// to what it should hold, while the root sends r2 only the edge's own
// objects (r2 never had them), not everything again.
func TestEdgeRehomesToAnotherRegion(t *testing.T) {
	grace := summaryGrace
	summaryGrace = time.Second
	t.Cleanup(func() { summaryGrace = grace })
	root := startTestRoot(t)
	token := joinToken(t, root)
	regions := map[string]*Child{}
	for _, name := range []string{"r1", "r2"} {
		regions[name] = startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(),
			Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
		poll.True(t, name+" serving", func() bool { return regions[name].Uplink().Connected() && regions[name].LinkAddr() != "" })
	}
	stay := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "stay", DataDir: t.TempDir(),
		Parents: []string{regions["r2"].LinkAddr()}, JoinToken: token, VirtualCluster: true, InMemory: true})
	cfg := ChildConfig{Role: pki.RoleEdge, Name: "mover", DataDir: t.TempDir(),
		Parents: []string{regions["r1"].LinkAddr()}, JoinToken: token, VirtualCluster: true}
	mover, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, "mover", mover.Serve)
	inv := inventoryClient(t, root)
	pathOf := func(name string) (string, bool) {
		st, err := inv.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		path, _, _ := unstructured.NestedString(st.Object, "status", "path")
		connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
		return path, connected
	}
	poll.True(t, "mover under r1", func() bool { p, c := pathOf("mover"); return p == "root/r1/mover" && c })

	put := func(name, dest string) {
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:%q}}}`, name, edgev1alpha1.DestinationsAnnotation, dest)
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
		if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		put(fmt.Sprintf("for-mover-%d", i), "mover")
	}
	for i := range 20 {
		put(fmt.Sprintf("for-stay-%d", i), "stay")
	}
	holds := func(c *Child, n int) func() bool {
		return func() bool {
			lr, err := c.Store().List(store.ListOptions{Space: layout.InboxSpace})
			return err == nil && len(lr.Items) == n
		}
	}
	poll.True(t, "mover's 3 objects", holds(mover, 3))
	poll.True(t, "stay's 20 objects", holds(stay, 20))

	stop()
	var before uint64
	for _, c := range root.Children() {
		if c.Identity.Name == "r2" {
			before = c.Down.Objects
		}
	}
	cfg.Parents = []string{regions["r2"].LinkAddr()}
	mover = startTestChild(t, cfg)
	poll.True(t, "mover under r2 in the inventory", func() bool { p, c := pathOf("mover"); return p == "root/r2/mover" && c })
	put("after-the-move", "mover")
	poll.True(t, "mover's inbox at r2", func() bool {
		want, err1 := tree.RoutedContentHash(regions["r2"].Store(), layout.InboxSpace, regions["r2"].Mailboxes().Routing("mover"))
		got, err2 := tree.ContentHash(mover.Store(), layout.InboxSpace)
		return err1 == nil && err2 == nil && want == got && holds(mover, 4)()
	})
	for _, c := range root.Children() {
		if c.Identity.Name == "r2" {
			if sent := c.Down.Objects - before; sent != 4 {
				t.Fatalf("the root sent r2 %d objects for the move, want 4 (mover's own)", sent)
			}
		}
	}
	// Reported state follows: r2 reports the mover's (forwarded) live
	// state, and r1 stops reporting it once its grace has passed, so the
	// root does not count it twice.
	fromMover := func(c *Child) int {
		lr, _ := c.Store().List(store.ListOptions{Space: layout.OutboxSpace})
		n := 0
		for _, o := range lr.Items {
			if reports.DestinationOf(o) == "mover" {
				n++
			}
		}
		return n
	}
	poll.True(t, "r2 to report the mover's objects", func() bool { return fromMover(regions["r2"]) == 4 })
	poll.True(t, "r1 to stop reporting the mover", func() bool { return fromMover(regions["r1"]) == 0 })
}
