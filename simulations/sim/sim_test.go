package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// Each scenario on a small tree (1x2x3: a root, 2 regions, 3 edges under
// each) runs, converges, and reports: the JSON line parses, report.md and
// the PNGs are written. Timings are not asserted (STYLE.md: no timed
// assertions in unit tests).
func TestScenariosConverge(t *testing.T) {
	for _, sc := range Scenarios {
		if sc == ScenarioStatus || sc == ScenarioView {
			continue // TestStatusWaves, TestViewScenario
		}
		t.Run(sc, func(t *testing.T) {
			dir := t.TempDir()
			// Without a Deployment, the virtual clusters run no pods: the
			// test spends its CPU on the relays.
			o := Options{Topology: "1x2x3", Scenario: sc, Duration: time.Second, Seed: 7, ReportDir: dir, Objects: 2, Workdir: t.TempDir(),
				Arrival: ArrivalInbox, NoDeployment: true}
			if sc == ScenarioRollout {
				// At the virtual clusters (the edge syncer's records), the
				// Deployment's image as the rollout.
				o.Arrival, o.NoDeployment, o.RolloutObject = ArrivalAuto, false, RolloutDeployment
			}
			if sc == ScenarioFlakyLinks {
				o.Latency = 2 * time.Millisecond
			}
			if sc == ScenarioFlatVsTree {
				o.Idle = 2 * time.Second // in each phase; the default is 5 s
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			s, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if sc == ScenarioRollout && s.Arrival != ArrivalCluster {
				t.Errorf("arrival measured at the %s: the edge syncer's applied records were not seen", s.Arrival)
			}
			if !s.OK || s.Converged != 6 || s.Destinations != 6 {
				t.Fatalf("converged %d of %d (ok %v)", s.Converged, s.Destinations, s.OK)
			}
			if s.Changes == 0 || s.Propagation.Samples == 0 {
				t.Fatalf("%d changes, %d samples", s.Changes, s.Propagation.Samples)
			}
			// Measured once the edges evaluate StatusCollectors; never a
			// made-up figure otherwise.
			if cs := s.CombinedStatus; (cs == nil) != strings.HasPrefix(s.CombinedStatusNote, "not measured") || (cs != nil && cs.Samples == 0) {
				t.Fatalf("CombinedStatus %+v, note %q", cs, s.CombinedStatusNote)
			}

			var back map[string]any
			line := s.JSON()
			if strings.Contains(string(line), "\n") || json.Unmarshal(line, &back) != nil {
				t.Fatalf("summary is not one line of JSON: %s", line)
			}
			if back["scenario"] != sc || back["ok"] != true {
				t.Fatalf("summary: %s", line)
			}
			if s.HeapPerEdgeEndKiB <= 0 {
				t.Fatalf("heap per edge at the end: %v KiB", s.HeapPerEdgeEndKiB)
			}
			for _, f := range []string{ReportFile, SummaryFile, PlotLatency, PlotBytes, PlotConverged, HeapFile, HeapEndFile} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || len(b) == 0 {
					t.Fatalf("%s: %v (%d bytes)", f, err, len(b))
				}
				if strings.HasSuffix(f, ".png") && string(b[1:4]) != "PNG" {
					t.Fatalf("%s is not a PNG", f)
				}
			}

			switch sc {
			case ScenarioRegionFailure:
				if r := s.Rehome; r == nil || r.Edges != 3 || r.PathsUpdated != 3 {
					t.Fatalf("re-home: %+v", r)
				}
			case ScenarioPartition:
				if r := s.Partition; r == nil || r.Writes == 0 {
					t.Fatalf("partition: %+v", r)
				}
			case ScenarioFlatVsTree:
				if c := s.FlatVsTree; c == nil || c.RootBytesRatio <= 1 || c.Flat == nil || !c.Flat.OK {
					t.Fatalf("flat vs tree: %+v", c)
				}
				// Each phase idled first: the root's idle rate, and its
				// CPU per change net of it, at most the plain figure. The
				// rate may be 0: the profile samples CPU in 10 ms steps,
				// and the root of 6 edges does about 5 ms a second when
				// nothing changes.
				c := s.FlatVsTree
				for _, ph := range []*Summary{s, c.Flat} {
					if ph.CPUByTier == nil {
						t.Skip("another CPU profile is running: no split by tier")
					}
					r, m := ph.RootIdleCPUMsPerS, ph.RootCPUPerChangeMarginalMs
					if r == nil || m == nil {
						t.Fatalf("%s: idle %.1f s, no root CPU per second (%v) or marginal CPU per change (%v)", ph.Topology, ph.IdleS, r, m)
					}
					t.Logf("%s: idle %.1f s, root %.2f ms/s; root CPU per change %.2f ms, marginal %.2f ms", ph.Topology, ph.IdleS, *r, ph.RootCPUPerChangeMs, *m)
					if ph.IdleS < 2 || *r < 0 || *m < 0 || *m > ph.RootCPUPerChangeMs {
						t.Errorf("%s: want an idle window of 2 s, a rate ≥ 0 and 0 ≤ marginal ≤ plain", ph.Topology)
					}
				}
				if c.TreeRootIdleCPUMsPerS != s.RootIdleCPUMsPerS || c.FlatRootMarginalMs != c.Flat.RootCPUPerChangeMarginalMs {
					t.Errorf("flat vs tree: idle and marginal figures are not the phases'")
				}
				// Each change is at least one entry of the root's log (its
				// reports may come after this short phase: TestReportFigures).
				if s.RootLogEntriesPerChange < 1 {
					t.Errorf("tree phase: %v entries of the root's log per change, want 1 or more", s.RootLogEntriesPerChange)
				}
				for _, k := range []string{"root_idle_cpu_ms_per_s", "root_cpu_per_change_marginal_ms", "root_log_entries_per_change"} {
					if _, ok := back[k]; !ok {
						t.Errorf("summary without %s: %s", k, line)
					}
				}
				if md, _ := os.ReadFile(filepath.Join(dir, ReportFile)); !strings.Contains(string(md), "root CPU per change, marginal") {
					t.Errorf("report.md has no marginal root CPU per change")
				}
			default:
				if s.IdleS != 0 || s.RootIdleCPUMsPerS != nil || s.RootCPUPerChangeMarginalMs != nil {
					t.Errorf("%s: an idle window without --idle: %.1f s", sc, s.IdleS)
				}
			case ScenarioRootFailover:
				// The leader changed, a write was acknowledged after the
				// kill, writes after it reached every destination, and
				// the killed replica came back.
				r := s.Failover
				if r == nil || r.Replicas != 3 || r.Killed == "" || r.NewLeader == "" || r.NewLeader == r.Killed || r.GapS <= 0 || !r.Rejoined {
					t.Fatalf("failover: %+v", r)
				}
				if p := phase(s, "after"); p == nil || p.Samples == 0 {
					t.Fatalf("no propagation measured after the failover: %+v", s.Phases)
				}
			}
		})
	}
}

