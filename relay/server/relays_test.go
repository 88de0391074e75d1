package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

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

// The root serves every relay's link as a Relay in the inventory space,
// watched like any object: a region and its edges connected and up to
// date; an edge cut off from its region shows behind (lag in revisions,
// and since when) while its link still counts as up, then disconnected
// with when it was last seen once the link times out, then connected and
// up to date again when the cut heals. Relays are read-only.
func TestRelays(t *testing.T) {
	mn := memnet.NewSeeded(5)
	t.Cleanup(func() { _ = mn.Close() })
	cfg := link.DefaultConfig()
	cfg.KeepAlivePeriod, cfg.MaxIdleTimeout = 200*time.Millisecond, 15*time.Second
	tt := makeTree(t, NewNetwork(mn, cfg), 1, 2)
	inv, err := tt.root.spaceClient(layout.InventorySpace)
	if err != nil {
		t.Fatal(err)
	}
	relays := inv.Resource(edgev1alpha1.RelaysGVR)
	ctx := context.Background()

	// Everything the watch brings, by name.
	var mu sync.Mutex
	seen := map[string]*unstructured.Unstructured{}
	poll.Until(t, "the root to serve relays", func() error {
		_, err := relays.List(ctx, metav1.ListOptions{})
		return err
	})
	w, err := relays.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(seen, u.GetName())
			} else {
				seen[u.GetName()] = u
			}
			mu.Unlock()
		}
	}()
	relay := func(name string) (connected bool, path, role, lastSeen string, lag int64, since string, err error) {
		mu.Lock()
		u := seen[name]
		mu.Unlock()
		if u == nil {
			return false, "", "", "", 0, "", fmt.Errorf("no relay %s watched", name)
		}
		connected, _, _ = unstructured.NestedBool(u.Object, "status", "connected")
		path, _, _ = unstructured.NestedString(u.Object, "status", "path")
		role, _, _ = unstructured.NestedString(u.Object, "status", "role")
		lastSeen, _, _ = unstructured.NestedString(u.Object, "status", "lastSeen")
		lag, _, _ = unstructured.NestedInt64(u.Object, "status", "lag", "revisions")
		since, _, _ = unstructured.NestedString(u.Object, "status", "lag", "since")
		return connected, path, role, lastSeen, lag, since, nil
	}
	want := map[string][2]string{"n0": {"root/n0", "region"}, "n0-0": {"root/n0/n0-0", "edge"}, "n0-1": {"root/n0/n0-1", "edge"}}
	poll.Until(t, "every relay connected and up to date", func() error {
		for name, pr := range want {
			connected, path, role, lastSeen, lag, _, err := relay(name)
			switch {
			case err != nil:
				return err
			case !connected || path != pr[0] || role != pr[1] || lastSeen != "" || lag != 0:
				return fmt.Errorf("%s: connected %v, path %q, role %q, last seen %q, lag %d", name, connected, path, role, lastSeen, lag)
			}
		}
		return nil
	})

	// Cut n0-0 off from its region and send it a change: it is behind.
	var region, edge *Child
	for c, p := range tt.parents {
		if c.cfg.Name == "n0-0" {
			edge, region = c, p
		}
	}
	regionAddr, edgeAddr := region.LinkAddr(), edge.dialTransport.Conn.LocalAddr().String()
	if err := mn.Partition(regionAddr, edgeAddr); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late","namespace":"default","annotations":{%q:"n0-0"}},"data":{"v":"1"}}`, edgev1alpha1.DestinationsAnnotation)
	if _, err := tt.root.Store().Create(ctx, store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "late"}, []byte(data)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "n0-0 connected and behind", func() error {
		connected, _, _, _, lag, since, err := relay("n0-0")
		switch {
		case err != nil:
			return err
		case !connected || lag <= 0 || since == "":
			return fmt.Errorf("n0-0: connected %v, lag %d since %q", connected, lag, since)
		}
		return nil
	})
	t.Logf("the cut edge shown behind after %v", time.Since(cut).Round(time.Millisecond))
	if _, _, _, _, lag, _, _ := relay("n0-1"); lag != 0 {
		t.Errorf("n0-1 shows a lag of %d revisions: it is not cut off", lag)
	}
	poll.Until(t, "n0-0 disconnected, last seen", func() error {
		connected, _, _, lastSeen, lag, _, err := relay("n0-0")
		switch {
		case err != nil:
			return err
		case connected || lastSeen == "" || lag != 0:
			return fmt.Errorf("n0-0: connected %v, last seen %q, lag %d", connected, lastSeen, lag)
		}
		return nil
	}, poll.For(time.Minute))
	if err := mn.Heal(regionAddr, edgeAddr); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "n0-0 connected and up to date again", func() error {
		connected, _, _, lastSeen, lag, _, err := relay("n0-0")
		switch {
		case err != nil:
			return err
		case !connected || lastSeen != "" || lag != 0:
			return fmt.Errorf("n0-0: connected %v, last seen %q, lag %d", connected, lastSeen, lag)
		}
		return nil
	}, poll.For(time.Minute))

	// Read-only.
	r := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Relay", "metadata": map[string]any{"name": "forged"}}}
	if _, err := relays.Create(ctx, r, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Relay: %v, want Forbidden", err)
	}
	if err := relays.Delete(ctx, "n0", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a Relay: %v, want Forbidden", err)
	}
}

// relayOf's rule: a connected child is behind once a change has waited
// for its acknowledgement RelayLagThreshold or longer; a disconnected one
// says when it was last seen, not a lag.
func TestRelayOf(t *testing.T) {
	now := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	id := pki.Identity{Name: "e", Role: pki.RoleEdge, Path: []string{"root", "r", "e"}}
	for _, c := range []struct {
		name        string
		st          session.ChildStatus
		lag         int64
		lastSeen    bool
		path, roles string
	}{
		{"up to date", session.ChildStatus{Identity: id, Connected: true}, 0, false, "root/r/e", "edge"},
		{"a change on its way", session.ChildStatus{Identity: id, Connected: true, Down: tree.Stats{LagRevisions: 2, BehindSince: now.Add(-edgev1alpha1.RelayLagThreshold + 300*time.Millisecond)}}, 0, false, "root/r/e", "edge"},
		{"behind", session.ChildStatus{Identity: id, Connected: true, Down: tree.Stats{LagRevisions: 7, BehindSince: now.Add(-edgev1alpha1.RelayLagThreshold - 2*time.Second)}}, 7, false, "root/r/e", "edge"},
		{"disconnected", session.ChildStatus{Identity: id, LastSeen: now.Add(-time.Minute), Down: tree.Stats{LagRevisions: 7, BehindSince: now.Add(-edgev1alpha1.RelayLagThreshold - 2*time.Second)}}, 0, true, "root/r/e", "edge"},
	} {
		r := relayOf(c.st, now)
		var lag int64
		if r.Status.Lag != nil {
			lag = r.Status.Lag.Revisions
			if want := c.st.Down.BehindSince.Truncate(time.Second); !r.Status.Lag.Since.Time.Equal(want) {
				t.Errorf("%s: lag since %v, want %v", c.name, r.Status.Lag.Since, want)
			}
		}
		if lag != c.lag || (r.Status.LastSeen != nil) != c.lastSeen || r.Status.Path != c.path || r.Status.Role != c.roles || r.Status.Connected != c.st.Connected {
			t.Errorf("%s: got %+v", c.name, r.Status)
		}
	}
}
