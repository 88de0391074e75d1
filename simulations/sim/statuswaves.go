package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/syncer"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// The status scenario (issue 6): the workload is placed on a subset of
// the edges spread over every region, then on all of them; a share of
// the edges refuses it. After each placement settles, one change makes
// every destination report again (a status wave), and the scenario
// measures what arrives at the root and at the regions over their
// children's upsync streams, and checks that the root's CombinedStatuses
// are exact.

// Labels of the status scenario.
const (
	// subsetLabel marks the edges of the first wave (on their SyncTarget).
	subsetLabel = "sim.canopy.dev/subset"
	// scopeLabel marks the Location of those edges, which the
	// EdgePlacement selects until it is widened to every Location.
	scopeLabel     = "sim.canopy.dev/scope"
	subsetLocation = "loc-subset"
)

// rejectedResources are the workload's resources that failing edges
// refuse (as vcluster.Options.Reject names them); their namespace is
// accepted.
var rejectedResources = map[string]bool{"configmaps": true, "deployments.apps": true}

// StatusWaves is the status scenario's outcome.
type StatusWaves struct {
	// Object is what each wave changes ("configmaps/cm-0").
	Object string       `json:"object"`
	Waves  []StatusWave `json:"waves"`
	// RootBytesRatio is the root's bytes in of the last wave over those of
	// the first (all edges over the subset): 1 when they do not grow with
	// the number of edges.
	RootBytesRatio float64 `json:"root_bytes_ratio"`
	// Exact: every wave ended with every CombinedStatus exact.
	Exact bool `json:"exact"`
}

// StatusWave is one change's status wave.
type StatusWave struct {
	Name    string `json:"name"`
	Edges   int    `json:"edges"`   // destinations placed
	Failing int    `json:"failing"` // of them, refusing the workload
	// What arrived over the children's upsync streams (session.ChildStatus
	// Up) from the change until the wave settled: at the root, and at
	// every region, summed.
	RootBytes      uint64 `json:"root_bytes"`
	RootMessages   uint64 `json:"root_messages"`
	RegionBytes    uint64 `json:"region_bytes"`
	RegionMessages uint64 `json:"region_messages"`
	// RootWrites and RegionWrites count the reports stored at the root
	// and at the regions in that time, by resource (partials,
	// placementsyncs, destinationstatuses, ...): what the bytes were.
	RootWrites   map[string]ReportWrites `json:"root_writes"`
	RegionWrites map[string]ReportWrites `json:"region_writes"`
	// ExactS is change → every CombinedStatus exact; SettledS change →
	// no more bytes arriving (the end of the measurement).
	ExactS   float64 `json:"exact_s"`
	SettledS float64 `json:"settled_s"`
	// Exact: every CombinedStatus of the workload counted every placed
	// destination, the non-failing ones at the object's latest version,
	// and the failing ones, listed (the first 100 by name) with a reason
	// naming the refusal. Mismatch says what differed when not, and
	// Diagnosis where below the root it went wrong.
	Exact     bool   `json:"exact"`
	Mismatch  string `json:"mismatch,omitempty"`
	Diagnosis string `json:"diagnosis,omitempty"`
	// Observed is the CombinedStatus of the changed object at the end.
	Observed ObservedStatus `json:"observed"`
	// FailingEdges are the placed edges that refuse the workload, sorted.
	FailingEdges []string `json:"-"`
}

// ReportWrites counts the reports of one resource stored at a tier.
type ReportWrites struct {
	Writes int    `json:"writes"`
	Bytes  uint64 `json:"bytes"`
	// Children counts the children whose reports space was written.
	Children int `json:"children"`
	// SpreadS is the time from the first write to the last.
	SpreadS float64 `json:"spread_s"`
}

// ObservedStatus is what a CombinedStatus said.
type ObservedStatus struct {
	Destinations int64    `json:"destinations"`
	AtVersion    int64    `json:"at_version"` // counted at the object's latest version
	FailingCount int64    `json:"failing_count"`
	Failing      []string `json:"failing"` // names, in order
	Reasons      []string `json:"-"`
}

