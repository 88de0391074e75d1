package syncer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// Upsync names are shell patterns (path.Match); "*" and exact names keep
// their meaning, and no names match every name.
func TestUpsyncNamePatterns(t *testing.T) {
	for _, c := range []struct {
		names []string
		name  string
		want  bool
	}{
		{nil, "anything", true},
		{[]string{"*"}, "anything", true},
		{[]string{"up-1"}, "up-1", true},
		{[]string{"up-1"}, "up-10", false},
		{[]string{"up-*"}, "up-1", true},
		{[]string{"up-*"}, "up-", true},
		{[]string{"up-*"}, "down-up-1", false},
		{[]string{"db-?"}, "db-a", true},
		{[]string{"db-?"}, "db-ab", false},
		{[]string{"[ab]-x"}, "b-x", true},
		{[]string{"[ab]-x"}, "c-x", false},
		{[]string{"other", "*-report"}, "daily-report", true},
		{[]string{"up-[a"}, "up-[a", true}, // malformed: only itself (the root refuses it)
		{[]string{"up-[a"}, "up-a", false},
	} {
		r := newUpsyncRule(v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Names: c.names})
		if got := r.matches("", "configmaps", "ns", c.name); got != c.want {
			t.Errorf("names %q, name %q: %v, want %v", c.names, c.name, got, c.want)
		}
	}
}

// Through a cluster: an upsync clause naming "up-*" brings up the objects
// whose names match, and only them.
func TestUpsyncGlobThroughCluster(t *testing.T) {
	const ns = "glob"
	h := newHarness(t, newFastVirtualCluster(t), "edge-g")
	ctx := context.Background()
	h.put(namespace(ns), configMap(ns, "placed", nil),
		placementObj("p", []any{clause("", "configmaps", ns, "placed")},
			[]any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{ns}, "names": []any{"up-*"}}}))
	h.start()
	h.waitSync("p synced", "p", func(ps reports.PlacementSync) bool { return ps.Ready == 1 })
	cms := h.admin.Resource(gvrCM).Namespace(ns)
	for _, name := range []string{"down-1", "up-1", "up-2"} {
		if _, err := cms.Create(ctx, &unstructured.Unstructured{Object: configMap(ns, name, map[string]any{"k": name})}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(name string) store.Key {
		return store.Key{Space: "outbox", Resource: resConfigMaps, Namespace: ns, Name: reports.ForwardedName("edge-g", name)}
	}
	poll.Until(t, "up-1 and up-2 upsynced", func() error {
		for _, name := range []string{"up-1", "up-2"} {
			if _, err := h.st.Get(key(name)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
	for _, name := range []string{"down-1", "placed"} {
		if _, err := h.st.Get(key(name)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s upsynced: %v", name, err)
		}
	}
}
