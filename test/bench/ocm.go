package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OCMRun is what one run of BenchmarkOCM measured: the same real clusters
// joined to an Open Cluster Management hub and to a Canopy tree, the same
// changes made through each. cmd/ocmreport renders runs with RenderOCM.
type OCMRun struct {
	Clusters int // managed clusters, each joined to both
	Updates  int // successive changes through each system

	OCMVersion    string // open-cluster-management.io/ocm, hack/ocm/go.mod
	CanopyVersion string // `relay version`, first line
	KubeVersion   string // kube-apiserver of every cluster
	// Settings are the flags either system ran with that bear on the
	// figures, as "system: flag".
	Settings []string

	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute
	// averages when the run began and when it ended.
	LoadStart, LoadEnd string
	// ClustersUp is how long the hub and the managed clusters took to
	// start (in parallel); OCMJoin and CanopyJoin how long each system
	// took from the start of its installation (OCM: the hub's CRDs and
	// controller, each cluster's CRDs and agent, approvals; Canopy: root,
	// region and edges) until its first change was in every cluster and
	// its status back.
	ClustersUp, OCMJoin, CanopyJoin time.Duration
	// Took is the whole run, clusters included.
	Took time.Duration

	OCM, Canopy SystemFigures
	// CanopyPlaced: from the write at the root until the root's placement
	// controller had written the change into its downsync space, the
	// first of the tree's hops, per change.
	CanopyPlaced Quantiles
}

// SystemFigures is one system's share of an OCMRun.
type SystemFigures struct {
	// Visible: from the write at the hub or root until the change is in a
	// cluster, over every (change, cluster) pair.
	Visible Quantiles
	// Status: from the write until the status at the hub or root says
	// every cluster has the change, per change (OCM: every ManifestWork
	// Available at its new generation; Canopy: the EdgePlacement counting
	// every destination synced at the change's revision).
	Status Quantiles
	// Applied is OCM's other condition, per change: every ManifestWork
	// Applied at its new generation (zero for Canopy).
	Applied Quantiles
	// Agents is the memory of each cluster's agent (OCM's klusterlet
	// agent, Canopy's edge relay) after the changes, in cluster order.
	Agents []Memory
	// CPU is the CPU time all agents used during the changes.
	CPU time.Duration
}

// Quantiles are the 50th and 90th percentiles and the maximum of a set
// of durations.
type Quantiles struct {
	P50, P90, Max time.Duration
}

// QuantilesOf returns the quantiles of ds (Percentile's); zero for none.
func QuantilesOf(ds []time.Duration) Quantiles {
	s := slices.Clone(ds)
	slices.Sort(s)
	return Quantiles{P50: Percentile(s, 0.5), P90: Percentile(s, 0.9), Max: Percentile(s, 1)}
}

// MaxMean returns the largest of xs and their mean.
func MaxMean(xs []int64) (largest int64, mean float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var sum int64
	for _, x := range xs {
		largest = max(largest, x)
		sum += x
	}
	return largest, float64(sum) / float64(len(xs))
}

// Memory is a process's resident memory, in bytes, from
// /proc/<pid>/status.
type Memory struct {
	RSS  int64 // VmRSS
	Peak int64 // VmHWM, the largest RSS so far
	Anon int64 // RssAnon: heap, stacks, the runtime's own
	File int64 // RssFile: pages of the binary and of other mapped files
}

// memoryFields are the fields of Memory by their name in the status.
var memoryFields = map[string]func(*Memory) *int64{
	"VmRSS":   func(m *Memory) *int64 { return &m.RSS },
	"VmHWM":   func(m *Memory) *int64 { return &m.Peak },
	"RssAnon": func(m *Memory) *int64 { return &m.Anon },
	"RssFile": func(m *Memory) *int64 { return &m.File },
}

// Memory sums up the agents' memory of f, in bytes.
func (f SystemFigures) Memory() (s MemorySummary) {
	of := func(field func(Memory) int64) (largest int64, mean float64) {
		xs := make([]int64, len(f.Agents))
		for i, m := range f.Agents {
			xs[i] = field(m)
		}
		return MaxMean(xs)
	}
	s.MaxRSS, s.MeanRSS = of(func(m Memory) int64 { return m.RSS })
	s.MaxPeak, _ = of(func(m Memory) int64 { return m.Peak })
	_, s.MeanAnon = of(func(m Memory) int64 { return m.Anon })
	_, s.MeanFile = of(func(m Memory) int64 { return m.File })
	return s
}

// MemorySummary is what SystemFigures.Memory sums up.
type MemorySummary struct {
	MaxRSS, MaxPeak             int64
	MeanRSS, MeanAnon, MeanFile float64
}

// NamedFigures are one system's figures and its name.
type NamedFigures struct {
	Name string
	SystemFigures
}

// Systems returns r's figures of OCM, then of Canopy.
func (r OCMRun) Systems() []NamedFigures {
	return []NamedFigures{{"OCM", r.OCM}, {"Canopy", r.Canopy}}
}

