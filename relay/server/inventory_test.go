package server

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// syncTargetShows reads what a SyncTarget's columns show: PATH,
// CONNECTED (and whether it is set at all) and LAST-SEEN.
func syncTargetShows(st *unstructured.Unstructured) (path string, connected, hasConnected bool, lastSeen time.Time) {
	path, _, _ = unstructured.NestedString(st.Object, "status", "path")
	connected, hasConnected, _ = unstructured.NestedBool(st.Object, "status", "connected")
	if v, _, _ := unstructured.NestedString(st.Object, "status", "lastSeen"); v != "" {
		lastSeen, _ = time.Parse(time.RFC3339, v)
	}
	return path, connected, hasConnected, lastSeen
}

// TestSyncTargetStatus: a disconnected destination's SyncTarget shows
// LAST-SEEN when it was last heard from, not when it first connected, and
// keeps it across a restart of the root; a SyncTarget that an admin made,
// with no edge, shows PATH <none> and CONNECTED False.
func TestSyncTargetStatus(t *testing.T) {
	root, cfg, stopRoot := startStoppableRoot(t)
	token := joinToken(t, root)
	region := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(),
		Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	waitFor(t, "region serving", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	edge := func(name string) func() {
		return serveInBackground(t, name, startChildOnly(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
			Parents: []string{region.LinkAddr()}, JoinToken: token, VirtualCluster: true, InMemory: true}).Serve)
	}
	stopE1 := edge("e1")
	ctx := context.Background()
	targets := func() dynamic.ResourceInterface {
		dc, err := root.spaceClient(layout.InventorySpace)
		if err != nil {
			t.Fatal(err)
		}
		return dc.Resource(edgev1alpha1.SyncTargetsGVR)
	}
	get := func(name string) *unstructured.Unstructured {
		st, _ := targets().Get(ctx, name, metav1.GetOptions{})
		return st
	}

	// An admin makes a SyncTarget before any edge of that name joined.
	waitFor(t, "the inventory CRDs", func() bool { return root.crds.ready() == nil })
	if _, err := targets().Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget", "metadata": map[string]any{"name": "lonely"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the admin's SyncTarget to show PATH <none> and CONNECTED False", func() bool {
		st := get("lonely")
		if st == nil {
			return false
		}
		path, connected, has, _ := syncTargetShows(st)
		return path == NoPath && has && !connected
	})

	var created time.Time
	waitFor(t, "e1's SyncTarget, connected", func() bool {
		st := get("e1")
		if st == nil {
			return false
		}
		_, connected, _, _ := syncTargetShows(st)
		created = st.GetCreationTimestamp().Time
		return connected
	})
	// LAST-SEEN and AGE have a resolution of a second: e1 is stopped in
	// a later second than the one it connected in.
	waitFor(t, "a second after e1 connected", func() bool { return time.Now().Truncate(time.Second).After(created) })
	stoppedAfter := time.Now().Truncate(time.Second)
	stopE1()
	var lastSeen time.Time
	waitFor(t, "e1's SyncTarget, disconnected", func() bool {
		st := get("e1")
		if st == nil {
			return false
		}
		var connected bool
		_, connected, _, lastSeen = syncTargetShows(st)
		return !connected
	})
	if lastSeen.Before(stoppedAfter) {
		t.Errorf("e1, stopped after %s, shows LAST-SEEN %s (it connected at %s)", stoppedAfter, lastSeen, created)
	}

	// The root restarts: e1's LAST-SEEN stays, and so does the admin's
	// SyncTarget. e2, which joins after, shows the first pass is done.
	root = reopenRoot(t, cfg, root, stopRoot)
	edge("e2")
	waitFor(t, "e2's SyncTarget, connected", func() bool {
		st := get("e2")
		if st == nil {
			return false
		}
		_, connected, _, _ := syncTargetShows(st)
		return connected
	})
	if st := get("e1"); st == nil {
		t.Error("e1's SyncTarget is gone after the root restarted")
	} else if _, connected, _, again := syncTargetShows(st); connected || !again.Equal(lastSeen) {
		t.Errorf("after the root restarted, e1 shows CONNECTED %t, LAST-SEEN %s; want false, %s", connected, again, lastSeen)
	}
	if st := get("lonely"); st == nil {
		t.Error("the admin's SyncTarget is gone after the root restarted")
	} else if path, connected, has, _ := syncTargetShows(st); path != NoPath || !has || connected {
		t.Errorf("after the root restarted, the admin's SyncTarget shows PATH %q, CONNECTED %t (set: %t)", path, connected, has)
	}
}

// startChildOnly opens a child relay without serving it.
func startChildOnly(t *testing.T, cfg ChildConfig) *Child {
	t.Helper()
	c, err := OpenChild(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
