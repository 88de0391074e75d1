package syncer

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/status"
)

// TestOneChangeOneOutboxTxn: a change of one placed ConfigMap moves its
// live state, its partial, its placement sync and the DestinationStatus,
// and all four are written in one outbox Txn (one report burst for the
// parent), each once.
func TestOneChangeOneOutboxTxn(t *testing.T) {
	const ns = "one"
	h := newHarness(t, newFastVirtualCluster(t), "edge-o")
	// A window long enough that no wait ends on it, even under -race.
	h.tweak = func(c *Config) { c.StatusWindow = 2 * time.Second }
	cm := store.Key{Resource: resConfigMaps, Namespace: ns, Name: "cfg"}
	keys := collectorObj("keys", map[string]any{"select": []any{map[string]any{"name": "keys", "def": "obj.data.size()"}}})
	p := placementObj("p", []any{clause("", "configmaps", ns)}, nil, "keys")
	h.put(namespace(ns), withSourceRevision(configMap(ns, "cfg", map[string]any{"a": "1"}), 11), keys, p)
	h.start()

	settled := func(rows string, rev int) {
		t.Helper()
		h.waitPartial("cfg's row "+rows, "p", "keys", cm, func(_ status.Partial, r string) bool { return r == rows })
		h.waitSync(fmt.Sprintf("p at %d", rev), "p", func(ps reports.PlacementSync) bool { return revs(ps) == fmt.Sprintf("map[%d:1]", rev) })
		h.waitStatus("the cursor observed", func(st DestinationState) bool { return st.ObservedInboxRevision == int64(h.cursor) })
		poll.Until(t, "the live state of cfg", func() error {
			o, err := h.st.Get(store.Key{Space: "outbox", Resource: resConfigMaps, Namespace: ns, Name: "cfg"})
			if err != nil {
				return err
			}
			if want := rev - 10; len(liveData(t, o)) != want {
				return fmt.Errorf("live data %v, want %d keys", liveData(t, o), want)
			}
			return nil
		})
	}
	settled("[1]", 11)
	before := h.st.Revision()

	h.put(withSourceRevision(configMap(ns, "cfg", map[string]any{"a": "1", "b": "2"}), 12))
	settled("[2]", 12)

	placement := reports.PlacementRef{Space: "default", Name: "p"}
	written := map[int64][]string{}
	for _, k := range []store.Key{
		{Resource: resConfigMaps, Namespace: ns, Name: "cfg"},
		{Resource: DestinationStatusResource, Name: "edge-o"},
		(&reports.Partial{Placement: placement, Object: objectRef(cm), Collector: "keys"}).Key(),
		(&reports.PlacementSync{Placement: placement}).Key(),
	} {
		k.Space = "outbox"
		_, later, err := h.st.Versions(k, before)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if len(later) != 1 {
			t.Errorf("%s written %d times for one change, want once", k, len(later))
		}
		for _, o := range later {
			written[o.Revision] = append(written[o.Revision], k.Resource.Resource)
		}
	}
	if len(written) != 1 {
		t.Errorf("one change written in %d outbox Txns, want 1: %v", len(written), written)
	}
}

// liveData is the data of a reported ConfigMap.
func liveData(t *testing.T, o *store.Object) map[string]any {
	t.Helper()
	var cm struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(o.Data, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data
}
