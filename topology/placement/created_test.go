package placement

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Every object placed in the downsync space has a creation time (kubectl
// shows its AGE there and in the mailboxes, which are views of it). It is
// the time the object was first placed: updates keep it, and a version
// that differs from what the controller would write only by its creation
// time is never written again (it would travel down the tree). A version
// stored without one (by an older root) gets one, once, keeping the
// source revision it carries.
func TestDownsyncCreationTime(t *testing.T) {
	f := newStoreFixture(t)
	f.target("s1", map[string]string{"env": "prod"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "a", nil, nil)
	f.placement(ws, "p1", map[string]string{"tier": "prod"}, cmClause("app"))
	before := now().Time
	d := newDriver(f, true)
	d.settle()

	lr, err := f.st.List(store.ListOptions{Space: down})
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, o := range lr.Items {
		if !placedByUs(o) {
			continue
		}
		placed++
		_, _, created := canonical(o)
		ts, err := time.Parse(time.RFC3339, created)
		if err != nil || ts.Before(before) || ts.After(now().Time) {
			t.Errorf("%v: creationTimestamp %q (%v), want the time it was placed", o.Key, created, err)
		}
	}
	if placed < 4 { // the ConfigMap, its namespace, s1's SyncTarget, the Location
		t.Fatalf("%d objects placed, want at least 4", placed)
	}

	cmKey := store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}
	get := func() (*store.Object, map[string]any) {
		t.Helper()
		o, err := f.st.Get(cmKey)
		if err != nil {
			t.Fatal(err)
		}
		return o, jsonMap(o)["metadata"].(map[string]any)
	}
	setCreated := func(v any) *store.Object {
		t.Helper()
		o, _ := get()
		m := jsonMap(o)
		md := m["metadata"].(map[string]any)
		if v == nil {
			delete(md, "creationTimestamp")
		} else {
			md["creationTimestamp"] = v
		}
		data, _ := json.Marshal(m)
		n, err := f.st.Update(context.Background(), cmKey, data, o.Revision)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Placed earlier: a controller that starts (knowing nothing, as
	// after a restart or a failover) leaves the stored version alone.
	const earlier = "2020-01-02T03:04:05Z"
	stored := setCreated(earlier)
	d = newDriver(f, true)
	d.settle()
	if o, md := get(); o.Revision != stored.Revision || md["creationTimestamp"] != earlier {
		t.Fatalf("an equal version was rewritten: revision %d (was %d), creationTimestamp %v", o.Revision, stored.Revision, md["creationTimestamp"])
	}

	// The source changes: the copy follows, created when it was.
	f.configMap(ws, "app", "a", map[string]string{"colour": "blue"}, nil)
	d.catchUp(true)
	d.settle()
	o, md := get()
	if o.Revision == stored.Revision || md["labels"] == nil {
		t.Fatalf("the copy was not updated: %s", o.Data)
	}
	if md["creationTimestamp"] != earlier {
		t.Fatalf("an update set creationTimestamp %v, want %s kept", md["creationTimestamp"], earlier)
	}

	// A recomputation that changes nothing of it does not write it.
	f.target("s2", map[string]string{"env": "dev"})
	d.catchUp(true)
	d.settle()
	if n, _ := get(); n.Revision != o.Revision {
		t.Fatalf("an unchanged copy was rewritten: %s", n.Data)
	}

	// Stored without a creation time: written once to get one, with the
	// source revision it carries.
	rev := md["annotations"].(map[string]any)[v1alpha1.SourceRevisionAnnotation]
	setCreated(nil)
	d = newDriver(f, true)
	d.settle()
	o, md = get()
	if ts, err := time.Parse(time.RFC3339, fmtString(md["creationTimestamp"])); err != nil || ts.Before(before) {
		t.Fatalf("creationTimestamp %v (%v), want one given now", md["creationTimestamp"], err)
	}
	if got := md["annotations"].(map[string]any)[v1alpha1.SourceRevisionAnnotation]; got != rev {
		t.Fatalf("source revision %v, want %v kept: only the creation time was added", got, rev)
	}
	d = newDriver(f, true)
	d.settle()
	if n, _ := get(); n.Revision != o.Revision {
		t.Fatalf("the copy was written again: %s", n.Data)
	}
}

func fmtString(v any) string { s, _ := v.(string); return s }
