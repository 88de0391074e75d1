package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/canopy-dev/canopy/simulations/sim"
)

// Benchmark is one result line of `go test -bench` output.
type Benchmark struct {
	Pkg     string             // from the preceding "pkg:" line
	Name    string             // without "Benchmark" and the -GOMAXPROCS suffix
	N       int                // iterations
	Metrics map[string]float64 // by unit: "ns/op", "B/op", "ops/s", …
	Units   []string           // in the order printed
}

var (
	benchLine = regexp.MustCompile(`^Benchmark(\S+)\s+(\d+)\s+(.+)$`)
	procs     = regexp.MustCompile(`-\d+$`)
)

// ParseBench reads `go test -bench` output (benchstat's input format) and
// returns its result lines in order; other lines are skipped.
func ParseBench(r io.Reader) ([]Benchmark, error) {
	var out []Benchmark
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, fmt.Errorf("bench: %q: %w", line, err)
		}
		f := strings.Fields(m[3])
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("bench: %q: values and units do not pair", line)
		}
		b := Benchmark{Pkg: pkg, Name: procs.ReplaceAllString(m[1], ""), N: n, Metrics: map[string]float64{}}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("bench: %q: %w", line, err)
			}
			b.Metrics[f[i+1]] = v
			b.Units = append(b.Units, f[i+1])
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

// Medians merges the results of one benchmark run several times (-count)
// into one, in the order each first appears, with the median of each
// metric (of an even number, the mean of the middle two) and the
// iterations summed.
func Medians(bs []Benchmark) []Benchmark {
	var out []Benchmark
	runs := map[string][]Benchmark{}
	for _, b := range bs {
		key := b.Pkg + " " + b.Name
		if runs[key] == nil {
			out = append(out, b)
		}
		runs[key] = append(runs[key], b)
	}
	for i, b := range out {
		rs := runs[b.Pkg+" "+b.Name]
		if len(rs) == 1 {
			continue
		}
		m := Benchmark{Pkg: b.Pkg, Name: b.Name, Metrics: map[string]float64{}, Units: b.Units}
		for _, unit := range b.Units {
			var vs []float64
			for _, r := range rs {
				if v, ok := r.Metrics[unit]; ok {
					vs = append(vs, v)
				}
			}
			slices.Sort(vs)
			n := len(vs)
			m.Metrics[unit] = (vs[(n-1)/2] + vs[n/2]) / 2
		}
		for _, r := range rs {
			m.N += r.N
		}
		out[i] = m
	}
	return out
}

// Targets of BenchmarkAPI, in table order, and their column titles.
var (
	Targets      = []string{"kube", "kube-3", "canopy-1", "canopy-3"}
	TargetTitles = map[string]string{
		"kube":     "kube-apiserver + 1 etcd member",
		"kube-3":   "kube-apiserver + 3 etcd members",
		"canopy-1": "Canopy, 1 replica",
		"canopy-3": "Canopy, 3 replicas",
	}
)

// Baseline pairs a Canopy target with the kube-apiserver target it is
// measured against.
type Baseline struct {
	Target string // a Canopy target
	Kube   string // the kube-apiserver target it is compared with
	Title  string // of the table's ratio column
}

// Baselines are the comparisons the report makes, in the order of the
// ratio columns: like for like in what a write waits for. One Canopy
// replica fsyncs once per write, as one etcd member does; three Raft
// replicas wait for a quorum of two (the leader's fsync and a follower's),
// as three etcd members do.
var Baselines = []Baseline{
	{Target: "canopy-1", Kube: "kube", Title: "Canopy, 1 replica vs kube, 1 etcd member"},
	{Target: "canopy-3", Kube: "kube-3", Title: "Canopy, 3 replicas vs kube, 3 etcd members"},
}

// BaselineOf returns the kube-apiserver target that target is compared
// with, and false for a target that is compared with none.
func BaselineOf(target string) (Baseline, bool) {
	for _, b := range Baselines {
		if b.Target == target {
			return b, true
		}
	}
	return Baseline{}, false
}

// Goal is the factor by which the root should beat kube-apiserver on every
// operation (issue 10).
const Goal = 1.5

// Comparison is one row of the side-by-side table: an operation's figure
// on each target.
type Comparison struct {
	Op           string
	Unit         string // "ops/s", "p50-ms", …
	HigherBetter bool
	Values       map[string]float64 // by target; missing when not measured
}

// Advantage is how many times better target is than its baseline (see
// Baselines) on this row (throughput: target / kube; latency: kube /
// target), and whether both were measured. A target without a baseline has
// none; nor has one whose baseline was not measured: there is no fallback
// to another kube-apiserver target.
func (c Comparison) Advantage(target string) (float64, bool) {
	base, ok := BaselineOf(target)
	if !ok {
		return 0, false
	}
	k, ok1 := c.Values[base.Kube]
	v, ok2 := c.Values[target]
	if !ok1 || !ok2 || k <= 0 || v <= 0 {
		return 0, false
	}
	if c.HigherBetter {
		return v / k, true
	}
	return k / v, true
}

// Misses is the rows where target and its baseline are measured and target
// is less than Goal times better.
func Misses(rows []Comparison, target string) []Comparison {
	var out []Comparison
	for _, r := range rows {
		if a, ok := r.Advantage(target); ok && a < Goal {
			out = append(out, r)
		}
	}
	return out
}

