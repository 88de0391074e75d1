package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/reports"
)

// A single root keeps its children's reports in memory, out of its log
// (DESIGN.md section 2). A region with three edges reports a Deployment
// through a StatusCollector:
//   - the reports are in the root's report store, not in its log, and the
//     API serves them (list, watch) but refuses writes;
//   - the root restarts: until the region has reported again, the
//     CombinedStatus is never rewritten from the empty report store; the
//     region then reports everything again, and the next change is
//     counted.
func TestReportsInMemoryAtRoot(t *testing.T) {
	cfg := Config{Name: "root", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}
	root, err := Open(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	stopRoot := serveInBackground(t, "root", root.Serve)
	<-root.Ready()
	pt := collectedTree(t, root, []string{root.LinkAddr()}, joinToken(t, root))

	space := layout.ReportsSpace("r1")
	partials := store.ListOptions{Space: space, Resource: reports.PartialResource}
	if lr, err := root.Reports().List(partials); err != nil || len(lr.Items) == 0 {
		t.Fatalf("the root's report store holds no partial of r1: %d, %v", len(lr.Items), err)
	}
	// The log holds the space's Namespaces (made with the space), and no
	// report.
	lr, err := root.Store().List(store.ListOptions{Space: space})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range lr.Items {
		if o.Key.Resource.Resource != "namespaces" {
			t.Errorf("the root's log holds %s, a report", o.Key)
		}
	}

	// The API serves the space from the report store (a ConfigMap put
	// there as a Collector would), and refuses writes.
	cm := store.Key{Space: space, Resource: store.Resource{Resource: "configmaps"}, Namespace: "shop", Name: "seen"}
	cmData := func(v string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seen","namespace":"shop"},"data":{"v":"` + v + `"}}`)
	}
	if _, err := root.Reports().Create(context.Background(), cm, cmData("1")); err != nil {
		t.Fatal(err)
	}
	rc, err := root.spaceClient(space)
	if err != nil {
		t.Fatal(err)
	}
	cms := rc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("shop")
	ul, err := cms.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(ul.Items) != 1 || ul.GetResourceVersion() != fmt.Sprint(root.Reports().Revision()) {
		t.Fatalf("listing configmaps in %s through the API: %v, %v (want one, at the report store's revision %d)", space, err, ul, root.Reports().Revision())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: ul.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watching %s from resourceVersion %s: %v", space, ul.GetResourceVersion(), err)
	}
	if _, err := root.Reports().Update(context.Background(), cm, cmData("2"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		u, _ := ev.Object.(*unstructured.Unstructured)
		if v, _, _ := unstructured.NestedString(u.Object, "data", "v"); ev.Type != "MODIFIED" || v != "2" {
			t.Fatalf("watch event %s %v, want MODIFIED with v=2", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the ConfigMap's update")
	}
	w.Stop()
	_, err = cms.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "forged", "namespace": "shop"}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("creating a ConfigMap in %s: %v, want Forbidden", space, err)
	}
	if _, err := root.Reports().Delete(context.Background(), cm, 0, ""); err != nil {
		t.Fatal(err)
	}

	// The root restarts on the same addresses. A poller records every
	// CombinedStatus that does not count three destinations and three
	// ready replicas, until the region has reported again.
	stopRoot()
	wrong, stopWatch := pt.watchOtherThan(t, 3, 3)
	cfg.APIAddr, cfg.LinkAddr = root.Addr(), root.LinkAddr()
	root, err = Open(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, "root again", root.Serve)
	<-root.Ready()
	pt.root = root
	poll.True(t, "r1 reported again", func() bool { in, err := tree.Collected(root.Reports(), space); return err == nil && in })
	poll.True(t, "reported state written again", func() bool { return !root.reports.hold.Holding() })
	// A rewrite from the reports, if any, lands within three status windows.
	poll.Holds(t, "the CombinedStatus while the root restarted", 3*DefaultStatusWindow, wrong)
	stopWatch()
	if lr, err := root.Reports().List(partials); err != nil || len(lr.Items) == 0 {
		t.Fatalf("after the restart, the root's report store holds no partial of r1: %v", err)
	}

	// The next change is reported through the new root.
	pt.apply(t, pt.wds, deployGVR, webDeployment(2, nil))
	pt.waitCombined(t, "three destinations, two replicas each", 3, 6)
}

// With root replicas, the reports of a follower's children reach the
// leader without the log: the follower mirrors its reports to the leader
// (reportSet.pump). A region linked to a follower reports three edges
// through a StatusCollector; the leader's CombinedStatus counts them, and
// no replica's log holds a report. Leadership then moves to the third
// replica, which gets the follower's reports again (a new session), and
// that leader is killed. Throughout, the CombinedStatus never counts a
// destination twice, and it follows each change.
func TestReportsReachTheLeaderFromAFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three replicas with raft's default timers")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	follower := (leader + 1) % 3
	token := joinToken(t, rs[follower].Root)
	// The region dials the follower only: it survives.
	pt := collectedTree(t, rs[follower].Root, []string{rs[follower].LinkAddr()}, token)
	if len(rs[leader].down.Children()) != 0 {
		t.Fatalf("the region is linked to the leader: %+v", rs[leader].down.Children())
	}
	space := layout.ReportsSpace("r1")
	if lr, err := rs[follower].Reports().List(store.ListOptions{Space: space, Resource: reports.PartialResource}); err != nil || len(lr.Items) == 0 {
		t.Fatalf("the follower holds no partial of r1 in memory: %v", err)
	}
	for i, r := range rs {
		lr, err := r.Store().List(store.ListOptions{Space: space})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range lr.Items {
			if o.Key.Resource.Resource != "namespaces" {
				t.Errorf("replica %d's log holds %s, a report", i, o.Key)
			}
		}
	}

	// Leadership moves to the third replica: it starts with no mirror,
	// and the follower's pump sends it everything again.
	third := (leader + 2) % 3
	oc := pt.watchOvercount(3, 9)
	defer oc.stop()
	if err := rs[leader].node.TransferLeadership(rs[third].cfg.Name); err != nil {
		t.Fatal(err)
	}
	poll.True(t, rs[third].cfg.Name+" leading", func() bool { return rs[third].IsLeader() && !rs[leader].IsLeader() })
	// With nothing changing, the follower sees the new leader and sends it
	// everything again (without, the new leader would wait a minute).
	poll.True(t, "the follower's reports at the new leader", func() bool { return !rs[third].reports.hold.Holding() })
	pt.apply(t, pt.wds, deployGVR, webDeployment(2, nil))
	pt.waitCombined(t, "three destinations, six ready, after the transfer", 3, 6)
	oc.check(t, "leadership transfer")

	// That leader is killed.
	rs[third].stop()
	rs[third] = nil
	newLeader := leaderOf(t, rs)
	t.Logf("%s leads after the kill", rs[newLeader].cfg.Name)
	pt.apply(t, pt.wds, deployGVR, webDeployment(3, nil))
	pt.waitCombined(t, "three destinations, nine ready, after the failover", 3, 9)
	oc.check(t, "root failover")
}

// watchOtherThan polls the CombinedStatus of placeCollected every 5 ms
// until stopped (at the latest when the test ends), and records every
// read that does not count n destinations and ready replicas: a value, or
// "deleted". check says what was read so far, by how many reads, if
// anything.
func (pt *placementTree) watchOtherThan(t *testing.T, n, ready int64) (check func() error, stop func()) {
	var mu sync.Mutex
	wrong := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cols, err := pt.combinedColumns()
			mu.Lock()
			switch {
			case apierrors.IsNotFound(err):
				wrong["deleted"]++
			case err == nil && !slices.Equal(cols, []int64{n, ready}):
				wrong[fmt.Sprint(cols)]++
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // the sampling period
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(wrong) > 0 {
			return fmt.Errorf("read %v, want [%d %d] throughout", wrong, n, ready)
		}
		return nil
	}, stop
}

// A region keeps its children's reports in memory, and its summary (its
// outbox) on disk. When it restarts from its disk, the summary is not
// rewritten until the children it knew of have reported again: the root's
// CombinedStatus never changes meanwhile, and the next change is counted.
func TestRegionRestartKeepsItsSummary(t *testing.T) {
	root := startTestRoot(t)
	rcfg := ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: joinToken(t, root), LinkAddr: "127.0.0.1:0"} // its log on disk
	pt, stopRegion := collectedTreeOf(t, root, rcfg)

	wrong, stopWatch := pt.watchOtherThan(t, 3, 3)
	stopRegion()
	rcfg.JoinToken, rcfg.LinkAddr = "", pt.region.LinkAddr() // the edges dial it there
	region, err := OpenChild(rcfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, "r1 again", region.Serve)
	pt.region = region
	for _, name := range []string{"e1", "e2", "e3"} {
		poll.True(t, name+" reported again", func() bool {
			in, err := tree.Collected(region.Reports(), layout.ReportsSpace(name))
			return err == nil && in
		})
	}
	// A summary from the reports, and the root's rewrite, land within five
	// status windows.
	poll.Holds(t, "the CombinedStatus while the region restarted", 5*DefaultStatusWindow, wrong)
	stopWatch()
	pt.apply(t, pt.wds, deployGVR, webDeployment(2, nil))
	pt.waitCombined(t, "three destinations, two replicas each, after the region restarted", 3, 6)
}
