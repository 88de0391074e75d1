package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/syncer"
)

// VersionAnnotation carries the simulator's version number of a workload
// object; a change is measured as arrived when a destination holds that
// version or a later one (state, not events: a destination may skip
// versions). The key sorts before edge.canopy.dev/destinations, so it is
// found early in an object's JSON.
const VersionAnnotation = "canopy.dev/sim-version"

// Namespace holds the simulator's workload objects.
const Namespace = "sim"

// objRef names a workload object of Namespace.
type objRef struct{ resource, name string }

type write struct {
	at    time.Time
	phase string
}

type edgeTrack struct {
	seen  []int // latest version held, per object
	lag   int   // objects whose latest version it does not hold
	group string
}

// tracker follows, for every destination and workload object, the
// latest version the destination holds, and turns each arrival into
// latency samples (root write → arrival) of the phase of the write. It
// is safe for concurrent use.
type tracker struct {
	where string // "inbox" or "cluster"

	mu      sync.Mutex
	objs    []objRef
	index   map[objRef]int
	writes  [][]write // per object, version v at [v-1]
	edges   map[string]*edgeTrack
	current int // edges holding the latest version of everything
	phase   string
	// marked edges' samples go to "<phase> (<label>)" as well.
	marked map[string]string
	hists  histSet
	any    bool // an arrival was seen
}

func newTracker(where string) *tracker {
	return &tracker{where: where, index: map[objRef]int{}, edges: map[string]*edgeTrack{}, marked: map[string]string{}}
}

func (t *tracker) setPhase(p string) {
	t.mu.Lock()
	t.phase = p
	t.mu.Unlock()
}

// mark makes samples of these edges also count under label (nil: unmark).
func (t *tracker) mark(edges []string, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range edges {
		if label == "" {
			delete(t.marked, e)
		} else {
			t.marked[e] = label
		}
	}
}

// addEdge adds an edge that every version of the objects counts for.
func (t *tracker) addEdge(name, group string) { t.add(name, group, false) }

// addLateEdge adds an edge that a placement reaches after the objects
// were written (a widened placement): only the latest version of each
// counts for it, from the write time restampAs gives it.
func (t *tracker) addLateEdge(name, group string) { t.add(name, group, true) }

func (t *tracker) add(name, group string, late bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.edges[name]; ok {
		return
	}
	et := &edgeTrack{seen: make([]int, len(t.objs)), group: group}
	for i := range t.objs {
		if n := len(t.writes[i]); n > 0 {
			if late {
				et.seen[i] = n - 1
			}
			et.lag++
		}
	}
	if et.lag == 0 {
		t.current++
	}
	t.edges[name] = et
}

// latest returns the latest version of every object.
func (t *tracker) latest() map[objRef]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[objRef]int, len(t.objs))
	for i, o := range t.objs {
		out[o] = len(t.writes[i])
	}
	return out
}

// addObject registers a workload object before its first write.
func (t *tracker) addObject(o objRef) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[o]; ok {
		return i
	}
	i := len(t.objs)
	t.objs = append(t.objs, o)
	t.index[o] = i
	t.writes = append(t.writes, nil)
	for _, e := range t.edges {
		e.seen = append(e.seen, 0)
	}
	return i
}

// begin records a write of object i about to be sent to the root and
// returns its version.
func (t *tracker) begin(i int, at time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := len(t.writes[i])
	t.writes[i] = append(t.writes[i], write{at: at, phase: t.phase})
	for _, e := range t.edges {
		if e.seen[i] == prev {
			if e.lag == 0 {
				t.current--
			}
			e.lag++
		}
	}
	return prev + 1
}

// restamp moves the write time of the latest version of every object to
// at (the initial placement is measured from the EdgePlacement's
// creation, not from the objects').
func (t *tracker) restamp(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.writes {
		if n := len(t.writes[i]); n > 0 {
			t.writes[i][n-1].at = at
		}
	}
}

// restampAs is restamp for a placement that reaches more destinations:
// the latest versions count as written at at, in phase.
func (t *tracker) restampAs(at time.Time, phase string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.writes {
		if n := len(t.writes[i]); n > 0 {
			t.writes[i][n-1] = write{at: at, phase: phase}
		}
	}
}

