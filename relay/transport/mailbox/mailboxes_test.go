package mailbox

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// placed returns a ConfigMap of shared targeting dests.
func placed(t *testing.T, st *store.Store, name, dests string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": map[string]any{v1alpha1.DestinationsAnnotation: dests}}})
	put(t, st, store.Key{Space: shared, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}, data)
}

// A child's mailbox is what targets the destinations of its route
// record: its view and its Routing agree, the Routing cuts the
// destinations to the child's, and a reports space is served as itself.
// A route record is written only when it changes; a child's link going
// down marks its connected claims disconnected, which then lose to a
// connected claim of another child.
func TestMailboxes(t *testing.T) {
	st := newStore(t, store.Options{Fields: Fields(nil), Addresses: Targets})
	placed(t, st, "a", "e1,e2")
	placed(t, st, "b", "e3")
	m := New(Config{Store: st, Space: shared})
	ctx := context.Background()
	rev, err := m.SaveRoute(ctx, "c1", []tree.RouteDestination{{Name: "e1", Connected: true, Since: 3}})
	if err != nil || rev == 0 {
		t.Fatalf("SaveRoute = %d, %v", rev, err)
	}
	if again, err := m.SaveRoute(ctx, "c1", []tree.RouteDestination{{Name: "e1", Connected: true, Since: 3}}); err != nil || again != rev {
		t.Fatalf("the same route saved again at revision %d (%v), want %d unwritten", again, err, rev)
	}

	match, err := m.Matcher("c1")
	if err != nil {
		t.Fatalf("Matcher: %v", err)
	}
	objs, err := tree.RoutedObjects(st, shared, m.Routing("c1"))
	if err != nil || len(objs) != 1 || objs[0].Key.Name != "a" {
		t.Fatalf("routed to c1: %v (%v), want a", objs, err)
	}
	var got struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(objs[0].Data, &got); err != nil || got.Metadata.Annotations[v1alpha1.DestinationsAnnotation] != "e1" {
		t.Fatalf("a as c1 receives it: %s, want its destinations cut to e1", objs[0].Data)
	}
	lr, _ := st.List(store.ListOptions{Space: shared})
	for _, o := range lr.Items {
		if want := o.Key.Name == "a"; match(o) != want {
			t.Fatalf("the view of c1's mailbox matches %s: %v, want %v", o.Key.Name, !want, want)
		}
	}

	if _, err := m.SaveRoute(ctx, "c2", []tree.RouteDestination{{Name: "e1", Connected: true, Since: 2}}); err != nil {
		t.Fatal(err)
	}
	if sup, err := m.Superseded(nil); err != nil || len(sup) != 1 || sup["c2"]["e1"] != 3 {
		t.Fatalf("Superseded = %v (%v), want c2's e1, beaten by c1's newer claim", sup, err)
	}
	if err := m.MarkDisconnected(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	rt, err := m.Route("c1")
	if err != nil || len(rt.Destinations) != 1 || rt.Destinations[0].Connected || rt.Destinations[0].LastSeen == 0 {
		t.Fatalf("c1's route after its link went down: %+v (%v)", rt, err)
	}
	if sup, err := m.Superseded(nil); err != nil || !maps.EqualFunc(sup, map[string]map[string]int64{"c1": {"e1": 2}}, maps.Equal) {
		t.Fatalf("Superseded = %v (%v), want c1's e1, now disconnected", sup, err)
	}
}

// The tier's cache serves the downlink and the placement controller at
// once.
func TestMailboxesConcurrent(t *testing.T) {
	st := newStore(t, store.Options{Fields: Fields(nil), Addresses: Targets})
	m := New(Config{Store: st, Space: shared})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			for j := range 50 {
				switch i {
				case 0:
					if _, err := m.SaveRoute(ctx, "c1", []tree.RouteDestination{{Name: "e1", Since: int64(j)}}); err != nil {
						t.Error(err)
					}
				case 1:
					if _, err := m.Superseded(nil); err != nil {
						t.Error(err)
					}
				case 2:
					if _, err := m.Routes(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	routes, err := m.Routes()
	if err != nil || len(routes["c1"]) != 1 || routes["c1"][0].Since != 49 {
		t.Fatalf("Routes = %v (%v), want c1's last", routes, err)
	}
}
