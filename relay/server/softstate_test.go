package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// placeCollected places a one-replica Deployment shop/web (with
// annotations) on every destination labelled app=yes, with a
// StatusCollector counting the destinations and summing their ready
// replicas; its CombinedStatus is combinedName in namespace shop.
func (pt *placementTree) placeCollected(t *testing.T, annotations map[string]any) {
	t.Helper()
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "all", "labels": map[string]any{"app": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"app": "yes"}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, pt.wds, edgev1alpha1.SchemeGroupVersion.WithResource("statuscollectors"), map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector", "metadata": map[string]any{"name": "ready"},
		"spec": map[string]any{"combinedFields": []any{
			map[string]any{"name": "destinations", "type": "COUNT"},
			map[string]any{"name": "ready", "type": "SUM", "subject": "has(obj.status.readyReplicas) ? obj.status.readyReplicas : 0"}}}})
	pt.apply(t, pt.wds, deployGVR, webDeployment(1, annotations))
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "yes"}}},
			"downsync":         []any{map[string]any{"apiGroup": "apps", "resources": []any{"deployments"}, "namespaces": []any{"shop"}}},
			"statusCollectors": []any{"ready"}}})
}

// collectedTree starts region r1, dialing parents with token, in memory,
// and edges e1-e3 (labelled app=yes, with virtual clusters) under it; it
// places placeCollected's Deployment through root's API and waits until
// the CombinedStatus counts three destinations ready.
func collectedTree(t *testing.T, root *Root, parents []string, token string) *placementTree {
	t.Helper()
	pt, _ := collectedTreeOf(t, root, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(), Parents: parents,
		JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	return pt
}

// collectedTreeOf is collectedTree with the region's configuration; it
// also returns what stops the region.
func collectedTreeOf(t *testing.T, root *Root, rcfg ChildConfig) (*placementTree, func()) {
	t.Helper()
	region, err := OpenChild(rcfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, rcfg.Name, region.Serve)
	poll.True(t, "region serving", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	pt := &placementTree{root: root, region: region, edges: map[string]*Child{}, stops: map[string]func(){}}
	for _, name := range []string{"e1", "e2", "e3"} {
		pt.startEdge(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(), Parents: []string{region.LinkAddr()},
			JoinToken: rcfg.JoinToken, VirtualCluster: true, InMemory: true, Labels: map[string]string{"app": "yes"}})
	}
	pt.connect(t, 3)
	pt.placeCollected(t, nil)
	pt.waitCombined(t, "three destinations ready", 3, 3)
	return pt, stop
}

// webDeployment is the Deployment shop/web that placeCollected places.
func webDeployment(replicas int, annotations map[string]any) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "annotations": annotations},
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "web:1"}}}}}}
}

// combinedName is the CombinedStatus of placeCollected's Deployment.
const combinedName = "web.deployments.apps.web"