// The view scenario on 1x2x3: every edge's objects come back through
// the upsync clause, the View lists all 18 of them, the edges' changes
// reach both informers, and the report has the figures.
func TestViewScenario(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Run(ctx, Options{Topology: "1x2x3", Scenario: ScenarioView, Duration: 2 * time.Second, Seed: 7, ReportDir: dir,
		Objects: 3, Workdir: t.TempDir(), Arrival: ArrivalInbox, NoDeployment: true})
	if err != nil {
		t.Fatal(err)
	}
	r := s.View
	if r == nil || !s.OK {
		t.Fatalf("ok %v, view %+v", s.OK, r)
	}
	t.Logf("view: %+v", *r)
	if r.Objects != 18 || r.Listed != 18 || r.StatusObjects != 18 {
		t.Errorf("view of %d objects: listed %d, status.objects %d", r.Objects, r.Listed, r.StatusObjects)
	}
	if r.EdgeWrites == 0 || r.List.Samples == 0 || r.WatchView.Samples != uint64(r.EdgeWrites) || r.WatchPartition.Samples == 0 || r.Missed != 0 {
		t.Errorf("%d edge writes, %d lists, %d and %d deliveries (whole view, partition), %d missed", r.EdgeWrites, r.List.Samples, r.WatchView.Samples, r.WatchPartition.Samples, r.Missed)
	}
	if r.StoreBytes <= 0 || r.StoreBytesPerObject <= 0 || r.HeapAfterMiB <= 0 {
		t.Errorf("memory: %+v", r)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil || !strings.Contains(string(md), "edge write → informer of partition p0") {
		t.Errorf("report.md has no view figures (%v)", err)
	}
}

// phase returns the propagation of one phase of s, or nil.
func phase(s *Summary, name string) *PhaseLatency {
	for i := range s.Phases {
		if s.Phases[i].Phase == name {
			return &s.Phases[i]
		}
	}
	return nil
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		flag string
		want string
	}{
		{Options{Topology: "10x10"}, "topology", "runs one root relay"},
		{Options{Topology: "1"}, "topology", "not a fan-out"},
		{Options{Topology: "1x0"}, "topology", "not a positive number"},
		{Options{Topology: "1x200x200"}, "topology", "at most"},
		{Options{Scenario: "nope"}, "scenario", "must be one of"},
		{Options{Scenario: ScenarioPartition, Topology: "1x5"}, "scenario", "needs regions"},
		{Options{Scenario: ScenarioRegionFailure, Topology: "1x1x5"}, "scenario", "sibling region"},
		{Options{Network: "tcp"}, "network", "must be memnet or udp"},
		{Options{Network: NetworkUDP, Latency: time.Millisecond}, "latency", "needs --network=memnet"},
		{Options{Network: NetworkUDP, Topology: "1x100x100"}, "network", "open-file limit"},
		{Options{Loss: 1.5}, "loss", "below 1"},
		{Options{AdmissionDelay: -time.Second}, "admission-delay", "from 0 to 1m"},
		{Options{Arrival: "edge"}, "arrival", "auto, inbox or cluster"},
		{Options{Scenario: ScenarioStatus, Topology: "1x50"}, "scenario", "at least 3 tiers"},
		{Options{Scenario: ScenarioStatus, Failing: 1}, "failing", "below 1"},
		{Options{Scenario: ScenarioRollout, Failing: 0.2}, "failing", "only the status scenario"},
		{Options{Scenario: ScenarioStatus, Topology: "1x2x5", StatusEdges: 10}, "status-edges", "must be from 1 to 9"},
		{Options{Scenario: ScenarioChurn, StatusEdges: 3}, "status-edges", "only the status scenario"},
		{Options{Scenario: ScenarioStatus, Arrival: ArrivalCluster}, "arrival", "failing edges never apply"},
	} {
		errs := tc.o.Complete().Validate(20000)
		if len(errs) == 0 {
			t.Errorf("%+v: no error", tc.o)
			continue
		}
		var oe *OptionError
		if !errors.As(errs[0], &oe) || oe.Flag != tc.flag || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%+v: %v, want --%s: ...%s...", tc.o, errs, tc.flag, tc.want)
		}
	}
	if errs := (Options{}).Complete().Validate(20000); len(errs) != 0 {
		t.Errorf("defaults: %v", errs)
	}
	st := Options{Scenario: ScenarioStatus}.Complete()
	if errs := st.Validate(20000); len(errs) != 0 || st.Failing != DefaultFailing || st.StatusEdges != 100 || st.Arrival != ArrivalInbox {
		t.Errorf("status defaults: %+v: %v", st, errs)
	}
	if st := (Options{Scenario: ScenarioStatus, Failing: -1}).Complete(); st.Failing != 0 || len(st.Validate(20000)) != 0 {
		t.Errorf("status without failing edges: %+v", st)
	}
}

