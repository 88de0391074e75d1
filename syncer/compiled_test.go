package syncer

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

func readyCount(limit int64) *v1alpha1.StatusCollector {
	return &v1alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "ready-count", Generation: 1}, Spec: v1alpha1.StatusCollectorSpec{
		GroupBy:        []v1alpha1.NamedExpression{{Name: "zone", Def: "destination.labels['zone']"}},
		CombinedFields: []v1alpha1.CombinedField{{Name: "count", Type: v1alpha1.AggregationCount}},
		Limit:          limit,
	}}
}

// Syncers share a compiled collector while one of them holds it.
func TestCompileShared(t *testing.T) {
	a, errs := compileShared(readyCount(20))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b, _ := compileShared(readyCount(20))
	if a != b {
		t.Fatal("the same collector compiled twice")
	}
	if c, _ := compileShared(readyCount(30)); c == a {
		t.Fatal("another spec got the same compiled collector")
	}
	if _, errs := compileShared(readyCount(-1)); len(errs) == 0 {
		t.Fatal("an invalid collector compiled")
	}
	// Once nobody holds them, they go.
	var keys []string
	for _, l := range []int64{20, 30} {
		k, err := collectorKey(readyCount(l))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	poll.Until(t, "the compiled collectors dropped after their last user went", func() error {
		runtime.GC()
		kept := 0
		compiledCollectors.mu.Lock()
		for _, k := range keys {
			if _, ok := compiledCollectors.m[k]; ok {
				kept++
			}
		}
		compiledCollectors.mu.Unlock()
		if kept > 0 {
			return fmt.Errorf("%d kept", kept)
		}
		return nil
	})
}