// Compare builds the side-by-side rows from BenchmarkAPI's results
// (names API/target=<t>/op=<op>): throughput for writes, reads and the
// mixed load, p50 and p99 latency for all, for lists also until the body
// was in (before the client decoded it), for watch fan-out the delivery
// latency, and for every operation the servers' CPU time per operation.
func Compare(bs []Benchmark) []Comparison {
	var ops []string
	vals := map[string]map[string]map[string]float64{} // op → unit → target → value
	for _, b := range bs {
		parts := strings.Split(b.Name, "/")
		if len(parts) != 3 || parts[0] != "API" {
			continue
		}
		target, _ := strings.CutPrefix(parts[1], "target=")
		op, _ := strings.CutPrefix(parts[2], "op=")
		if vals[op] == nil {
			vals[op] = map[string]map[string]float64{}
			ops = append(ops, op)
		}
		for unit, v := range b.Metrics {
			if vals[op][unit] == nil {
				vals[op][unit] = map[string]float64{}
			}
			vals[op][unit][target] = v
		}
	}
	var rows []Comparison
	add := func(op, unit string, higher bool) {
		if v := vals[op][unit]; len(v) > 0 {
			rows = append(rows, Comparison{Op: op, Unit: unit, HigherBetter: higher, Values: v})
		}
	}
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op, "watch"):
			add(op, "p50-ms", false)
			add(op, "p99-ms", false)
			add(op, "last-p99-ms", false)
		case strings.HasPrefix(op, "list"):
			add(op, "p50-ms", false)
			add(op, "p99-ms", false)
			add(op, "wire-p50-ms", false)
			add(op, "wire-p99-ms", false)
		default:
			add(op, "ops/s", true)
			add(op, "p99-ms", false)
		}
		add(op, "server-cpu-ms", false)
	}
	return rows
}

// unitTitles says what each BenchmarkAPI metric is, for the tables.
var unitTitles = map[string]string{
	"ops/s":         "ops/s",
	"p50-ms":        "p50 latency (ms)",
	"p99-ms":        "p99 latency (ms)",
	"last-p99-ms":   "p99 until the last watcher (ms)",
	"wire-p50-ms":   "p50 until the body is in, not decoded (ms)",
	"wire-p99-ms":   "p99 until the body is in, not decoded (ms)",
	"server-cpu-ms": "server CPU per operation (ms)",
}

// CompareTable renders rows as a Markdown table: each target's figure and,
// for each of Baselines, the Canopy target's advantage over its baseline,
// in bold with "below 1.5×" where it misses Goal.
func CompareTable(rows []Comparison) string {
	var sb strings.Builder
	sb.WriteString("| operation | figure |")
	for _, t := range Targets {
		sb.WriteString(" " + TargetTitles[t] + " |")
	}
	for _, b := range Baselines {
		sb.WriteString(" " + b.Title + " |")
	}
	sb.WriteString("\n|---|---|" + strings.Repeat("---:|", len(Targets)+len(Baselines)) + "\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %s |", r.Op, unitTitles[r.Unit])
		for _, t := range Targets {
			if v, ok := r.Values[t]; ok {
				sb.WriteString(" " + Num(v) + " |")
			} else {
				sb.WriteString(" – |")
			}
		}
		for _, b := range Baselines {
			a, ok := r.Advantage(b.Target)
			switch {
			case !ok:
				sb.WriteString(" – |")
			case a < Goal:
				fmt.Fprintf(&sb, " **%s× (below %.1f×)** |", Ratio(a), Goal)
			default:
				fmt.Fprintf(&sb, " %s× |", Ratio(a))
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// Ratio formats a factor: two decimals below 10, one above.
func Ratio(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// Num formats a figure with three significant digits (thin thousands
// separators from 10 000), as the hand-written tables do.
func Num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	a := math.Abs(v)
	var s string
	switch {
	case a >= 1000 || (v == math.Trunc(v) && a < 1e15):
		s = strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if a >= 10000 {
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var parts []string
		for len(s) > 3 {
			parts = append([]string{s[len(s)-3:]}, parts...)
			s = s[:len(s)-3]
		}
		s = strings.Join(append([]string{s}, parts...), " ")
		if neg {
			s = "-" + s
		}
	}
	return s
}

// Sim is `relay simulate`'s JSON line, as the simulator writes it.
type Sim = sim.Summary

// ErrNoJSON is returned by ParseSim for output without a JSON line.
var ErrNoJSON = errors.New("bench: no JSON line in the simulator's output")

// ParseSim reads the simulator's stdout: the last line that is a JSON
// object.
func ParseSim(out []byte) (Sim, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range slices.Backward(lines) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var s Sim
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return Sim{}, fmt.Errorf("bench: simulator JSON: %w", err)
		}
		if f := s.FlatVsTree; f != nil && f.RootIdleShare == 0 {
			// An output from before root_idle_share: the simulator's rule.
			f.RootIdleShare = max(sim.IdleShare(f.TreeRootMarginalMs, f.TreeRootCPUMs), sim.IdleShare(f.FlatRootMarginalMs, f.FlatRootCPUMs))
			if f.RootIdleShare > sim.MaxIdleShare {
				f.RootMarginalRatio = 0
			}
		}
		return s, nil
	}
	return Sim{}, ErrNoJSON
}

// Region markers of the generated part of docs/benchmarks.md.
const (
	BeginMarker = "<!-- generated by make bench: begin -->"
	EndMarker   = "<!-- generated by make bench: end -->"
)

// ReplaceGenerated is ReplaceRegion between BeginMarker and EndMarker.
func ReplaceGenerated(doc, gen string) (string, error) {
	return ReplaceRegion(doc, BeginMarker, EndMarker, gen)
}