// The idle window's default: 5 s for flat-vs-tree (each phase), none
// otherwise; negative is none.
func TestIdleDefaults(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want time.Duration
	}{
		{Options{}, 0},
		{Options{Scenario: ScenarioFlatVsTree}, DefaultFlatVsTreeIdle},
		{Options{Scenario: ScenarioFlatVsTree, Idle: -1}, 0},
		{Options{Scenario: ScenarioFlatVsTree, Idle: time.Second}, time.Second},
		{Options{Scenario: ScenarioChurn, Idle: 3 * time.Second}, 3 * time.Second},
	} {
		if got := tc.o.Complete(); got.Idle != tc.want || len(got.Validate(20000)) != 0 {
			t.Errorf("%s with idle %s: %s, %v; want %s", tc.o.Scenario, tc.o.Idle, got.Idle, got.Validate(20000), tc.want)
		}
	}
}

// The root's CPU per change net of its idle rate.
func TestMarginalPerChange(t *testing.T) {
	for _, tc := range []struct {
		name       string
		measured   time.Duration
		measuredS  float64
		idleMsPerS float64
		changes    int
		want       float64
	}{
		{"no idle work", 500 * time.Millisecond, 10, 0, 50, 10},
		{"idle work subtracted", 500 * time.Millisecond, 10, 20, 50, 6},    // (500 − 200) / 50
		{"idle work is everything", 200 * time.Millisecond, 10, 20, 50, 0}, // (200 − 200) / 50
		{"floored at zero", 100 * time.Millisecond, 10, 20, 50, 0},         // −100 ms
		{"no changes", 500 * time.Millisecond, 10, 20, 0, 0},
		{"one change", 1500 * time.Microsecond, 0.1, 5, 1, 1},
	} {
		if got := marginalPerChange(tc.measured, tc.measuredS, tc.idleMsPerS, tc.changes); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReportFigures(t *testing.T) {
	s := Summary{Changes: 20, MeasuredS: 60,
		Tiers: []TierLinks{{Tier: 1, Links: 10, UpMessages: 700, UpReports: 600}, {Tier: 2, Links: 1000, UpMessages: 90000, UpReports: 80000}}}
	s.setReportFigures()
	if s.RootReportsPerChange != 30 || s.RootReportsPerChild != 3 || s.RootReportsPerChildPerS != 1 {
		t.Errorf("reports per change %v, per child %v, per child and second %v; want 30, 3 and 1 (tier 1's reports only)",
			s.RootReportsPerChange, s.RootReportsPerChild, s.RootReportsPerChildPerS)
	}
	for name, s := range map[string]Summary{
		"no reports": {Changes: 20, MeasuredS: 60, Tiers: []TierLinks{{Tier: 1, Links: 10, UpMessages: 100}}},
		"no tier 1":  {Changes: 20, MeasuredS: 60, Tiers: []TierLinks{{Tier: 2, Links: 10, UpMessages: 5, UpReports: 5}}},
	} {
		s.setReportFigures()
		if s.RootReportsPerChange != 0 || s.RootReportsPerChildPerS != 0 {
			t.Errorf("%s: reports per change %v, per child and second %v; want none", name, s.RootReportsPerChange, s.RootReportsPerChildPerS)
		}
	}
	noChanges := Summary{MeasuredS: 60, Tiers: []TierLinks{{Tier: 1, Links: 10, UpReports: 600}}}
	noChanges.setReportFigures()
	if noChanges.RootReportsPerChange != 0 || noChanges.RootReportsPerChildPerS != 1 {
		t.Errorf("no changes: reports per change %v, per child and second %v; want 0 and 1", noChanges.RootReportsPerChange, noChanges.RootReportsPerChildPerS)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, q := range []struct {
		q    float64
		want time.Duration
	}{{.5, 500 * time.Millisecond}, {.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.quantile(q.q)
		if d := got - q.want; d < -q.want/50 || d > q.want/50 {
			t.Errorf("q%.2f = %s, want %s ± 2%%", q.q, got, q.want)
		}
	}
	if h.max != time.Second || h.n != 1000 {
		t.Errorf("max %s n %d", h.max, h.n)
	}
}

// addN is n calls of add.
func TestHistogramAddN(t *testing.T) {
	var one, many histogram
	for _, d := range []time.Duration{3 * time.Millisecond, -time.Millisecond, time.Second} {
		for range 7 {
			one.add(d)
		}
		many.addN(d, 7)
	}
	many.addN(time.Hour, 0)
	if one.n != many.n || one.sum != many.sum || one.max != many.max || !slices.Equal(one.counts, many.counts) {
		t.Errorf("addN: n %d sum %v max %v, want n %d sum %v max %v (or other counts)", many.n, many.sum, many.max, one.n, one.sum, one.max)
	}
}

func TestTrackerSkippedVersions(t *testing.T) {
	tr := newTracker(ArrivalInbox)
	tr.addEdge("e1", "g")
	i := tr.addObject(objRef{"configmaps", "a"})
	t0 := time.Now()
	for range 3 {
		tr.begin(i, t0)
	}
	if n, of := tr.converged(); n != 0 || of != 1 {
		t.Fatalf("converged %d of %d before arrival", n, of)
	}
	// Version 3 arrives without 1 and 2: all three count as arrived.
	tr.arrive("e1", objRef{"configmaps", "a"}, 3, t0.Add(10*time.Millisecond))
	if n, _ := tr.converged(); n != 1 {
		t.Fatal("not converged after the latest version arrived")
	}
	_, hs := tr.histograms()
	if h := hs[""]; h == nil || h.n != 3 {
		t.Fatalf("histograms %v", hs)
	}
}

func TestVersionOf(t *testing.T) {
	data := []byte(`{"metadata":{"annotations":{"canopy.dev/sim-version":"42","edge.canopy.dev/destinations":"a,b"}}}`)
	if v, ok := versionOf(data); !ok || v != 42 {
		t.Fatalf("versionOf = %d, %v", v, ok)
	}
	if _, ok := versionOf([]byte(`{}`)); ok {
		t.Fatal("a version in {}")
	}
}

// TestMarginalRatio: the flat/tree ratio of the marginal figures is given
// only while neither phase's idle rate is most of its CPU (the figures of
// make bench's 1 000- and 10 000-cluster runs).
func TestMarginalRatio(t *testing.T) {
	p := func(v float64) *float64 { return &v }
	c := FlatVsTree{TreeRootCPUMs: 22.9, FlatRootCPUMs: 676, TreeRootMarginalMs: p(19.6), FlatRootMarginalMs: p(542)}
	c.marginalRatio()
	if c.RootMarginalRatio != 27.653 || c.RootIdleShare != 0.198 {
		t.Errorf("1 000 edges: ratio %v, idle share %v; want 27.653 and 0.198", c.RootMarginalRatio, c.RootIdleShare)
	}
	c = FlatVsTree{TreeRootCPUMs: 240, FlatRootCPUMs: 5557, TreeRootMarginalMs: p(240), FlatRootMarginalMs: p(61.1)}
	c.marginalRatio()
	if c.RootMarginalRatio != 0 || c.RootIdleShare != 0.989 {
		t.Errorf("10 000 edges: ratio %v, idle share %v; want none and 0.989", c.RootMarginalRatio, c.RootIdleShare)
	}
	c = FlatVsTree{TreeRootCPUMs: 6, FlatRootCPUMs: 50}
	c.marginalRatio()
	if c.RootMarginalRatio != 0 || c.RootIdleShare != 0 {
		t.Errorf("no idle window: ratio %v, idle share %v; want neither", c.RootMarginalRatio, c.RootIdleShare)
	}
}

// TestExplainLag describes an edge that misses a version: how its inbox
// differs from what its parent routes, and its SyncTarget at the root.
func TestExplainLag(t *testing.T) {
	o := Options{Topology: "1x1x2", Arrival: ArrivalInbox}.Complete()
	fan, err := ParseTopology(o.Topology)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := newFleet(ctx, o, fleetShape{fan: fan}, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := f.grow(ctx, 8, func(int) {}); err != nil {
		t.Fatal(err)
	}
	edge := f.edges[0].name
	var got []string
	// The SyncTarget is written once the edge's announcement arrived.
	poll.Until(t, "explainLag to show the edge connected", func() error {
		if got = f.explainLag([]string{edge, "no-such-edge"}); len(got) != 1 || !strings.Contains(got[0], "connected true") {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	want := edge + " under " + f.edges[0].parent.name + ": holds what its parent routes to it; SyncTarget at the root: connected true, path root/" + f.edges[0].parent.name + "/" + edge
	if len(got) != 1 || got[0] != want {
		t.Errorf("explainLag: %q, want [%q]", got, want)
	}
}

// The edges' admission delays are n even steps up to AdmissionDelay, each
// region gets fast and slow ones, and the seed fixes the order.
func TestSpreadAdmission(t *testing.T) {
	spread := func(seed uint64) []*relay {
		f := &fleet{opts: Options{AdmissionDelay: time.Second, Seed: seed}, byName: map[string]*relay{}}
		f.layout(fleetShape{fan: []int{1, 2, 5}}, 2, 10)
		f.spreadAdmission()
		return f.edges
	}
	delays := func(edges []*relay) map[string]time.Duration {
		m := map[string]time.Duration{}
		for _, e := range edges {
			m[e.name] = e.admission
		}
		return m
	}
	edges := spread(1)
	var steps []time.Duration
	slowest := map[string]time.Duration{}
	fastest := map[string]time.Duration{}
	for _, e := range edges {
		d := e.admission
		steps = append(steps, d)
		slowest[e.group] = max(slowest[e.group], d)
		if fastest[e.group] == 0 || d < fastest[e.group] {
			fastest[e.group] = d
		}
	}
	slices.Sort(steps)
	for i, d := range steps {
		if want := time.Duration(i+1) * 100 * time.Millisecond; d != want {
			t.Fatalf("delays %v: step %d is %s, want %s", steps, i, d, want)
		}
	}
	for g := range slowest {
		if fastest[g] > 500*time.Millisecond || slowest[g] <= 500*time.Millisecond {
			t.Errorf("region %s: delays from %s to %s, all on one side of the median", g, fastest[g], slowest[g])
		}
	}
	a := delays(edges)
	if b := delays(spread(1)); !maps.Equal(a, b) {
		t.Errorf("the same seed gave %v, then %v", a, b)
	}
	if c := delays(spread(2)); maps.Equal(a, c) {
		t.Errorf("seeds 1 and 2 gave the same order %v", a)
	}
}

// A virtual cluster with an admission delay applies a change that long
// after it arrived: the slowest edge's propagation is at least
// AdmissionDelay. Refusals still pass through the delay.
func TestAdmissionDelay(t *testing.T) {
	const delay = 800 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Run(ctx, Options{Topology: "1x2x3", Scenario: ScenarioChurn, Duration: 3 * time.Second, Seed: 7, Objects: 1,
		Workdir: t.TempDir(), Arrival: ArrivalCluster, NoDeployment: true, AdmissionDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	if !s.OK || s.Converged != 6 || s.Changes == 0 {
		t.Fatalf("converged %d of %d (ok %v), %d changes", s.Converged, s.Destinations, s.OK, s.Changes)
	}
	if s.Arrival != ArrivalCluster {
		t.Fatalf("arrival measured at the %s", s.Arrival)
	}
	if got := time.Duration(s.Propagation.Max * float64(time.Millisecond)); got < delay {
		t.Errorf("the slowest propagation took %s, under the slowest edge's admission delay %s", got, delay)
	}

	refused := errors.New("refused")
	start := time.Now()
	if err := admitAfter(50*time.Millisecond, func(string, string, string) error { return refused })("configmaps", "ns", "cm"); err != refused {
		t.Errorf("admitAfter ignored the next admission: %v", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("admitAfter answered after %s, before its delay", waited)
	}
	if err := admitAfter(time.Millisecond, nil)("configmaps", "ns", "cm"); err != nil {
		t.Errorf("admitAfter without a next admission: %v", err)
	}
}
