package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/canopy-dev/canopy/test/bench
cpu: AMD EPYC
BenchmarkAPI/target=kube/op=create-2         	       1	   1800000 ns/op	       555.5 ops/s	        25.00 p50-ms	        80.00 p99-ms
BenchmarkAPI/target=kube-3/op=create-2       	       1	   2500000 ns/op	       400.0 ops/s	        30.00 p50-ms	       100.0 p99-ms
BenchmarkAPI/target=canopy-1/op=create-2     	       1	    432174 ns/op	      2314 ops/s	         5.838 p50-ms	        17.68 p99-ms
BenchmarkAPI/target=canopy-3/op=create-2     	       1	   1428571 ns/op	       700.0 ops/s	        20.00 p50-ms	        60.00 p99-ms
BenchmarkAPI/target=kube/op=list-100-2       	       1	   2000000 ns/op	       500.0 ops/s	         2.000 p50-ms	         4.000 p99-ms	         1.000 wire-p50-ms
--- FAIL: BenchmarkAPI/target=kube-3/op=list-100
BenchmarkAPI/target=canopy-1/op=list-100-2   	       1	   2416186 ns/op	       413.9 ops/s	         2.312 p50-ms	         5.638 p99-ms	         0.5000 wire-p50-ms
BenchmarkAPI/target=canopy-3/op=list-100-2   	       1	   4800000 ns/op	       208.3 ops/s	         4.800 p50-ms	         9.000 p99-ms
pkg: github.com/canopy-dev/canopy/relay/store
BenchmarkGet-2   	 5000000	       449.0 ns/op	       0 B/op	       0 allocs/op
PASS
`

func TestParseBench(t *testing.T) {
	bs, err := ParseBench(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 8 {
		t.Fatalf("parsed %d results, want 8: %+v", len(bs), bs)
	}
	g := bs[7]
	if g.Name != "Get" || g.Pkg != "github.com/canopy-dev/canopy/relay/store" || g.N != 5000000 ||
		g.Metrics["ns/op"] != 449 || g.Metrics["allocs/op"] != 0 || len(g.Units) != 3 {
		t.Errorf("last result = %+v", g)
	}
	if bs[2].Name != "API/target=canopy-1/op=create" || bs[2].Metrics["ops/s"] != 2314 {
		t.Errorf("third result = %+v", bs[2])
	}
	if _, err := ParseBench(strings.NewReader("BenchmarkX-2  1  12 ns/op 3\n")); err == nil {
		t.Error("a value without a unit parsed")
	}
}

// TestCompareAndMisses checks the like-for-like baselines: canopy-1 against
// kube (one etcd member), canopy-3 against kube-3 (three), never the other
// kube target when its own is missing. The sample's canopy-3 figures meet
// the goal against kube-3 and miss it against kube.
func TestCompareAndMisses(t *testing.T) {
	bs, err := ParseBench(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	rows := Compare(bs)
	// create: ops/s and p99; list-100: p50, p99 and until the body was in.
	if len(rows) != 5 || rows[0].Op != "create" || rows[0].Unit != "ops/s" || rows[2].Unit != "p50-ms" || rows[4].Unit != "wire-p50-ms" {
		t.Fatalf("rows = %+v", rows)
	}
	for _, c := range []struct {
		row    int
		target string
		want   float64 // 0: no advantage
	}{
		{0, "canopy-1", 2314 / 555.5}, // vs kube
		{1, "canopy-1", 80 / 17.68},   // latency: kube / canopy
		{2, "canopy-1", 2.000 / 2.312},
		{4, "canopy-1", 1.000 / 0.5}, // until the body was in
		{0, "canopy-3", 700.0 / 400}, // vs kube-3, not kube (1.26)
		{1, "canopy-3", 100.0 / 60},  // vs kube-3, not kube (1.33)
		{2, "canopy-3", 0},           // kube-3 not measured: no ratio, kube is not its stand-in
		{3, "canopy-3", 0},
		{0, "kube-3", 0}, // a baseline has no baseline
		{0, "canopy-9", 0},
	} {
		a, ok := rows[c.row].Advantage(c.target)
		switch {
		case c.want == 0 && ok:
			t.Errorf("%s %s: advantage %v, want none", rows[c.row].Op, c.target, a)
		case c.want != 0 && (!ok || math.Abs(a-c.want) > 1e-9):
			t.Errorf("%s %s %s: advantage %v (%v), want %v", rows[c.row].Op, rows[c.row].Unit, c.target, a, ok, c.want)
		}
	}
	if miss := Misses(rows, "canopy-1"); len(miss) != 2 || miss[0].Op != "list-100" || miss[1].Op != "list-100" {
		t.Errorf("canopy-1 misses = %+v, want both list-100 rows", miss)
	}
	if miss := Misses(rows, "canopy-3"); len(miss) != 0 {
		t.Errorf("canopy-3 misses = %+v, want none: create meets the goal against kube-3, list-100 has no kube-3 figure", miss)
	}

	table := CompareTable(rows)
	lines := strings.Split(table, "\n")
	for _, want := range []string{
		"| operation | figure | kube-apiserver + 1 etcd member | kube-apiserver + 3 etcd members | Canopy, 1 replica | Canopy, 3 replicas | " +
			"Canopy, 1 replica vs kube, 1 etcd member | Canopy, 3 replicas vs kube, 3 etcd members |",
		"|---|---|---:|---:|---:|---:|---:|---:|",
		"| create | ops/s | 556 | 400 | 2314 | 700 | 4.17× | 1.75× |",
		"| create | p99 latency (ms) | 80 | 100 | 17.7 | 60 | 4.52× | 1.67× |",
		"| list-100 | p50 latency (ms) | 2 | – | 2.31 | 4.80 | **0.87× (below 1.5×)** | – |",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line\n%s\nin\n%s", want, table)
		}
	}
}

func TestParseSim(t *testing.T) {
	out := []byte("progress…\n{\"scenario\":\"flat-vs-tree\",\"topology\":\"1x10x10\",\"edges\":100," +
		"\"flat_vs_tree\":{\"root_bytes_ratio\":9.5,\"tree_p99_ms\":120},\"ok\":true}\n")
	s, err := ParseSim(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Edges != 100 || s.FlatVsTree == nil || s.FlatVsTree.RootBytesRatio != 9.5 || !s.OK || s.Partition != nil {
		t.Errorf("parsed %+v", s)
	}
	if _, err := ParseSim([]byte("failed to start\n")); err != ErrNoJSON {
		t.Errorf("no JSON: err = %v, want ErrNoJSON", err)
	}
}

func TestReplaceGenerated(t *testing.T) {
	doc := "# B\n\nintro\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\n## Kept\n"
	got, err := ReplaceGenerated(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# B\n\nintro\n\n" + BeginMarker + "\nnew\n" + EndMarker + "\n\n## Kept\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := ReplaceGenerated("# B\n"+EndMarker+"\n"+BeginMarker+"\n", "x"); err == nil {
		t.Error("markers in the wrong order accepted")
	}
	got, _ = ReplaceGenerated("# B\n", "gen\n")
	if !strings.HasSuffix(got, BeginMarker+"\ngen\n"+EndMarker+"\n") {
		t.Errorf("without markers: %q", got)
	}
}

func TestNumAndPercentile(t *testing.T) {
	for v, want := range map[float64]string{12345.6: "12 346", 2314: "2314", 555.5: "556", 25.04: "25.0", 73: "73", 0: "0", 5.838: "5.84", 0.4567: "0.457"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p := Percentile(lat, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v", p)
	}
	if p := Percentile(lat, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 of 1..100 ms = %v", p)
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

// Medians merges the rounds of -count=N into one result per benchmark,
// with each metric's median.
func TestMedians(t *testing.T) {
	out := `pkg: example.com/bench
