package syncer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
)

// TestRecordSortedMembers: a record encodes its members in the order of
// their names, as an object decoded into a map and encoded again would
// (the form the store sets a resourceVersion in without re-encoding).
func TestRecordSortedMembers(t *testing.T) {
	r := record{APIVersion: "syncer.canopy.dev/v1alpha1", Kind: "Applied", Metadata: recordMetadata{Name: "r"},
		Key: store.Key{Resource: resConfigMaps, Namespace: "ns", Name: "cm"}, Group: "g", Version: "v1",
		Resource: "configmaps", Namespace: "ns", Name: "cm", Hash: "h",
		Object: map[string]any{"kind": "ConfigMap"}, Applied: map[string]any{"kind": "ConfigMap"}}
	data, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	sorted, _ := json.Marshal(top)
	if !bytes.Equal(data, sorted) {
		t.Errorf("record encodes as %s, want its members sorted: %s", data, sorted)
	}
}