// statusLayout picks, before any relay starts, the edges of the first
// wave (o.StatusEdges spread evenly over the root's children: the first
// edges of each, in layout order) and the failing ones: a share o.Failing
// of the first wave's edges and of all edges, picked with the seed, so
// that both waves have their share.
func (f *fleet) statusLayout() {
	groups := groupsOf(f.edges)
	byGroup := map[string][]*relay{}
	for _, e := range f.edges {
		byGroup[e.group] = append(byGroup[e.group], e)
	}
	n := f.opts.StatusEdges
	var subset, rest []*relay
	for i, g := range groups {
		k := n / len(groups)
		if i < n%len(groups) {
			k++
		}
		for j, e := range byGroup[g] {
			if j < k {
				e.subset = true
				e.cfg.Labels[subsetLabel] = "true"
				subset = append(subset, e)
			} else {
				rest = append(rest, e)
			}
		}
	}
	rng := rand.New(rand.NewPCG(f.opts.Seed, f.opts.Seed^0xfa11))
	k1 := int(math.Round(f.opts.Failing * float64(len(subset))))
	k2 := min(len(rest), max(0, int(math.Round(f.opts.Failing*float64(len(f.edges))))-k1))
	for _, set := range []struct {
		rs []*relay
		k  int
	}{{subset, k1}, {rest, k2}} {
		for _, i := range rng.Perm(len(set.rs))[:set.k] {
			e := set.rs[i]
			e.failing = true
			e.cfg.RejectApply = rejectFor(e.name)
		}
	}
}

// rejectFor is a failing edge's admission: the workload's objects are
// refused with a reason naming the edge.
func rejectFor(edge string) func(resource, namespace, name string) error {
	return func(resource, namespace, name string) error {
		if namespace == Namespace && rejectedResources[resource] {
			return fmt.Errorf("sim: %s rejects %s %s/%s (--failing)", edge, resource, namespace, name)
		}
		return nil
	}
}

// statusExpect is what the CombinedStatuses must say.
type statusExpect struct {
	placed  int
	failing []string // sorted by name
	latest  map[objRef]int
}

// expectation is what the CombinedStatuses must say with the workload on
// the first wave's edges (all false) or on every edge.
func (e *env) expectation(all bool) statusExpect {
	x := statusExpect{latest: e.t.latest()}
	for _, r := range e.f.edges {
		if !all && !r.subset {
			continue
		}
		x.placed++
		if r.failing {
			x.failing = append(x.failing, r.name)
		}
	}
	slices.Sort(x.failing)
	return x
}

// combinedView is the part of a CombinedStatus the check reads.
type combinedView struct {
	Object       edgev1alpha1.ObjectReference      `json:"object"`
	Placement    string                            `json:"placement"`
	Destinations int64                             `json:"destinations"`
	FailingCount int64                             `json:"failingCount"`
	Failing      []edgev1alpha1.FailingDestination `json:"failing"`
	Results      []struct {
		Name string `json:"name"`
		Rows []struct {
			Columns []any `json:"columns"`
		} `json:"rows"`
	} `json:"results"`
}

// check reads one CombinedStatus against x: what it says of object o,
// and what is wrong ("" when exact).
func (x statusExpect) check(cs *combinedView, o objRef) (ObservedStatus, string) {
	var ob ObservedStatus
	if cs == nil {
		return ob, "no CombinedStatus"
	}
	ob.Destinations, ob.FailingCount = cs.Destinations, cs.FailingCount
	v := x.latest[o]
	for _, r := range cs.Results {
		if r.Name != CollectorName {
			continue
		}
		for _, row := range r.Rows {
			if len(row.Columns) != 2 {
				continue
			}
			rv, ok1 := number(row.Columns[0])
			n, ok2 := number(row.Columns[1])
			if ok1 && ok2 && int(rv) == v {
				ob.AtVersion += int64(n)
			}
		}
	}
	for _, f := range cs.Failing {
		ob.Failing = append(ob.Failing, f.Name)
		ob.Reasons = append(ob.Reasons, f.Reason)
	}
	want := x.failing[:min(len(x.failing), edgev1alpha1.MaxFailingDestinations)]
	nonFailing := int64(x.placed - len(x.failing))
	switch {
	case ob.Destinations != int64(x.placed):
		return ob, fmt.Sprintf("%d destinations, want %d placed", ob.Destinations, x.placed)
	case ob.AtVersion != nonFailing:
		return ob, fmt.Sprintf("%d destinations at version %d, want the %d that do not fail", ob.AtVersion, v, nonFailing)
	case ob.FailingCount != int64(len(x.failing)):
		return ob, fmt.Sprintf("failingCount %d, want %d", ob.FailingCount, len(x.failing))
	case !slices.Equal(ob.Failing, want):
		return ob, fmt.Sprintf("failing %v, want %v", abbreviate(ob.Failing), abbreviate(want))
	}
	for i, r := range ob.Reasons {
		if !strings.Contains(r, vcluster.RejectWebhook) || !strings.Contains(r, "sim: "+ob.Failing[i]+" rejects ") {
			return ob, fmt.Sprintf("the reason of %s does not name the refusal: %q", ob.Failing[i], r)
		}
	}
	return ob, ""
}

