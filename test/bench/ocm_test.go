package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseMemory(t *testing.T) {
	status := "Name:\trelay\nVmPeak:\t  900000 kB\nVmHWM:\t   40960 kB\nVmRSS:\t   30720 kB\nRssAnon:\t   20480 kB\nRssFile:\t   10240 kB\nThreads:\t12\n"
	m, err := parseMemory(status)
	if want := (Memory{RSS: 30 << 20, Peak: 40 << 20, Anon: 20 << 20, File: 10 << 20}); err != nil || m != want {
		t.Errorf("parseMemory = %+v, %v; want %+v", m, err, want)
	}
	for _, bad := range []string{"Name:\trelay\n", strings.Replace(status, "30720 kB", "30 MB", 1), strings.Replace(status, "10240", "x", 1)} {
		if _, err := parseMemory(bad); err == nil {
			t.Errorf("parseMemory(%q) accepted", bad)
		}
	}
}

func TestQuantilesAndMaxMean(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if q := QuantilesOf(ds); q != (Quantiles{P50: 5 * time.Millisecond, P90: 9 * time.Millisecond, Max: 10 * time.Millisecond}) {
		t.Errorf("QuantilesOf(1..10 ms) = %+v", q)
	}
	if ds[0] != 10*time.Millisecond {
		t.Error("QuantilesOf sorted its argument")
	}
	if big, mean := MaxMean([]int64{1, 2, 6}); big != 6 || mean != 3 {
		t.Errorf("MaxMean = %d, %v", big, mean)
	}
}

// RenderOCM marks each ratio met or missed against issue 32's goals.
func TestRenderOCM(t *testing.T) {
	run := OCMRun{Clusters: 3, Updates: 20, OCMVersion: "v1.0.0", CanopyVersion: "relay v9", Settings: []string{"Canopy: x"},
		CanopyPlaced: Quantiles{P50: 20 * time.Millisecond, Max: 30 * time.Millisecond},
		OCM: SystemFigures{
			Visible: Quantiles{P50: 100 * time.Millisecond, P90: 150 * time.Millisecond, Max: 200 * time.Millisecond},
			Status:  Quantiles{P50: 100 * time.Millisecond, Max: 100 * time.Millisecond},
			Agents:  []Memory{{RSS: 80 << 20, Anon: 60 << 20, File: 20 << 20}, {RSS: 100 << 20, Anon: 80 << 20, File: 20 << 20}},
		},
		Canopy: SystemFigures{
			Visible: Quantiles{P50: 50 * time.Millisecond, P90: 60 * time.Millisecond, Max: 180 * time.Millisecond},
			Status:  Quantiles{P50: 300 * time.Millisecond, Max: 300 * time.Millisecond},
			Agents:  []Memory{{RSS: 30 << 20, Anon: 20 << 20, File: 10 << 20}, {RSS: 40 << 20, Anon: 30 << 20, File: 10 << 20}},
		}}
	got := RenderOCM([]OCMRun{run}, "make bench-ocm", time.Minute, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"## Canopy beside Open Cluster Management on the same real clusters",
		"`make bench-ocm` (2026-11-25 10:00 UTC, the whole run 1m0s",
		"| Open Cluster Management | v1.0.0",
		"| 3 | OCM | 100 ms | 150 ms | 200 ms | 100 ms |",
		"| 100.0 MiB | 90.0 MiB | 70.0 MiB + 20.0 MiB |",
		"the first hop of its way down, after\n20 ms p50, 30 ms max (3 clusters).",
		"| 3 | 0.50× met | 0.90× **missed** | 3.00× **missed** | 3.00× **missed** | 0.40× met | 0.39× met |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestReplaceRegion(t *testing.T) {
	doc := "# B\n\n" + OCMBeginMarker + "\nold\n" + OCMEndMarker + "\n\nkept\n"
	got, err := ReplaceRegion(doc, OCMBeginMarker, OCMEndMarker, "new\n")
	if want := "# B\n\n" + OCMBeginMarker + "\nnew\n" + OCMEndMarker + "\n\nkept\n"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := ReplaceRegion(doc+OCMBeginMarker, OCMBeginMarker, OCMEndMarker, "x"); err == nil {
		t.Error("two begin markers accepted")
	}
}
