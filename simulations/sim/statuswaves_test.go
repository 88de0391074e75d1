package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The status scenario on a small tree (1x2x5: 2 regions, 5 edges under
// each), a fifth of the edges refusing the workload, 2 edges per region
// in the first wave: both waves end with CombinedStatuses that count
// exactly (destinations, the latest version, failingCount, the failing
// list and its reasons). Bytes are reported, not asserted.
func TestStatusWaves(t *testing.T) {
	dir := t.TempDir()
	o := Options{Topology: "1x2x5", Scenario: ScenarioStatus, Failing: 0.2, StatusEdges: 4, Seed: 7, Objects: 2,
		NoDeployment: true, ReportDir: dir, Workdir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	r := s.StatusWaves
	if r == nil || len(r.Waves) != 2 || !r.Exact {
		t.Fatalf("status waves: %+v", r)
	}
	for i, want := range []struct{ edges, failing int }{{4, 1}, {10, 2}} {
		w := r.Waves[i]
		if w.Edges != want.edges || w.Failing != want.failing || len(w.FailingEdges) != want.failing || !w.Exact {
			t.Fatalf("%s: %d edges, %d failing %v, exact %v (%s); want %d edges, %d failing", w.Name, w.Edges, w.Failing, w.FailingEdges, w.Exact, w.Mismatch, want.edges, want.failing)
		}
		ob := w.Observed
		if ob.Destinations != int64(want.edges) || ob.AtVersion != int64(want.edges-want.failing) || ob.FailingCount != int64(want.failing) ||
			!slices.Equal(ob.Failing, w.FailingEdges) || !slices.IsSorted(ob.Failing) {
			t.Fatalf("%s: CombinedStatus of %s: %+v; failing edges %v", w.Name, r.Object, ob, w.FailingEdges)
		}
		for j, reason := range ob.Reasons {
			if !strings.Contains(reason, "sim: "+ob.Failing[j]+" rejects configmaps sim/cm-0") || !strings.Contains(reason, vcluster.RejectWebhook) {
				t.Errorf("%s: reason of %s: %q", w.Name, ob.Failing[j], reason)
			}
		}
		if w.RootBytes == 0 || w.RegionBytes == 0 || w.RootWrites["partials"].Writes == 0 {
			t.Errorf("%s: nothing measured: %+v", w.Name, w)
		}
	}
	// The first wave's failing edge still fails once every edge is placed.
	if !slices.Contains(r.Waves[1].FailingEdges, r.Waves[0].FailingEdges[0]) {
		t.Errorf("failing edges %v, then %v", r.Waves[0].FailingEdges, r.Waves[1].FailingEdges)
	}
	if !s.OK || s.Converged != 10 || s.Destinations != 10 {
		t.Fatalf("converged %d of %d (ok %v)", s.Converged, s.Destinations, s.OK)
	}

	var back struct {
		StatusWaves *StatusWaves `json:"status_waves"`
	}
	if err := json.Unmarshal(s.JSON(), &back); err != nil || back.StatusWaves == nil || len(back.StatusWaves.Waves) != 2 {
		t.Fatalf("summary: %v: %s", err, s.JSON())
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil || !strings.Contains(string(md), "## Status waves") {
		t.Fatalf("report.md: %v", err)
	}
}

// The check of one CombinedStatus: counts, the failing list bounded at
// 100 by name, and reasons that name the refusal.
func TestStatusExpectCheck(t *testing.T) {
	var failing []string
	for i := range 150 {
		failing = append(failing, fmt.Sprintf("e%03d", i))
	}
	x := statusExpect{placed: 400, failing: failing, latest: map[objRef]int{{"configmaps", "cm-0"}: 3}}
	cs := func(mod func(*combinedView)) *combinedView {
		c := &combinedView{Destinations: 400, FailingCount: 150}
		for _, n := range failing[:100] {
			c.Failing = append(c.Failing, edgev1alpha1.FailingDestination{Name: n,
				Reason: `admission webhook "` + vcluster.RejectWebhook + `" denied the request: sim: ` + n + " rejects configmaps sim/cm-0 (--failing)"})
		}
		c.Results = append(c.Results, struct {
			Name string `json:"name"`
			Rows []struct {
				Columns []any `json:"columns"`
			} `json:"rows"`
		}{Name: CollectorName})
		for _, row := range [][]any{{float64(2), float64(10)}, {float64(3), float64(240)}} {
			c.Results[0].Rows = append(c.Results[0].Rows, struct {
				Columns []any `json:"columns"`
			}{row})
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	o := objRef{"configmaps", "cm-0"}
	if _, m := x.check(cs(nil), o); !strings.Contains(m, "240 destinations at version 3, want the 250") {
		t.Fatalf("10 destinations at an old version: %q", m)
	}
	exact := func(c *combinedView) { c.Results[0].Rows[0].Columns[0] = float64(3) }
	if ob, m := x.check(cs(exact), o); m != "" || ob.AtVersion != 250 {
		t.Fatalf("exact: %q %+v", m, ob)
	}
	for name, tc := range map[string]struct {
		mod  func(*combinedView)
		want string
	}{
		"missing":        {nil, "no CombinedStatus"},
		"destinations":   {func(c *combinedView) { exact(c); c.Destinations = 399 }, "399 destinations, want 400"},
		"failing count":  {func(c *combinedView) { exact(c); c.FailingCount = 100 }, "failingCount 100, want 150"},
		"list too short": {func(c *combinedView) { exact(c); c.Failing = c.Failing[:99] }, "failing ["},
		"list order":     {func(c *combinedView) { exact(c); c.Failing[0], c.Failing[1] = c.Failing[1], c.Failing[0] }, "failing ["},
		"reason":         {func(c *combinedView) { exact(c); c.Failing[7].Reason = "timeout" }, "the reason of e007"},
	} {
		var c *combinedView
		if name != "missing" {
			c = cs(tc.mod)
		}
		if _, m := x.check(c, o); !strings.Contains(m, tc.want) {
			t.Errorf("%s: %q, want ...%s...", name, m, tc.want)
		}
	}
}