// abbreviate prints a long list of names by its ends.
func abbreviate(names []string) string {
	if len(names) <= 8 {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("[%s ... %s] (%d)", strings.Join(names[:4], " "), strings.Join(names[len(names)-4:], " "), len(names))
}

// checkCombinedObj reads every CombinedStatus of the workload and
// returns what the one of object `of` says, the first mismatch ("" when
// all are exact) and the object it is about.
func (e *env) checkCombinedObj(x statusExpect, of objRef) (ObservedStatus, string, objRef, error) {
	l, err := e.u.wds.Resource(combinedStatusesGVR).Namespace(Namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return ObservedStatus{}, "", objRef{}, err
	}
	got := map[objRef]*combinedView{}
	for i := range l.Items {
		b, err := json.Marshal(l.Items[i].Object)
		if err != nil {
			return ObservedStatus{}, "", objRef{}, err
		}
		var cs combinedView
		if err := json.Unmarshal(b, &cs); err != nil {
			return ObservedStatus{}, "", objRef{}, err
		}
		if cs.Placement == PlacementName {
			got[objRef{cs.Object.Resource, cs.Object.Name}] = &cs
		}
	}
	objs := make([]objRef, 0, len(x.latest))
	for o := range x.latest {
		objs = append(objs, o)
	}
	slices.SortFunc(objs, func(a, b objRef) int { return strings.Compare(a.resource+"/"+a.name, b.resource+"/"+b.name) })
	var (
		observed ObservedStatus
		mismatch string
		bad      objRef
	)
	for _, o := range objs {
		ob, m := x.check(got[o], o)
		if o == of {
			observed = ob
		}
		if m != "" && mismatch == "" {
			mismatch, bad = o.resource+"/"+o.name+": "+m, o
		}
	}
	return observed, mismatch, bad, nil
}

// waitExact polls the CombinedStatuses until they are exact or timeout;
// it returns the last observation and mismatch ("" when exact). Only the
// end of ctx is an error.
func (e *env) waitExact(x statusExpect, of objRef, timeout time.Duration) (ObservedStatus, string, objRef, error) {
	var (
		ob  ObservedStatus
		bad objRef
	)
	mismatch := "the CombinedStatuses could not be read"
	_ = waitEvery(e.ctx, timeout, 100*time.Millisecond, "", func() bool {
		o, m, b, err := e.checkCombinedObj(x, of)
		if err != nil {
			mismatch = "the CombinedStatuses could not be read: " + err.Error()
			return false
		}
		ob, mismatch, bad = o, m, b
		return m == ""
	})
	if mismatch != "" && bad.name != "" {
		mismatch += " (after " + timeout.String() + ")"
	}
	return ob, mismatch, bad, e.ctx.Err()
}

// upTotals are the fleet's upsync counters at one moment.
type upTotals struct {
	rootBytes, rootMsgs     uint64
	regionBytes, regionMsgs uint64
}

func (f *fleet) upTotals() upTotals {
	var t upTotals
	for _, c := range f.root.Children() {
		t.rootBytes += c.Up.BytesReceived
		t.rootMsgs += c.Up.MessagesReceived
	}
	for _, r := range f.regions {
		c := r.current()
		if c == nil {
			continue
		}
		d := c.Downlink()
		if d == nil {
			continue
		}
		for _, ch := range d.Children() {
			t.regionBytes += ch.Up.BytesReceived
			t.regionMsgs += ch.Up.MessagesReceived
		}
	}
	return t
}

// quiet is how long no upsync byte may arrive for a wave to have
// settled; quietTimeout bounds the wait.
const (
	quiet        = time.Second
	quietTimeout = 30 * time.Second
)

// waitQuiet waits until no byte has arrived over any upsync stream for
// quiet; false when that did not happen within quietTimeout.
func (e *env) waitQuiet() (bool, error) {
	last, since := e.f.upTotals(), time.Now()
	err := waitEvery(e.ctx, quietTimeout, 100*time.Millisecond, "", func() bool {
		now := e.f.upTotals()
		if now.rootBytes != last.rootBytes || now.regionBytes != last.regionBytes {
			last, since = now, time.Now()
		}
		return time.Since(since) >= quiet
	})
	if e.ctx.Err() != nil {
		return false, e.ctx.Err()
	}
	return err == nil, nil
}

// reportTally counts the reports stored in the reports-* spaces of some
// stores while it runs. Safe for concurrent use.
type reportTally struct {
	mu     sync.Mutex
	by     map[string]ReportWrites
	spaces map[string]map[string]bool // resource → spaces written
	first  map[string]time.Time       // resource → first write
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// tallyReports starts counting the reports written into the reports-*
// spaces of sts.
func tallyReports(ctx context.Context, sts []*store.Store) *reportTally {
	t := &reportTally{by: map[string]ReportWrites{}, spaces: map[string]map[string]bool{}, first: map[string]time.Time{}}
	ctx, t.cancel = context.WithCancel(ctx)
	for _, st := range sts {
		w, err := st.Watch(ctx, store.WatchOptions{})
		if err != nil {
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer w.Stop()
			for ev := range w.Events() {
				if ev.Object == nil || !strings.HasPrefix(ev.Object.Key.Space, layout.ReportsSpace("")) {
					continue
				}
				res := ev.Object.Key.Resource.Resource
				if ev.Type == store.Deleted {
					res += " (deleted)"
				}
				t.mu.Lock()
				c := t.by[res]
				c.Writes++
				c.Bytes += uint64(len(ev.Object.Data))
				if t.spaces[res] == nil {
					t.spaces[res] = map[string]bool{}
				}
				// Spaces are per child, and distinct across stores.
				t.spaces[res][fmt.Sprintf("%p/%s", st, ev.Object.Key.Space)] = true
				c.Children = len(t.spaces[res])
				now := time.Now()
				if _, ok := t.first[res]; !ok {
					t.first[res] = now
				}
				c.SpreadS = round3(now.Sub(t.first[res]).Seconds())
				t.by[res] = c
				t.mu.Unlock()
			}
		}()
	}
	return t
}

// stop ends the count and returns it.
func (t *reportTally) stop() map[string]ReportWrites {
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.by
}

// regionStores are the report stores (in memory) of the running regions.
func (f *fleet) regionStores() []*store.Store {
	var out []*store.Store
	for _, r := range f.regions {
		if c := r.current(); c != nil {
			out = append(out, c.Reports())
		}
	}
	return out
}

// statusWaves is the status scenario: the workload is on the first
// wave's edges (runOnce placed it there); settle, one change (wave 1);
// widen the placement to every edge, settle, one change (wave 2).
func statusWaves(e *env) error {
	res := &StatusWaves{Exact: true}
	e.s.StatusWaves = res // filled in as it goes: a failed run shows how far it got
	of := objRef{"configmaps", "cm-0"}
	if e.o.RolloutObject == RolloutDeployment {
		of = objRef{"deployments", "web"}
	}
	res.Object = of.resource + "/" + of.name
	e.p.phase("status waves", 100)

	first := e.expectation(false)
	e.event(fmt.Sprintf("the workload is on %d edges, %d of which refuse it", first.placed, len(first.failing)))
	if err := e.settle("the first placement", first, false, of); err != nil {
		return err
	}
	e.p.set(20)
	if err := e.wave(res, "wave 1", false, of); err != nil {
		return err
	}
	e.p.set(40)

	// Widen the placement to every edge.
	late := 0
	for _, r := range e.f.edges {
		if r.subset {
			continue
		}
		late++
		for _, t := range e.edgeTrackers {
			t.addLateEdge(r.name, r.group)
		}
	}
	all := e.expectation(true)
	e.st.widen(all.placed - len(all.failing))
	at := time.Now()
	for _, t := range e.u.trackers() {
		t.setPhase("widen")
		t.restampAs(at, "widen")
	}
	e.event(fmt.Sprintf("widen the placement to every edge: %d more, %d of every %d refuse it", late, len(all.failing), all.placed))
	if err := e.u.widen(e.ctx); err != nil {
		return err
	}
	if err := e.t.waitConverged(e.ctx, e.roundTimeout(), "the workload in every inbox after widening"); err != nil {
		return err
	}
	if err := e.settle("the widened placement", all, true, of); err != nil {
		return err
	}
	e.p.set(70)
	if err := e.wave(res, "wave 2", true, of); err != nil {
		return err
	}
	e.p.set(100)
	if n := len(res.Waves); n >= 2 && res.Waves[0].RootBytes > 0 {
		res.RootBytesRatio = round3(float64(res.Waves[n-1].RootBytes) / float64(res.Waves[0].RootBytes))
	}
	return nil
}

// settle waits, after a placement, until the CombinedStatuses are exact
// and no more reports arrive. A placement that does not settle exact is
// told as an event: the next wave is measured all the same, and its own
// check fails.
func (e *env) settle(what string, x statusExpect, all bool, of objRef) error {
	_, mismatch, bad, err := e.waitExact(x, of, e.roundTimeout())
	if err != nil {
		return err
	}
	if mismatch != "" {
		e.event(fmt.Sprintf("the CombinedStatuses of %s did not settle exact: %s; below the root: %s", what, mismatch, e.diagnose(x, all, bad)))
	}
	if ok, err := e.waitQuiet(); err != nil {
		return err
	} else if !ok {
		e.event(fmt.Sprintf("reports still arriving %s after %s settled", quietTimeout, what))
	}
	return nil
}

// wave makes one change of object of and measures its status wave.
func (e *env) wave(res *StatusWaves, name string, all bool, of objRef) error {
	for _, t := range e.u.trackers() {
		t.setPhase(name)
	}
	before := e.f.upTotals()
	rootTally := tallyReports(e.ctx, []*store.Store{e.f.root.Reports()})
	regionTally := tallyReports(e.ctx, e.f.regionStores())
	t0 := time.Now()
	if err := e.u.rollout(e.ctx, e.o.RolloutObject); err != nil {
		rootTally.stop()
		regionTally.stop()
		return err
	}
	e.changes++
	x := e.expectation(all)
	w := StatusWave{Name: name, Edges: x.placed, Failing: len(x.failing), FailingEdges: x.failing}
	err := e.t.waitConverged(e.ctx, e.roundTimeout(), name+": the change in every inbox")
	var (
		mismatch string
		bad      objRef
	)
	if err == nil {
		w.Observed, mismatch, bad, err = e.waitExact(x, of, e.roundTimeout())
	}
	if err != nil {
		rootTally.stop()
		regionTally.stop()
		return err
	}
	w.ExactS = time.Since(t0).Seconds()
	quietOK, err := e.waitQuiet()
	if err != nil {
		rootTally.stop()
		regionTally.stop()
		return err
	}
	w.SettledS = time.Since(t0).Seconds() - quiet.Seconds()
	after := e.f.upTotals()
	w.RootWrites, w.RegionWrites = rootTally.stop(), regionTally.stop()
	// Exact at the end, once nothing more arrives.
	if mismatch == "" {
		var cerr error
		if w.Observed, mismatch, bad, cerr = e.checkCombinedObj(x, of); cerr != nil {
			return cerr
		}
		if mismatch != "" {
			mismatch += " (once settled)"
		}
	}
	w.Exact, w.Mismatch = mismatch == "", mismatch
	if !w.Exact && bad.name != "" {
		w.Diagnosis = e.diagnose(x, all, bad)
	}
	res.Exact = res.Exact && w.Exact
	w.RootBytes, w.RootMessages = after.rootBytes-before.rootBytes, after.rootMsgs-before.rootMsgs
	w.RegionBytes, w.RegionMessages = after.regionBytes-before.regionBytes, after.regionMsgs-before.regionMsgs
	res.Waves = append(res.Waves, w)
	verdict := "exact"
	if !w.Exact {
		verdict = "NOT exact: " + mismatch
	}
	if !quietOK {
		verdict += fmt.Sprintf(" (reports still arriving after %s)", quietTimeout)
	}
	e.event(fmt.Sprintf("%s on %d edges (%d failing): %d bytes in at the root, %d at the regions; CombinedStatus %s", name, w.Edges, w.Failing, w.RootBytes, w.RegionBytes, verdict))
	return nil
}

// widen makes the EdgePlacement select every Location of the fleet.
func (u *user) widen(ctx context.Context) error {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{
		"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{fleetLabel: "sim"}}}}})
	if err := u.timed(ctx, func() error {
		_, err := u.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Patch(ctx, PlacementName, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("sim: widening the EdgePlacement: %w", err)
	}
	return nil
}

// statusError is the error of a status run whose CombinedStatuses were
// not exact.
func (r *StatusWaves) err() error {
	if r == nil || r.Exact {
		return nil
	}
	for _, w := range r.Waves {
		if !w.Exact {
			return errorf("status scenario: the CombinedStatus was not exact after %s (%d edges, %d failing): %s; below the root: %s", w.Name, w.Edges, w.Failing, w.Mismatch, w.Diagnosis)
		}
	}
	return errorf("status scenario: the CombinedStatus was not exact")
}

// diagnose says, for a CombinedStatus that is not exact, where the count
// of object o goes wrong below the root: per region, the destinations its
// outbox's partial counts against the placed edges below it, and the
// placed edges whose outbox holds no partial of o.
func (e *env) diagnose(x statusExpect, all bool, o objRef) string {
	partialOf := func(st *store.Store) (*reports.Partial, bool) {
		lr, err := st.List(store.ListOptions{Space: layout.OutboxSpace, Resource: reports.PartialResource})
		if err != nil {
			return nil, false
		}
		for _, ob := range lr.Items {
			p, err := reports.Decode[reports.Partial](ob.Data)
			if err == nil && p.Placement.Name == PlacementName && p.Collector == CollectorName &&
				p.Object.Resource == o.resource && p.Object.Name == o.name {
				return &p, true
			}
		}
		return nil, false
	}
	var b strings.Builder
	var missing []string
	below := map[string]int{} // placed edges per region of depth 1
	for _, r := range e.f.edges {
		if !all && !r.subset {
			continue
		}
		below[r.group]++
		c := r.current()
		if c == nil {
			missing = append(missing, r.name+" (not running)")
			continue
		}
		if _, ok := partialOf(c.Store()); !ok {
			if len(missing) < 3 {
				missing = append(missing, r.name+" {"+edgeState(r, c.Store(), o)+"}")
			} else {
				missing = append(missing, r.name)
			}
		}
	}
	for _, r := range e.f.regions {
		if r.depth != 1 {
			continue
		}
		c := r.current()
		if c == nil {
			continue
		}
		p, ok := partialOf(c.Store())
		switch {
		case !ok:
			fmt.Fprintf(&b, "%s: no partial of %s/%s; ", r.name, o.resource, o.name)
		case p.Partial.Destinations != int64(below[r.name]):
			fmt.Fprintf(&b, "%s counts %d destinations of %d (%d failing); ", r.name, p.Partial.Destinations, below[r.name], p.Partial.FailingCount)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "edges without a partial of %s/%s in their outbox: %s", o.resource, o.name, abbreviate(missing))
	}
	if b.Len() == 0 {
		return "every region's and edge's outbox counts as expected"
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// edgeState describes, for diagnosis, what an edge holds of object o:
// whether it refuses the workload, the syncer's applied record of o, its
// outbox's reports and its DestinationStatus.
func edgeState(r *relay, st *store.Store, o objRef) string {
	var parts []string
	if r.failing {
		parts = append(parts, "refuses the workload")
	}
	applied := "no applied record"
	if lr, err := st.List(store.ListOptions{Space: "", Resource: syncer.AppliedResource}); err == nil {
		for _, ob := range lr.Items {
			if ref, v, ok := appliedVersion(ob); ok && ref == o {
				applied = fmt.Sprintf("applied at version %d", v)
			}
		}
	}
	parts = append(parts, applied)
	if lr, err := st.List(store.ListOptions{Space: layout.OutboxSpace}); err == nil {
		by := map[string]int{}
		for _, ob := range lr.Items {
			by[ob.Key.Resource.Resource]++
			if ob.Key.Resource.Resource != "destinationstatuses" {
				continue
			}
			var ds struct {
				Status struct {
					Reachable   bool   `json:"reachable"`
					Applied     int    `json:"applied"`
					FailedCount int    `json:"failedCount"`
					LastError   string `json:"lastError"`
				} `json:"status"`
			}
			if json.Unmarshal(ob.Data, &ds) == nil {
				parts = append(parts, fmt.Sprintf("syncer: reachable %v, %d applied, %d failed %q", ds.Status.Reachable, ds.Status.Applied, ds.Status.FailedCount, ds.Status.LastError))
			}
		}
		parts = append(parts, fmt.Sprintf("outbox %v", by))
	}
	return strings.Join(parts, "; ")
}