// arrive records that edge holds version v of object o at time at.
func (t *tracker) arrive(edge string, o objRef, v int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index[o]
	e := t.edges[edge]
	if !ok || e == nil || v <= e.seen[i] {
		return
	}
	t.any = true
	ws := t.writes[i]
	v = min(v, len(ws))
	label := t.marked[edge]
	for w := e.seen[i] + 1; w <= v; w++ {
		d := at.Sub(ws[w-1].at)
		t.hists.get(ws[w-1].phase).add(d)
		if label != "" {
			t.hists.get(ws[w-1].phase + " (" + label + ")").add(d)
		}
	}
	was := e.seen[i] < len(ws)
	e.seen[i] = v
	if was && v == len(ws) {
		e.lag--
		if e.lag == 0 {
			t.current++
		}
	}
}

// converged returns how many edges hold the latest version of every
// object, and how many edges there are.
func (t *tracker) converged() (int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current, len(t.edges)
}

// lagging lists up to n edges that miss a latest version.
func (t *tracker) lagging(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, e := range t.edges {
		if len(out) == n {
			break
		}
		if e.lag > 0 {
			out = append(out, name)
		}
	}
	return out
}

// writesOf returns a copy of the writes of object o, version v at [v-1].
func (t *tracker) writesOf(o objRef) []write {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index[o]
	if !ok {
		return nil
	}
	return append([]write(nil), t.writes[i]...)
}

func (t *tracker) sawAny() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.any
}

// histograms returns copies of the distributions, in creation order.
func (t *tracker) histograms() ([]string, map[string]*histogram) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hists.clone()
}

// waitConverged waits until every edge holds every latest version.
func (t *tracker) waitConverged(ctx context.Context, timeout time.Duration, what string) error {
	err := waitUntil(ctx, timeout, what, func() bool { n, of := t.converged(); return n == of })
	if err != nil {
		n, of := t.converged()
		return errors.Join(err, errorf("%d of %d destinations hold the latest versions (%s); lagging: %v", n, of, t.where, t.lagging(5)))
	}
	return nil
}

// follow watches what an edge holds until ctx ends or the store closes:
// its inbox (where "inbox") or the syncer's applied records ("cluster").
func (t *tracker) follow(ctx context.Context, edge string, st *store.Store) {
	opts := store.WatchOptions{Space: layout.InboxSpace, Namespace: Namespace}
	decode := inboxVersion
	if t.where == ArrivalCluster {
		opts = store.WatchOptions{Space: "", Resource: syncer.AppliedResource}
		decode = appliedVersion
	}
	for ctx.Err() == nil {
		rev := st.Revision()
		lr, err := st.List(store.ListOptions{Space: opts.Space, Resource: opts.Resource, Namespace: opts.Namespace})
		if err != nil {
			return // closed
		}
		now := time.Now()
		for _, o := range lr.Items {
			if ref, v, ok := decode(o); ok {
				t.arrive(edge, ref, v, now)
			}
		}
		opts.Since = rev
		w, err := st.Watch(ctx, opts)
		if err != nil {
			return
		}
		for ev := range w.Events() {
			if ev.Type == store.Deleted || ev.Object == nil {
				continue
			}
			if ref, v, ok := decode(ev.Object); ok {
				t.arrive(edge, ref, v, time.Now())
			}
		}
		if !errors.Is(w.Err(), store.ErrTooSlow) && !errors.Is(w.Err(), store.ErrExpired) {
			return
		}
	}
}

var versionKey = []byte(`"` + VersionAnnotation + `":"`)

// versionOf finds VersionAnnotation's value in an object's JSON without
// decoding it (objects routed to every destination carry a long
// destination list).
func versionOf(data []byte) (int, bool) {
	i := bytes.Index(data, versionKey)
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(versionKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	v, err := strconv.Atoi(string(rest[:j]))
	return v, err == nil
}

func inboxVersion(o *store.Object) (objRef, int, bool) {
	if o.Key.Namespace != Namespace {
		return objRef{}, 0, false
	}
	v, ok := versionOf(o.Data)
	return objRef{o.Key.Resource.Resource, o.Key.Name}, v, ok
}

// kindResources maps the kinds of the workload to their resources.
var kindResources = map[string]string{"ConfigMap": "configmaps", "Deployment": "deployments"}

func appliedVersion(o *store.Object) (objRef, int, bool) {
	var rec struct {
		Hash   string `json:"hash"`
		Object struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(o.Data, &rec); err != nil || rec.Hash == "" || rec.Object.Metadata.Namespace != Namespace {
		return objRef{}, 0, false
	}
	res, ok := kindResources[rec.Object.Kind]
	if !ok {
		return objRef{}, 0, false
	}
	v, err := strconv.Atoi(rec.Object.Metadata.Annotations[VersionAnnotation])
	return objRef{res, rec.Object.Metadata.Name}, v, err == nil
}
