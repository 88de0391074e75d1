package placement

import (
	"context"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
)

// A batch whose Txn loses a race with another writer drops it without an
// error and says so (redo), so that the controller flushes again; one that
// goes through leaves redo alone.
func TestBatchRedoOnConflict(t *testing.T) {
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	ctx := context.Background()
	k := store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "ns", Name: "cm"}
	created, err := st.Txn(ctx, store.Op{Type: store.OpCreate, Key: k, Data: []byte(`{"metadata":{"name":"cm","namespace":"ns"},"data":{"a":"1"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var redo bool
	b := &batch{st: st, redo: &redo}
	if err := b.add(ctx, store.Op{Type: store.OpUpdate, Key: k, Data: []byte(`{"metadata":{"name":"cm","namespace":"ns"},"data":{"a":"2"}}`), ExpectRevision: created.Revision}); err != nil {
		t.Fatal(err)
	}
	if err := b.flush(ctx); err != nil || redo {
		t.Fatalf("a write that goes through: err %v, redo %v", err, redo)
	}
	// Expecting the first revision again: someone (the update above)
	// wrote meanwhile.
	if err := b.add(ctx, store.Op{Type: store.OpUpdate, Key: k, Data: []byte(`{"metadata":{"name":"cm","namespace":"ns"},"data":{"a":"3"}}`), ExpectRevision: created.Revision}); err != nil {
		t.Fatal(err)
	}
	if err := b.flush(ctx); err != nil {
		t.Fatalf("a lost race is not an error: %v", err)
	}
	if !redo {
		t.Error("a lost race did not ask for another flush")
	}
	o, err := st.Get(k)
	if err != nil || !strings.Contains(string(o.Data), `"a":"2"`) {
		t.Errorf("the dropped write was applied: %s, %v", o.Data, err)
	}
}
