package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// CollectorName is the simulator's StatusCollector: per workload object,
// how many destinations hold each version (VersionAnnotation), as the
// edges report it and the tiers merge it into the root's CombinedStatus.
const CollectorName = "sim-versions"

var (
	statusCollectorsGVR = edgev1alpha1.SchemeGroupVersion.WithResource(edgev1alpha1.ResourceStatusCollectors)
	combinedStatusesGVR = edgev1alpha1.SchemeGroupVersion.WithResource(edgev1alpha1.ResourceCombinedStatuses)
)

// versionCollector counts destinations by version of the object.
func versionCollector() *edgev1alpha1.StatusCollector {
	return &edgev1alpha1.StatusCollector{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev1alpha1.SchemeGroupVersion.String(), Kind: "StatusCollector"},
		ObjectMeta: metav1.ObjectMeta{Name: CollectorName},
		Spec: edgev1alpha1.StatusCollectorSpec{
			Filter:         fmt.Sprintf("has(obj.metadata.annotations) && '%s' in obj.metadata.annotations", VersionAnnotation),
			GroupBy:        []edgev1alpha1.NamedExpression{{Name: "version", Def: fmt.Sprintf("int(obj.metadata.annotations['%s'])", VersionAnnotation)}},
			CombinedFields: []edgev1alpha1.CombinedField{{Name: "destinations", Type: "COUNT"}},
			Limit:          100,
		},
	}
}

// statusTracker turns the root's CombinedStatuses into latency samples:
// when the number of destinations reported at version v or later grows
// by k, k samples of (now − the root write of v). It reads write times
// from the tracker that measures arrivals. Safe for concurrent use.
type statusTracker struct {
	t    *tracker
	dest int // destinations

	mu        sync.Mutex
	reflected map[objRef]map[int]int // per object: destinations counted at version ≥ v
	hists     histSet
	any       bool
	all       map[objRef]int // latest version every destination reports
}

func newStatusTracker(t *tracker, destinations int) *statusTracker {
	return &statusTracker{t: t, dest: destinations, reflected: map[objRef]map[int]int{}, all: map[objRef]int{}}
}

// observe takes one CombinedStatus.
func (s *statusTracker) observe(u *unstructured.Unstructured, at time.Time) {
	if u.GetNamespace() != Namespace {
		return
	}
	res, _, _ := unstructured.NestedString(u.Object, "object", "resource")
	name, _, _ := unstructured.NestedString(u.Object, "object", "name")
	ref := objRef{res, name}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	counts := map[int]int{}
	found := false
	for _, r := range results {
		rm, _ := r.(map[string]any)
		if rm["name"] != CollectorName {
			continue
		}
		found = true
		rows, _ := rm["rows"].([]any)
		for _, row := range rows {
			cols, _ := row.(map[string]any)["columns"].([]any)
			if len(cols) != 2 {
				continue
			}
			v, ok1 := number(cols[0])
			n, ok2 := number(cols[1])
			if ok1 && ok2 {
				counts[int(v)] += int(n)
			}
		}
	}
	if !found {
		return
	}
	versions := make([]int, 0, len(counts))
	for v := range counts {
		versions = append(versions, v)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(versions)))
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.reflected[ref]
	if seen == nil {
		seen = map[int]int{}
		s.reflected[ref] = seen
	}
	// cum(v) = destinations at version ≥ v; every version up to the
	// newest reported one gains what cum grew by.
	cum := 0
	newest := 0
	if len(versions) > 0 {
		newest = versions[0]
	}
	writes := s.t.writesOf(ref)
	for v := newest; v >= 1; v-- {
		cum += counts[v]
		c := min(cum, s.dest)
		if c > seen[v] && v <= len(writes) {
			w := writes[v-1]
			s.hists.get(w.phase).addN(at.Sub(w.at), c-seen[v])
			s.any = true
			seen[v] = c
		}
		if c >= s.dest && v > s.all[ref] {
			s.all[ref] = v
		}
		if c >= s.dest && seen[v-1] >= s.dest {
			break // older versions are complete
		}
	}
}

// widen sets the number of destinations that report the latest
// versions (a placement that reaches more of them); older versions count
// as complete, so that only the latest ones are measured at the
// destinations added.
func (s *statusTracker) widen(destinations int) {
	latest := s.t.latest()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dest = destinations
	for ref, v := range latest {
		seen := s.reflected[ref]
		if seen == nil {
			seen = map[int]int{}
			s.reflected[ref] = seen
		}
		for w := 1; w < v; w++ {
			seen[w] = max(seen[w], destinations)
		}
		if s.all[ref] >= v {
			s.all[ref] = v - 1 // the latest is no longer at every destination
		}
	}
}

// caughtUp reports whether, for every object, the CombinedStatus counts
// every destination at the latest version.
func (s *statusTracker) caughtUp() bool {
	latest := s.t.latest()
	s.mu.Lock()
	defer s.mu.Unlock()
	for o, v := range latest {
		if s.all[o] < v {
			return false
		}
	}
	return true
}

func (s *statusTracker) histograms() ([]string, map[string]*histogram, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	order, hists := s.hists.clone()
	return order, hists, s.any
}

func number(x any) (float64, bool) {
	switch v := x.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil
	}
	return 0, false
}

// follow watches the CombinedStatuses of Namespace until ctx ends.
func (s *statusTracker) follow(ctx context.Context, u *user) {
	ri := u.wds.Resource(combinedStatusesGVR).Namespace(Namespace)
	for ctx.Err() == nil {
		l, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		now := time.Now()
		for i := range l.Items {
			s.observe(&l.Items[i], now)
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
		if err != nil {
			if !apierrors.IsResourceExpired(err) && !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if obj, ok := ev.Object.(*unstructured.Unstructured); ok {
				s.observe(obj, time.Now())
			}
		}
		w.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