// parseMemory reads Memory out of a /proc/<pid>/status (sizes in kB).
func parseMemory(status string) (Memory, error) {
	var m Memory
	found := 0
	for l := range strings.Lines(status) {
		key, val, ok := strings.Cut(l, ":")
		field := memoryFields[key]
		if !ok || field == nil {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("%s: %q: want a number of kB", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", key, err)
		}
		*field(&m) = kb << 10
		found++
	}
	if found != len(memoryFields) {
		return m, fmt.Errorf("the process status lacks some of VmRSS, VmHWM, RssAnon, RssFile")
	}
	return m, nil
}

// The goals issue 32 sets Canopy against OCM: the ratio of Canopy's figure
// to OCM's, at most.
const (
	GoalLatency = 0.7 // visible p50 and max, status p50
	GoalRSS     = 0.5 // edge relay vs klusterlet agent
)

// OCM region markers in docs/benchmarks.md.
const (
	OCMBeginMarker = "<!-- generated by make bench-ocm: begin -->"
	OCMEndMarker   = "<!-- generated by make bench-ocm: end -->"
)

// RenderOCM returns the Markdown of runs (one per number of clusters):
// the setup, a table of the figures of both systems, and one of the
// goals, each ratio marked met or missed. command is what produced them.
func RenderOCM(runs []OCMRun, command string, took time.Duration, date time.Time) string {
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	p("\n## Canopy beside Open Cluster Management on the same real clusters\n\n")
	p("Generated by `%s` (%s, the whole run %s; from here to the end marker, rewritten by\n", command, date.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	p("`test/bench/cmd/ocmreport`).\n\n")
	if len(runs) == 0 {
		p("No run finished.\n\n")
		return sb.String()
	}
	r0 := runs[0]
	p("| | |\n|---|---|\n")
	p("| Open Cluster Management | %s (hack/ocm/go.mod) |\n", r0.OCMVersion)
	p("| Canopy | %s |\n", r0.CanopyVersion)
	p("| clusters | %s |\n", r0.KubeVersion)
	for _, s := range r0.Settings {
		p("| setting | %s |\n", s)
	}
	for _, r := range runs {
		p("| %d clusters | load average %s at the start, %s at the end; clusters up in %s, OCM joined in %s, Canopy in %s; run %s |\n",
			r.Clusters, r.LoadStart, r.LoadEnd, r.ClustersUp.Round(100*time.Millisecond), r.OCMJoin.Round(100*time.Millisecond),
			r.CanopyJoin.Round(100*time.Millisecond), r.Took.Round(time.Second))
	}
	p("\n")
	p("| clusters | system | visible p50 | p90 | max | status p50 | p90 | max | agent RSS max | mean | mean anon + file | agents' CPU |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		for _, s := range r.Systems() {
			m := s.Memory()
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s + %s | %s |\n", r.Clusters, s.Name,
				msStr(s.Visible.P50), msStr(s.Visible.P90), msStr(s.Visible.Max),
				msStr(s.Status.P50), msStr(s.Status.P90), msStr(s.Status.Max),
				mib(float64(m.MaxRSS)), mib(m.MeanRSS), mib(m.MeanAnon), mib(m.MeanFile), s.CPU.Round(10*time.Millisecond))
		}
	}
	p("\n")
	p("| clusters | visible p50 | visible max | status p50 | status max | RSS max | RSS mean |\n")
	p("|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		o, c := r.OCM, r.Canopy
		om, cm := o.Memory(), c.Memory()
		p("| %d | %s | %s | %s | %s | %s | %s |\n", r.Clusters,
			goal(float64(c.Visible.P50), float64(o.Visible.P50), GoalLatency),
			goal(float64(c.Visible.Max), float64(o.Visible.Max), GoalLatency),
			goal(float64(c.Status.P50), float64(o.Status.P50), GoalLatency),
			goal(float64(c.Status.Max), float64(o.Status.Max), GoalLatency),
			goal(float64(cm.MaxRSS), float64(om.MaxRSS), GoalRSS),
			goal(cm.MeanRSS, om.MeanRSS, GoalRSS))
	}
	p("\nEach cell: Canopy's figure over OCM's, and whether it meets issue 32's goal (at most %.1f× for\n", GoalLatency)
	p("the times, %.1f× for memory). OCM's ManifestWorks were also Applied at their new generation after\n", GoalRSS)
	var applied, placed []string
	for _, r := range runs {
		applied = append(applied, fmt.Sprintf("%s p50, %s max (%d clusters)", msStr(r.OCM.Applied.P50), msStr(r.OCM.Applied.Max), r.Clusters))
		placed = append(placed, fmt.Sprintf("%s p50, %s max (%d clusters)", msStr(r.CanopyPlaced.P50), msStr(r.CanopyPlaced.Max), r.Clusters))
	}
	p("%s. Canopy's change was in the root's downsync space, the first hop of its way down, after\n", strings.Join(applied, "; "))
	p("%s.\n\n", strings.Join(placed, "; "))
	return sb.String()
}

// goal renders ratio c/o and whether it is at most limit.
func goal(c, o, limit float64) string {
	if o <= 0 {
		return "n/a"
	}
	r := c / o
	verdict := "met"
	if r > limit {
		verdict = "**missed**"
	}
	return fmt.Sprintf("%.2f× %s", r, verdict)
}

func msStr(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 0, 64) + " ms"
}

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// ReplaceRegion returns doc with the text between begin and end replaced
// by gen (markers kept); without markers, it appends them with gen. One
// marker without the other, in the wrong order or twice is an error: the
// hand-written text around them must not be lost.
func ReplaceRegion(doc, begin, end, gen string) (string, error) {
	b, e := strings.Index(doc, begin), strings.Index(doc, end)
	switch {
	case b < 0 && e < 0:
		return strings.TrimRight(doc, "\n") + "\n\n" + begin + "\n" + gen + end + "\n", nil
	case b < 0 || e < 0 || e < b:
		return "", fmt.Errorf("bench: the markers %q and %q are unbalanced", begin, end)
	case strings.Count(doc, begin) > 1 || strings.Count(doc, end) > 1:
		return "", fmt.Errorf("bench: more than one region between %q and %q", begin, end)
	}
	return doc[:b+len(begin)] + "\n" + gen + doc[e:], nil
}
