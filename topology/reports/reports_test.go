package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/status"
)

func TestMergeSync(t *testing.T) {
	ref := PlacementRef{Space: "default", Name: "p"}
	a := PlacementSync{Placement: ref, Destinations: 3, Revisions: map[string]int64{"10": 2, "12": 1}, Ready: 2}
	b := PlacementSync{Placement: ref, Destinations: 2, Revisions: map[string]int64{"12": 1}, Failed: 1,
		Failing: []FailingDest{{Name: "d9", Reason: "boom"}}}
	m := MergeSync(a, b)
	if m.Destinations != 5 || m.Failed != 1 || m.Ready != 2 || m.SyncedAt(12) != 2 || m.SyncedAt(10) != 4 || m.SyncedAt(13) != 0 {
		t.Fatalf("merged = %+v (synced at 12: %d, at 10: %d)", m, m.SyncedAt(12), m.SyncedAt(10))
	}
	if len(a.Revisions) != 2 || a.Revisions["12"] != 1 {
		t.Fatal("MergeSync modified its input")
	}
	// Beyond MaxRevisions distinct revisions, the oldest fold into the
	// next: they never count as newer than they are.
	var many []PlacementSync
	for i := range MaxRevisions + 4 {
		many = append(many, PlacementSync{Placement: ref, Destinations: 1, Revisions: map[string]int64{fmt.Sprint(100 + i): 1}})
	}
	m = MergeSync(many...)
	if len(m.Revisions) != MaxRevisions || m.SyncedAt(100) != MaxRevisions+4 || m.SyncedAt(105) != MaxRevisions-1 {
		t.Fatalf("folded = %v", m.Revisions)
	}
}

// Merge: partials of two children merge per key, placement syncs add up,
// forwarded objects travel when the filter says so, malformed reports
// count for nothing, and the encoded result decodes to the same.
func TestMerge(t *testing.T) {
	sc := &v1alpha1.StatusCollector{}
	sc.Name = "count"
	sc.Spec.CombinedFields = []v1alpha1.CombinedField{{Name: "n", Type: "COUNT"}}
	col, errs := status.Compile(sc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ref := PlacementRef{Space: "default", Name: "p"}
	obj := v1alpha1.ObjectReference{Resource: "configmaps", Namespace: "app", Name: "a"}
	child := func(dests ...string) []*store.Object {
		var parts []status.Partial
		for _, d := range dests {
			p, err := col.Evaluate(map[string]any{}, nil, status.Destination{Name: d})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
		}
		p := Partial{Placement: ref, Object: obj, Collector: "count", Partial: status.MergeAll(parts...)}
		s := PlacementSync{Placement: ref, Destinations: int64(len(dests)), Revisions: map[string]int64{"7": int64(len(dests))}}
		pd, _ := Encode(KindPartial, p.Key().Name, p)
		sd, _ := Encode(KindPlacementSync, s.Key().Name, s)
		fwd, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": ForwardedName(dests[0], "up"),
			"annotations": map[string]any{v1alpha1.DestinationAnnotation: dests[0]}}})
		links, _ := Encode(KindLinks, "r-"+dests[0], Links{Relays: []v1alpha1.Relay{{ObjectMeta: metav1.ObjectMeta{Name: dests[0]}}}})
		return []*store.Object{
			{Key: store.Key{Resource: LinksResource, Name: "r-" + dests[0]}, Data: links},
			{Key: p.Key(), Data: pd}, {Key: s.Key(), Data: sd},
			{Key: store.Key{Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: ForwardedName(dests[0], "up")}, Data: fwd},
			{Key: store.Key{Resource: PartialResource, Name: "junk"}, Data: []byte(`{"report":{"partial":"nonsense"}}`)},
		}
	}
	if m := Merge([][]*store.Object{child("d1", "d2")}, nil); len(m.Relays) != 0 {
		t.Fatalf("Merge kept %d relays' links, want none", len(m.Relays))
	}
	m := (&Decoded{Relays: true}).Merge([][]*store.Object{child("d1", "d2"), child("d3")}, func(o *store.Object) bool { return DestinationOf(o) != "d3" })
	if len(m.Partials) != 1 || len(m.Syncs) != 1 || len(m.Forwarded) != 1 || len(m.Relays) != 2 {
		t.Fatalf("merged %d partials, %d syncs, %d forwarded, %d relays; want 1, 1, 1, 2", len(m.Partials), len(m.Syncs), len(m.Forwarded), len(m.Relays))
	}
	for _, p := range m.Partials {
		if r := p.Partial.Result("count"); r.Rows[0].Columns[0].String() != "3" {
			t.Fatalf("merged COUNT = %v, want 3", r.Rows)
		}
	}
	for _, s := range m.Syncs {
		if s.Destinations != 3 || s.SyncedAt(7) != 3 {
			t.Fatalf("merged sync = %+v", s)
		}
	}
	enc, err := m.Encoded()
	if err != nil {
		t.Fatal(err)
	}
	// One tier up, the encoded reports merge again to the same.
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	var up []*store.Object
	for k, data := range enc {
		k.Space = "outbox"
		o, err := st.Create(context.Background(), k, data)
		if err != nil {
			t.Fatal(err)
		}
		up = append(up, o)
	}
	m2 := (&Decoded{Relays: true}).Merge([][]*store.Object{up}, nil)
	if len(m2.Relays) != 2 {
		t.Fatalf("re-merged %d relays, want the 2 forwarded", len(m2.Relays))
	}
	for k, p := range m2.Partials {
		if got, want := p.Partial.Result("count"), m.Partials[k].Partial.Result("count"); got.Rows[0].Columns[0] != want.Rows[0].Columns[0] {
			t.Fatalf("re-merged %v, want %v", got.Rows, want.Rows)
		}
	}
}

// Decoded decodes a report again only when its revision changes, and
// forgets the reports it was not given.
func TestDecodedMerge(t *testing.T) {
	ref := PlacementRef{Space: "default", Name: "p"}
	report := func(dests int64, rev int64) *store.Object {
		s := PlacementSync{Placement: ref, Destinations: dests}
		data, err := Encode(KindPlacementSync, s.Key().Name, s)
		if err != nil {
			t.Fatal(err)
		}
		k := s.Key()
		k.Space = "reports-c1"
		return &store.Object{Key: k, Data: data, Revision: rev}
	}
	destinations := func(m Merged) int64 {
		for _, s := range m.Syncs {
			return s.Destinations
		}
		return -1
	}
	var dec Decoded
	if got := destinations(dec.Merge([][]*store.Object{{report(2, 1)}}, nil)); got != 2 {
		t.Fatalf("first merge: %d destinations, want 2", got)
	}
	// Same revision: the decoded report is used, whatever the bytes.
	if got := destinations(dec.Merge([][]*store.Object{{report(5, 1)}}, nil)); got != 2 {
		t.Fatalf("same revision: %d destinations, want the remembered 2", got)
	}
	if got := destinations(dec.Merge([][]*store.Object{{report(5, 2)}}, nil)); got != 5 {
		t.Fatalf("new revision: %d destinations, want 5", got)
	}
	if got, want := destinations(dec.Merge([][]*store.Object{{report(5, 2)}}, nil)), destinations(Merge([][]*store.Object{{report(5, 2)}}, nil)); got != want {
		t.Fatalf("Decoded.Merge %d, Merge %d", got, want)
	}
	dec.Merge(nil, nil)
	if len(dec.reports) != 0 {
		t.Fatalf("%d reports remembered after a merge without them", len(dec.reports))
	}
}
