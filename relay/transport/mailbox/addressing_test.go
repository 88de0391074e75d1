package mailbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// A child's copy made from the version's template is the object with its
// destinations cut to the child's, byte for byte as decoding the object
// and encoding it again gives; an object without the annotation is sent
// as it is.
func TestTrimDestinations(t *testing.T) {
	all := make([]string, 100)
	for i := range all {
		all[i] = fmt.Sprintf("edge-%d", i)
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "cm", "namespace": "default", "resourceVersion": "7",
			"annotations": map[string]any{v1alpha1.DestinationsAnnotation: strings.Join(all, ","), "note": "<a & b>"},
		},
		"data": map[string]any{"k": "v\x00", "mark": trimMark[1:]},
	}
	data, _ := json.Marshal(obj)
	o := &store.Object{Data: data}
	for _, keep := range [][]string{nil, {"edge-3"}, {"edge-1", "edge-50", "edge-99"}, all[:99]} {
		got := trim(o, keep)
		want := setDestinations(data, strings.Join(keep, ","))
		if string(got) != string(want) {
			t.Fatalf("keep %v:\n got %s\nwant %s", keep, got, want)
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("keep %v: %v", keep, err)
		}
		ann := back["metadata"].(map[string]any)["annotations"].(map[string]any)
		if ann[v1alpha1.DestinationsAnnotation] != strings.Join(keep, ",") || ann["note"] != "<a & b>" {
			t.Fatalf("keep %v: annotations %v", keep, ann)
		}
	}
	if tpl, _ := o.Memo(trimMemo{}, newTrimTemplate).(*trimTemplate); tpl == nil {
		t.Fatal("no template for an object with destinations")
	}

	plain := &store.Object{Data: []byte(`{"metadata":{"name":"x"}}`)}
	if got := trim(plain, []string{"edge-1"}); string(got) != string(plain.Data) {
		t.Fatalf("an object without destinations became %s", got)
	}
}