// combinedColumns returns the columns of the single row of the
// CombinedStatus of placeCollected (COUNT, SUM).
func (pt *placementTree) combinedColumns() ([]int64, error) {
	cs, err := pt.wds.Resource(edgev1alpha1.SchemeGroupVersion.WithResource("combinedstatuses")).Namespace("shop").
		Get(context.Background(), combinedName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	rows, _, _ := unstructured.NestedSlice(cs.Object, "results")
	b, _ := json.Marshal(rows)
	var parsed []struct {
		Rows []struct {
			Columns []int64 `json:"columns"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &parsed); err != nil || len(parsed) != 1 || len(parsed[0].Rows) != 1 {
		return nil, fmt.Errorf("results %s: %v", b, err)
	}
	return parsed[0].Rows[0].Columns, nil
}

// waitCombined waits until the CombinedStatus counts n destinations with
// ready replicas in all.
func (pt *placementTree) waitCombined(t *testing.T, what string, n, ready int64) {
	t.Helper()
	poll.Until(t, what, func() error {
		cols, err := pt.combinedColumns()
		if err != nil {
			return err
		}
		if len(cols) != 2 || cols[0] != n || cols[1] != ready {
			return fmt.Errorf("%v", cols)
		}
		return nil
	})
}

// overcount polls the CombinedStatus until stopped and records every value
// above n destinations (or ready replicas): a double count.
type overcount struct {
	mu   sync.Mutex
	seen []string
	stop func()
}

func (pt *placementTree) watchOvercount(n, ready int64) *overcount {
	oc := &overcount{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if cols, err := pt.combinedColumns(); err == nil && len(cols) == 2 && (cols[0] > n || cols[1] > ready) {
				oc.mu.Lock()
				oc.seen = append(oc.seen, fmt.Sprint(cols))
				oc.mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond) // the sampling period
		}
	}()
	oc.stop = func() { cancel(); <-done }
	return oc
}

func (oc *overcount) check(t *testing.T, phase string) {
	t.Helper()
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if len(oc.seen) > 0 {
		t.Errorf("%s: the CombinedStatus counted destinations twice: %v", phase, oc.seen)
	}
	oc.seen = nil
}

// Reported state is soft state: rebuilt from below, never counted twice.
// Six destinations under two regions report a Deployment ready through a
// StatusCollector; then an edge re-homes while its old parent lives on, a
// region restarts with its state lost, and a region dies and its edges
// re-home to the other. Throughout, a poller checks that the root's
// CombinedStatus never counts more than six destinations, and after each
// step it counts exactly six again.
func TestStatusSoftState(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	pt := &placementTree{root: root, edges: map[string]*Child{}, stops: map[string]func(){}}
	regions := map[string]ChildConfig{}
	regionStops := map[string]func(){}
	startRegion := func(cfg ChildConfig) *Child {
		c, err := OpenChild(cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		regionStops[cfg.Name] = serveInBackground(t, cfg.Name, c.Serve)
		poll.True(t, cfg.Name+" serving", func() bool { return c.Uplink().Connected() && c.LinkAddr() != "" })
		regions[cfg.Name] = cfg
		return c
	}
	r1 := startRegion(ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	r2 := startRegion(ChildConfig{Role: pki.RoleRegion, Name: "r2", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	pt.region = r1
	labels := map[string]string{"app": "yes"}
	edge := func(name string, parents ...string) {
		pt.startEdge(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(), Parents: parents,
			JoinToken: token, VirtualCluster: true, InMemory: true, Labels: labels})
	}
	// e1-e4 under r1, falling back to r2; e5 and e6 under r2.
	for _, name := range []string{"e1", "e2", "e3", "e4"} {
		edge(name, r1.LinkAddr(), r2.LinkAddr())
	}
	edge("e5", r2.LinkAddr())
	edge("e6", r2.LinkAddr())
	pathOf := func(dest string) string {
		dests, _ := root.down.Subtree()
		for _, d := range dests {
			if d.Name == dest {
				return fmt.Sprint(d.Path)
			}
		}
		return ""
	}
	poll.True(t, "every edge announced", func() bool { dests, _ := root.down.Subtree(); return len(dests) == 6 })
	pt.connect(t, 6)
	pt.placeCollected(t, nil)
	pt.waitCombined(t, "six destinations ready", 6, 6)
	oc := pt.watchOvercount(6, 6)
	defer oc.stop()

	// e1 re-homes to r2 while r1 lives on: r1 is told (Moved) and stops
	// counting it; r2 counts it.
	pt.stops["e1"]()
	cfg := pt.edges["e1"].cfg
	cfg.Parents, cfg.JoinToken = []string{r2.LinkAddr()}, ""
	pt.startEdge(t, cfg)
	poll.True(t, "e1 under r2", func() bool { return pathOf("e1") == "[r2 e1]" })
	poll.True(t, "r1 no longer claims e1", func() bool {
		for _, c := range root.down.Children() {
			if c.Superseded {
				return false
			}
		}
		return true
	})
	pt.waitCombined(t, "six destinations after e1 re-homed", 6, 6)
	oc.check(t, "e1 re-homed")

	// r2 restarts with its state lost: its three edges reconnect and
	// report again.
	regionStops["r2"]()
	r2cfg := regions["r2"]
	r2cfg.JoinToken = ""
	r2cfg.LinkAddr = r2.LinkAddr() // the edges dial it there
	startRegion(r2cfg)
	pt.waitCombined(t, "six destinations after r2 restarted", 6, 6)
	oc.check(t, "r2 restarted")

	// r1 dies: e2-e4 re-home to r2, which then counts all six alone.
	regionStops["r1"]()
	for _, name := range []string{"e2", "e3", "e4"} {
		poll.True(t, name+" under r2", func() bool { return pathOf(name) == "[r2 "+name+"]" })
	}
	pt.waitCombined(t, "six destinations after r1 died", 6, 6)
	oc.check(t, "r1 died")
}

// Reported state survives a root failover: three root replicas, a region
// that may dial any of them and three edges reporting a Deployment
// through a StatusCollector. The leader (which writes CombinedStatus), to
// which the region is linked, is killed; the region links to a survivor
// and reports everything again there (reports are kept in memory), and the
// new leader never counts a destination twice and follows the next change
// (two replicas each, six ready in all).
func TestStatusSurvivesRootFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three replicas with raft's default timers")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	follower := (leader + 1) % 3
	token := joinToken(t, rs[follower].Root)
	parents := []string{rs[leader].LinkAddr()}
	for i, r := range rs {
		if i != leader {
			parents = append(parents, r.LinkAddr())
		}
	}
	pt := collectedTree(t, rs[follower].Root, parents, token)
	region := pt.region

	oc := pt.watchOvercount(3, 6)
	defer oc.stop()
	rs[leader].stop()
	rs[leader] = nil
	newLeader := leaderOf(t, rs)
	t.Logf("%s leads after the kill", rs[newLeader].cfg.Name)
	poll.True(t, "the region reconnected", func() bool { return region.Uplink().Connected() })
	pt.apply(t, pt.wds, deployGVR, webDeployment(2, nil))
	pt.waitCombined(t, "three destinations, six ready, after the failover", 3, 6)
	oc.check(t, "root failover")
}

// The inventory shows every replica's children: the leader writes the
// SyncTargets from the replicated route and link records, so a region
// linked to a follower has its edges listed, connected, and shown
// disconnected once it stops.
func TestInventoryAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three replicas with raft's default timers")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	follower := (leader + 1) % 3
	token := joinToken(t, rs[follower].Root)
	region, err := OpenChild(ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(),
		Parents: []string{rs[follower].LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stopRegion := serveInBackground(t, "r1", region.Serve)
	poll.True(t, "region serving", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	for _, name := range []string{"e1", "e2"} {
		startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(), Parents: []string{region.LinkAddr()},
			JoinToken: token, InMemory: true})
	}
	inv, err := rs[leader].spaceClient(layout.InventorySpace)
	if err != nil {
		t.Fatal(err)
	}
	targets := func() (map[string]string, error) {
		l, err := inv.Resource(edgev1alpha1.SyncTargetsGVR).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, st := range l.Items {
			path, _, _ := unstructured.NestedString(st.Object, "status", "path")
			connected, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
			out[st.GetName()] = fmt.Sprintf("%s %t", path, connected)
		}
		return out, nil
	}
	want := map[string]string{"e1": "root/r1/e1 true", "e2": "root/r1/e2 true"}
	poll.Until(t, "the leader's inventory to list the follower's edges", func() error {
		got, err := targets()
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	if len(rs[leader].down.Children()) != 0 {
		t.Fatalf("the region is linked to the leader, not to the follower: %+v", rs[leader].down.Children())
	}

	stopRegion()
	want = map[string]string{"e1": "root/r1/e1 false", "e2": "root/r1/e2 false"}
	poll.Until(t, "the edges shown disconnected", func() error {
		got, err := targets()
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}