BenchmarkAPI/target=kube/op=create-2   1   3 ns/op   100 ops/s   9.0 p99-ms
BenchmarkAPI/target=kube/op=create-2   1   1 ns/op   300 ops/s   1.0 p99-ms
BenchmarkAPI/target=canopy-1/op=create-2   1   1 ns/op   500 ops/s   2.0 p99-ms
BenchmarkAPI/target=kube/op=create-2   1   2 ns/op   200 ops/s   5.0 p99-ms
BenchmarkAPI/target=canopy-1/op=create-2   1   1 ns/op   700 ops/s   4.0 p99-ms
`
	bs, err := ParseBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	ms := Medians(bs)
	if len(ms) != 2 || ms[0].Name != "API/target=kube/op=create" || ms[1].Name != "API/target=canopy-1/op=create" {
		t.Fatalf("merged = %+v", ms)
	}
	for _, c := range []struct {
		i          int
		unit       string
		want       float64
		iterations int
	}{
		{0, "ops/s", 200, 3}, {0, "p99-ms", 5, 3}, {0, "ns/op", 2, 3},
		{1, "ops/s", 600, 2}, {1, "p99-ms", 3, 2}, // even: the mean of the middle two
	} {
		if got := ms[c.i].Metrics[c.unit]; got != c.want || ms[c.i].N != c.iterations {
			t.Errorf("%s %s = %v (N %d), want %v (N %d)", ms[c.i].Name, c.unit, got, ms[c.i].N, c.want, c.iterations)
		}
	}
	if len(bs) != 5 || bs[0].Metrics["ops/s"] != 100 {
		t.Errorf("Medians changed its input: %+v", bs[0])
	}
}
